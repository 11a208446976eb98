package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/internal/api/auth/oidctest"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A user defined only in the identity provider (Dex) signs in to `purser
// up` with the console (authorization code flow with PKCE) and with
// `purser login` (device flow, the provider's pages driven in Chromium),
// gets exactly the rights of their group, keeps working after the ID
// token expires (the CLI refreshes it), and an edit of the policy file
// takes effect without a restart.
func TestSingleSignOn(t *testing.T) {
	tab := browsertest.Browser(t)
	const ttl = 20 * time.Second
	dex := oidctest.Start(t, oidctest.Config{IDTokenTTL: ttl,
		Users: []oidctest.User{{Email: "erin@example.com", Password: "erin-pw", Groups: []string{"team-a"}}}})
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	policyPath := filepath.Join(data, "policy.yaml")
	writePolicy(t, policyPath, "admins: [admin]\nnamespaces:\n  team-a:\n    roles:\n      editor: [\"group:team-a\"]\n")
	clientConfig := filepath.Join(t.TempDir(), "client.yaml")
	cache := t.TempDir()
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--client-config", clientConfig,
		"--oidc-issuer-url", dex.Issuer, "--oidc-client-id", oidctest.ClientID)
	up.waitLine(t, "purser is ready at http://", 5*time.Minute)
	server := regexp.MustCompile(`purser is ready at (http://\S+)`).FindStringSubmatch(up.output())[1]

	// The console: the login page offers single sign-on.
	browsertest.Do(tab, t, "open the console", chromedp.Navigate(server+"/"), chromedp.WaitVisible(chromedp.CSS("#sso-login")))
	browsertest.Do(tab, t, "sign in at the provider", chromedp.Click(chromedp.CSS("#sso-login")),
		chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.SendKeys(chromedp.CSS("#login"), "erin@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "erin-pw"),
		chromedp.Click(chromedp.CSS("#submit-login")))
	browsertest.WaitText(tab, t, "#user", "erin@example.com")
	browsertest.Screenshot(tab, t, "sso-console-signed-in")

	// The command line: purser login prints where to sign in.
	// The test's context ends it, should the test end first.
	login := exec.CommandContext(t.Context(), bin, "login")
	login.Env = ssoEnv(clientConfig, cache)
	stdout, err := login.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	login.Stderr = login.Stdout
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var output strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			output.WriteString(sc.Text() + "\n")
			mu.Unlock()
			lines <- sc.Text()
		}
		close(lines)
	}()
	var verifyURL string
	for line := range lines {
		if u, ok := strings.CutPrefix(line, "To sign in, open "); ok {
			verifyURL = strings.Fields(u)[0]
			break
		}
	}
	if verifyURL == "" {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("purser login printed no address:\n%s", output.String())
	}
	browsertest.Do(tab, t, "confirm the code for the CLI", chromedp.Navigate(verifyURL),
		chromedp.WaitVisible(chromedp.CSS("#user_code")), chromedp.Click(chromedp.CSS("#submit-login")))
	browsertest.Do(tab, t, "sign in for the CLI",
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#login"), "erin@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "erin-pw"),
		chromedp.Click(chromedp.CSS("#submit-login")))
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- login.Wait()
	}()
	select {
	case err := <-done:
		mu.Lock()
		out := output.String()
		mu.Unlock()
		if err != nil || !strings.Contains(out, "logged in to "+server+" as erin@example.com") {
			t.Fatalf("purser login: %v\n%s\ndex:\n%s", err, out, dex.Log())
		}
	case <-time.After(2 * time.Minute):
		browsertest.Screenshot(tab, t, "sso-device-stuck")
		t.Fatalf("purser login did not finish:\n%s", output.String())
	}
	browsertest.Screenshot(tab, t, "sso-device-done")

	// Exactly the group's rights: editor in team-a, nothing elsewhere.
	who := ssoCLI(t, bin, clientConfig, cache, true, "get", "runnables", "-n", "team-a")
	mustContain(t, "get in team-a", who, "No runnables")
	apply := exec.CommandContext(t.Context(), bin, "apply", "-f", "-")
	apply.Env = ssoEnv(clientConfig, cache)
	apply.Dir = "../.."
	apply.Stdin = strings.NewReader(strings.Replace(mustRead(t, "../../examples/runnable-job.yaml"), "name: nightly-report", "name: erins-report", 1))
	if out, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(out), "submitted") {
		t.Fatalf("erin's apply in team-a: %v\n%s", err, out)
	}
	mustContain(t, "history of team-a", ssoCLI(t, bin, clientConfig, cache, true, "history", "-n", "team-a"), "erin@example.com")
	mustContain(t, "get in team-b", ssoCLI(t, bin, clientConfig, cache, false, "get", "runnables", "-n", "team-b"), "may not")
	mustContain(t, "delete a cluster", ssoCLI(t, bin, clientConfig, cache, false, "delete", "cluster", "nope"), "may not")

	// The policy edited in place: team-b readable by the group, at once.
	writePolicy(t, policyPath, "admins: [admin]\nnamespaces:\n  team-a:\n    roles:\n      editor: [\"group:team-a\"]\n  team-b:\n    roles:\n      viewer: [\"group:team-a\"]\n")
	sandboxtest.Eventually(t, time.Minute, "the policy edit in effect", func(context.Context) error {
		if out, ok := ssoCLIResult(t.Context(), bin, clientConfig, cache, "get", "runnables", "-n", "team-b"); !ok {
			return fmt.Errorf("get runnables -n team-b:\n%s", out)
		}
		return nil
	})
	mustContain(t, "apply in team-b, a viewer", ssoCLIApplyTeamB(t, bin, clientConfig, cache), "may not")

	// A broken edit keeps the last good policy, and says so.
	writePolicy(t, policyPath, "admins: [admin\n")
	sandboxtest.Eventually(t, time.Minute, "/readyz reporting the broken policy", func(context.Context) error {
		if ready := httpGetAs(t, server+"/readyz", adminToken(t, data)); !strings.Contains(ready, "policy.yaml") || !strings.Contains(ready, "serving the version loaded at") {
			return fmt.Errorf("/readyz: %s", ready)
		}
		return nil
	})
	// Without an administrator's token, only the verdict.
	if ready := httpGet(t, server+"/readyz"); strings.Contains(ready, "policy.yaml") || !strings.Contains(ready, `"status":"ready"`) {
		t.Errorf("/readyz without a token: %s", ready)
	}
	mustContain(t, "metrics", httpGet(t, server+"/metrics"), "purser_auth_reload_failing 1")
	ssoCLI(t, bin, clientConfig, cache, true, "get", "runnables", "-n", "team-b")

	// Past the ID token's lifetime, the CLI refreshes it.
	before := cachedLogin(t, cache, server)
	if wait := time.Until(before.Expiry); wait > 0 {
		time.Sleep(wait + time.Second) // the provider's clock decides; nothing to poll
	}
	ssoCLI(t, bin, clientConfig, cache, true, "get", "runnables", "-n", "team-a")
	after := cachedLogin(t, cache, server)
	if after.IDToken == before.IDToken || !after.Expiry.After(before.Expiry) {
		t.Fatalf("the expired ID token was not refreshed: expiry %v -> %v", before.Expiry, after.Expiry)
	}
	mustContain(t, "logout", ssoCLI(t, bin, clientConfig, cache, true, "logout"), "logged out")
}

func ssoEnv(clientConfig, cache string) []string {
	return append(os.Environ(), "PURSER_CONFIG="+clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=", "XDG_CACHE_HOME="+cache)
}

func ssoCLIResult(ctx context.Context, bin, clientConfig, cache string, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = ssoEnv(clientConfig, cache)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// ssoCLI runs a client command as the signed-in user; want says whether
// it must succeed or fail.
func ssoCLI(t *testing.T, bin, clientConfig, cache string, want bool, args ...string) string {
	t.Helper()
	out, ok := ssoCLIResult(t.Context(), bin, clientConfig, cache, args...)
	if ok != want {
		t.Fatalf("purser %s: succeeded=%v, want %v\n%s", strings.Join(args, " "), ok, want, out)
	}
	return out
}

func ssoCLIApplyTeamB(t *testing.T, bin, clientConfig, cache string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "apply", "-f", "-")
	cmd.Env = ssoEnv(clientConfig, cache)
	cmd.Stdin = strings.NewReader(strings.NewReplacer("name: nightly-report", "name: erins-b", "namespace: team-a", "namespace: team-b").
		Replace(mustRead(t, "../../examples/runnable-job.yaml")))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a viewer applied in team-b:\n%s", out)
	}
	return string(out)
}

func cachedLogin(t *testing.T, cache, server string) client.Login {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", cache)
	path, err := client.LoginCachePath(server)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	var l client.Login
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Mode().Perm() != 0o600 {
		t.Fatalf("login cache mode %v, want 0600", fi.Mode().Perm())
	}
	return l
}

// writePolicy replaces the policy file as an editor does: a new file
// renamed over the old one.
func writePolicy(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	return httpGetAs(t, url, "")
}

// httpGetAs is httpGet with a bearer token, unless it is empty.
func httpGetAs(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// adminToken is the admin token `purser up` wrote to its data folder.
func adminToken(t *testing.T, data string) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(token))
}
