// Package oidctest starts a real OpenID Connect provider for tests: Dex,
// built from its Go module (tools/dex, sandbox.EnsureDex) and cached as
// the sandbox binaries are, with users defined in it alone (its static
// passwords, with groups) and one public client for the console and the
// command line.
package oidctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/platform/localport"
	"github.com/purser-io/purser/internal/sandbox"
)

// ClientID is the public client that purser's console and CLI use.
const ClientID = "purser"

// User is a person known to the provider only.
type User struct {
	Email, Password string
	Groups          []string
}

// Config are the provider's users and how long its ID tokens last.
type Config struct {
	Users []User
	// IDTokenTTL is the ID tokens' lifetime; 0: Dex's default (24 h).
	IDTokenTTL time.Duration
}

// Dex is a running provider.
type Dex struct {
	Issuer  string
	cmd     *exec.Cmd
	stopFn  context.CancelFunc // ends cmd: SIGTERM, a kill 10 s later
	done    chan struct{}      // closed when cmd has exited, exitErr set
	exitErr error
	log     *bytes.Buffer
}

// Start builds Dex on first use (minutes, once per machine) and starts it
// on a free loopback port; it is stopped when the test ends.
func Start(t testing.TB, opts Config) *Dex {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := sandbox.EnsureDex(ctx, sandbox.BuildConfig{})
	if err != nil {
		t.Fatalf("build dex: %v", err)
	}
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	d := &Dex{Issuer: "http://" + addr + "/dex", done: make(chan struct{}), log: &bytes.Buffer{}}

	var passwords []map[string]any
	for i, u := range opts.Users {
		// Dex refuses a cost below 10 at login.
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), bcrypt.DefaultCost)
		if err != nil {
			t.Fatal(err)
		}
		passwords = append(passwords, map[string]any{
			"email": u.Email, "hash": string(hash), "username": strings.Split(u.Email, "@")[0],
			"userID": fmt.Sprintf("user-%d", i), "groups": u.Groups, "emailVerified": true,
		})
	}
	config := map[string]any{
		"issuer":  d.Issuer,
		"storage": map[string]any{"type": "memory"},
		// The console calls the token endpoint from its own origin.
		"web":    map[string]any{"http": addr, "allowedOrigins": []string{"*"}},
		"logger": map[string]any{"level": "info"},
		"oauth2": map[string]any{
			"skipApprovalScreen": true,
			"passwordConnector":  "local",
		},
		"enablePasswordDB": true,
		"staticPasswords":  passwords,
		// A public client without redirect URIs may use loopback
		// redirects on any port and the device flow (Dex's
		// validateRedirectURI, server/oauth2.go).
		"staticClients": []map[string]any{{"id": ClientID, "name": "purser", "public": true}},
	}
	if opts.IDTokenTTL > 0 {
		config["expiry"] = map[string]any{"idTokens": opts.IDTokenTTL.String()}
	}
	dir := t.TempDir()
	data, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not the test's context: that one ends before the cleanups that may
	// still need the provider, and Dex is stopped by its own cleanup.
	runCtx, stop := context.WithCancel(context.Background())
	d.stopFn = stop
	d.cmd = exec.CommandContext(runCtx, bin, "serve", cfgPath)
	d.cmd.Cancel = func() error { return d.cmd.Process.Signal(syscall.SIGTERM) }
	d.cmd.WaitDelay = 10 * time.Second
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		stop()
		t.Fatal(err)
	}
	go func() { d.exitErr = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.stop)

	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.Issuer+"/.well-known/openid-configuration", http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case <-d.done:
			t.Fatalf("dex exited (%v): %s", d.exitErr, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dex not ready after a minute: %v\n%s", err, d.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *Dex) stop() {
	d.stopFn()
	<-d.done
}

// Log is what Dex printed so far.
func (d *Dex) Log() string { return d.log.String() }

// PasswordToken signs a user in with the resource owner password grant
// and returns the ID token, for tests that need a real token without a
// browser.
func (d *Dex) PasswordToken(t testing.TB, email, password string) string {
	t.Helper()
	form := url.Values{
		"grant_type": {"password"}, "username": {email}, "password": {password},
		"scope": {"openid email groups profile"}, "client_id": {ClientID},
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
		Desc    string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.IDToken == "" {
		t.Fatalf("password grant for %s: %s %v %s %s\n%s", email, resp.Status, err, out.Error, out.Desc, d.Log())
	}
	return out.IDToken
}
