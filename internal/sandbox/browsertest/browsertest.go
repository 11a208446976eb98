// Package browsertest drives the console in a real, headless Chromium
// (Debian's package; .ci/run installs it) for tests: start a browser, run
// actions with a generous bound, wait for text, and keep screenshots of
// every step as artifacts.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts headless Chromium (Debian's package, installed by
// .ci/run) and returns a tab.
func Browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs it")
		}
		t.Skip("chromium not installed (apt-get install chromium); the browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil { // starts the browser
		t.Fatal(err)
	}
	return tab
}

// artifacts is where screenshots go: $PURSER_TEST_ARTIFACTS, else a folder
// under the system temp dir that outlives the test.
func artifacts(t *testing.T) string {
	dir := os.Getenv("PURSER_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "purser-test-artifacts")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot keeps a picture of the whole page as the artifact name.png,
// to see afterwards what a test saw.
func Screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// Do runs browser actions with a generous bound.
func Do(ctx context.Context, t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		failed, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		Screenshot(failed, t, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// GoTo moves the console to another page the way a link does; a
// navigation that only changes the hash fires no load event to wait for.
func GoTo(hash string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = `+strconv.Quote(hash)))
		return chromedp.Void{}, err
	}
}

// WaitText waits until the element's text contains want. The bound is as
// generous as the CLI tests': what the page waits for may be a Job that
// runs on a sandbox cluster of a loaded machine.
func WaitText(ctx context.Context, t *testing.T, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var text string
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		text, err = chromedp.Run(cctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		if err == nil && strings.Contains(text, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never showed %q (last: %q)", sel, want, text)
}
