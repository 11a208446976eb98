package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/internal/sandbox/browsertest"
)

// The console against the real thing: `purser up --sandbox 2`, a Job
// submitted from the browser runs on a sandbox cluster and reaches
// Succeeded on screen, a deployable's matrix turns Synced on both
// clusters, the inventory finds the Job, and the history tells it all.
func TestConsoleAgainstPurserUp(t *testing.T) {
	tab := browsertest.Browser(t)
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	clientConfig := filepath.Join(t.TempDir(), "client.yaml")
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "2", "--client-config", clientConfig)
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	link := regexp.MustCompile(`web console: (http://\S+)`).FindStringSubmatch(up.output())
	if link == nil {
		t.Fatalf("purser up printed no console link:\n%s", up.output())
	}

	// Not a terminal: the link carries no token, which is in admin.token.
	if strings.Contains(up.output(), "token=") {
		t.Fatalf("purser up printed the admin token to a pipe:\n%s", up.output())
	}
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Do(tab, t, "open the link", chromedp.Navigate(link[1]+"/#token="+strings.TrimSpace(string(token))), chromedp.WaitVisible(chromedp.CSS("#user")))
	browsertest.WaitText(tab, t, "#user", "admin")
	// The console opens on the farm: both sandbox clusters, in their data
	// centers, Ready and fresh.
	browsertest.WaitText(tab, t, `#farm [data-cluster="sandbox-1"] header`, "Ready")
	browsertest.WaitText(tab, t, `#farm [data-cluster="sandbox-2"] .records`, "fresh")
	browsertest.Screenshot(tab, t, "e2e-farm")
	browsertest.Do(tab, t, "submit a Job", browsertest.GoTo("#/runnables"), chromedp.WaitVisible(chromedp.CSS("#submit-new")), chromedp.Click(chromedp.CSS("#submit-new")), chromedp.WaitVisible(chromedp.CSS("#yaml")),
		chromedp.Click(chromedp.CSS("#send")), chromedp.WaitVisible(chromedp.CSS("#runnable")))
	browsertest.WaitText(tab, t, "#runnable", "Succeeded")
	browsertest.WaitText(tab, t, "#attempts", "sandbox-")
	browsertest.Screenshot(tab, t, "e2e-runnable-succeeded")

	cli(t, bin, clientConfig, "apply", "-f", "examples/deployable-configmap.yaml")
	browsertest.Do(tab, t, "open deployables", browsertest.GoTo("#/deployables"), chromedp.WaitVisible(chromedp.CSS(`#deployables td[data-cluster="sandbox-2"]`)))
	browsertest.WaitText(tab, t, `#deployables td[data-cluster="sandbox-1"]`, "Synced")
	browsertest.WaitText(tab, t, `#deployables td[data-cluster="sandbox-2"]`, "Synced")
	browsertest.Screenshot(tab, t, "e2e-deployables-synced")

	browsertest.Do(tab, t, "search the inventory", browsertest.GoTo("#/inventory"), chromedp.WaitVisible(chromedp.CSS("#i-kind")),
		chromedp.SendKeys(chromedp.CSS("#i-kind"), "Job\n"))
	browsertest.WaitText(tab, t, "#inventory", "hello-")
	browsertest.Screenshot(tab, t, "e2e-inventory")

	browsertest.Do(tab, t, "open history", browsertest.GoTo("#/history"), chromedp.WaitVisible(chromedp.CSS("#history")))
	browsertest.WaitText(tab, t, "#history", "succeeded on sandbox-")
	browsertest.WaitText(tab, t, "#chain", "chain intact")
	browsertest.Screenshot(tab, t, "e2e-history")

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
}
