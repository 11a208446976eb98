package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// rawRequest sends a request's head and the first bytes of a body that
// claims to be larger, on a connection of its own, and returns it.
func rawRequest(t *testing.T, h *harness, token string) net.Conn {
	t.Helper()
	u, _ := url.Parse(h.url)
	var d net.Dialer
	conn, err := d.DialContext(t.Context(), "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST /api/v1/runnables HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/yaml\r\nContent-Length: 100000\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\napiVersion: purser.io/v1alpha1\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestEarlyErrorsClose: a request without a valid token is answered 401
// before its body is read, and the connection closes, however slowly the
// body would come. The server here would wait an hour for a body, so the
// answer cannot be the read timeout's doing.
func TestEarlyErrorsClose(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0], func(_ *server.Config, hs *http.Server) { hs.ReadTimeout = time.Hour })
	for _, token := range []string{"", "not-a-token"} {
		conn := rawRequest(t, h, token)
		if err := conn.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("token %q: no answer before the body was sent: %v", token, err)
		}
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("token %q: %d, Connection: %q; want 401 closing the connection", token, resp.StatusCode, resp.Header.Get("Connection"))
		}
		// The close checked below may cut the 401's body short.
		_, _ = io.Copy(io.Discard, resp.Body)
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("token %q: the connection stays open after the 401 (%v)", token, err)
		}
	}
}

// TestSlowBodyCut: an authenticated client trickling its body is cut off
// by the read timeout instead of holding the connection.
func TestSlowBodyCut(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0], func(_ *server.Config, hs *http.Server) { hs.ReadTimeout = time.Second })
	conn := rawRequest(t, h, h.tokens["alice"])
	closed := make(chan struct{})
	go func() {
		// EOF or a reset: either way the server closed the connection.
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	// Trickle a byte every 200 ms until the server gives up on the body
	// (closed, or a write fails).
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, false, func(context.Context) (bool, error) {
		select {
		case <-closed:
			return true, nil
		default:
		}
		_, err := conn.Write([]byte("#"))
		return err != nil, nil
	})
	if err != nil {
		t.Fatal("a trickled body held the connection for two minutes")
	}
}

// TestRateLimits: requests without a valid token from one address are
// limited more strictly than a user's, and both answer 429 with
// Retry-After; one client's limit does not touch another's.
func TestRateLimits(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) {
		// Refills are negligible within the test: what counts is the burst.
		cfg.Limits = server.Limits{UserRate: 0.001, UserBurst: 5, FailedAuthRate: 0.001, FailedAuthBurst: 3}
	})
	h.tokens["guesser"] = "not-a-token"
	for range 3 {
		h.get("guesser", "/api/v1/whoami").want(t, http.StatusUnauthorized)
	}
	r := h.get("guesser", "/api/v1/whoami").want(t, http.StatusTooManyRequests)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("429 without a Retry-After: %q", r.header.Get("Retry-After"))
	}
	// A valid token from the same address is not refused for the guesses.
	for range 5 {
		h.get("alice", "/api/v1/whoami").want(t, http.StatusOK)
	}
	r = h.get("alice", "/api/v1/whoami").want(t, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.str("message"), "alice") {
		t.Fatalf("user limit: %s (Retry-After %q)", r.raw, r.header.Get("Retry-After"))
	}
	h.get("bob", "/api/v1/whoami").want(t, http.StatusOK)
}

// TestSignInExchangeLimit: the console's code exchange needs no token, so
// each call counts against its address's limit of requests without one.
func TestSignInExchangeLimit(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) {
		cfg.Limits = server.Limits{FailedAuthRate: 0.001, FailedAuthBurst: 2}
	})
	body := []byte(`{"code": "c", "codeVerifier": "v", "redirectURI": "http://127.0.0.1/"}`)
	for range 2 {
		h.do("", "POST", "/api/v1/auth/token", "application/json", body).want(t, http.StatusNotFound) // no provider
	}
	r := h.do("", "POST", "/api/v1/auth/token", "application/json", body).want(t, http.StatusTooManyRequests)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("429 without a Retry-After: %q", r.header.Get("Retry-After"))
	}
	// The same address with a valid token is not refused for it.
	h.get("alice", "/api/v1/whoami").want(t, http.StatusOK)
}

// TestHeaders: security headers on every answer, the console's and the
// API's; API answers are never cached.
func TestHeaders(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	for _, c := range []struct {
		user, path string
		api        bool
	}{{"", "/", false}, {"", "/app.js", false}, {"alice", "/api/v1/whoami", true}, {"", "/api/v1/whoami", true}} {
		r := h.get(c.user, c.path)
		for header, want := range map[string]string{
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
			"X-Frame-Options":        "DENY",
		} {
			if got := r.header.Get(header); got != want {
				t.Errorf("%s: %s is %q, want %q", c.path, header, got, want)
			}
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", c.path, csp)
		}
		if c.api && r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", c.path, r.header.Get("Cache-Control"))
		}
	}
}

// TestMethodNotAllowed: a path served for other methods answers 405 with
// Allow; an unknown path 404.
func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/api/v1/runnables", "GET, POST"},
		{"PATCH", "/api/v1/runnables/team-a/x", "GET, PUT, DELETE"},
		{"GET", "/api/v1/runnables/team-a/x/approve", "POST"},
		{"POST", "/api/v1/deployables/team-a/x", "GET, PUT, DELETE"},
		{"DELETE", "/api/v1/history", "GET"},
	} {
		r := h.do("alice", c.method, c.path, "", nil)
		if r.code != http.StatusMethodNotAllowed || r.header.Get("Allow") != c.allow || r.str("reason") != "MethodNotAllowed" {
			t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", c.method, c.path, r.code, r.header.Get("Allow"), r.raw, c.allow)
		}
	}
	h.get("alice", "/api/v1/nothing").want(t, http.StatusNotFound)
}

// sse is one inventory watch's stream of "TYPE name" lines.
type sse struct {
	cancel context.CancelFunc
	events chan string
}

func (h *harness) watch(t *testing.T, user, query string) (*sse, response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/api/v1/inventory?watch=true&"+query, http.NoBody)
	req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return nil, response{code: resp.StatusCode, header: resp.Header, raw: raw}
	}
	w := &sse{cancel: cancel, events: make(chan string, 4096)}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				field := `"name":"`
				if typ == "CLOSED" {
					field = `"reason":"`
				}
				_, name, _ := strings.Cut(v, field)
				name, _, _ = strings.Cut(name, `"`)
				w.events <- typ + " " + name
			}
		}
	}()
	return w, response{code: http.StatusOK}
}

func (w *sse) next(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-w.events:
		if got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no event; want %q", want)
	}
}

// TestWatchLimits: watches are capped per user and in all (429), and
// identical selections share one poll, whose changes reach every watch of
// it. A selection of more records than one page is watched whole.
func TestWatchLimits(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) {
		cfg.Limits = server.Limits{WatchesPerUser: 2, Watches: 3}
	})
	ctx := context.Background()
	now := time.Now().UTC()
	put := func(rows ...store.InventoryRow) {
		t.Helper()
		if err := h.store.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Inventory().Upsert(ctx, rows); return err }); err != nil {
			t.Fatal(err)
		}
	}
	row := func(ns, name string) store.InventoryRow {
		return store.InventoryRow{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, UID: ns + "-" + name,
			ResourceVersion: "1", Health: "Healthy", ObservedAt: now}
	}
	put(row("team-a", "first"))

	a1, _ := h.watch(t, "bob", "namespace=team-a")
	a2, _ := h.watch(t, "bob", "namespace=team-a")
	a1.next(t, "ADDED first")
	a2.next(t, "ADDED first")
	if _, r := h.watch(t, "bob", "namespace=team-a&kind=ConfigMap"); r.code != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("bob's third watch: %d %s", r.code, r.raw)
	}
	a3, _ := h.watch(t, "alice", "namespace=team-a")
	a3.next(t, "ADDED first")
	metric := func(name string) string {
		for line := range strings.Lines(string(h.get("", "/metrics").raw)) {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if w, p := metric("purser_api_inventory_watches"), metric("purser_api_inventory_watch_polls"); w != "3" || p != "1" {
		t.Fatalf("three watches of one selection: %s watches, %s polls; want 3 and 1", w, p)
	}
	if _, r := h.watch(t, "carol", "namespace=team-a"); r.code != http.StatusTooManyRequests {
		t.Fatalf("a watch past the server's cap: %d %s", r.code, r.raw)
	}
	put(row("team-a", "second"))
	for _, w := range []*sse{a1, a2, a3} {
		w.next(t, "ADDED second")
	}

	// One closes; the slot is free again, after the server has seen it go.
	a3.cancel()
	sandboxtest.Eventually(t, streamtest.Timeout, "the closed watch released", func(context.Context) error {
		if n := metric("purser_api_inventory_watches"); n != "2" {
			return fmt.Errorf("purser_api_inventory_watches is %s", n)
		}
		return nil
	})
	var rows []store.InventoryRow
	for i := range 1500 {
		rows = append(rows, row("team-big", fmt.Sprintf("cm-%04d", i)))
	}
	put(rows...)
	big, r := h.watch(t, "admin", "namespace=team-big&fields=meta")
	if big == nil {
		t.Fatalf("a watch of 1,500 records: %d %s", r.code, r.raw)
	}
	for range 1500 {
		select {
		case ev := <-big.events:
			if !strings.HasPrefix(ev, "ADDED cm-") {
				t.Fatalf("event %q", ev)
			}
		case <-time.After(time.Minute):
			t.Fatal("the watch did not send every record of its selection")
		}
	}
}

// nextPrefix is next for an event whose text starts with want.
func (w *sse) nextPrefix(t *testing.T, want string) string {
	t.Helper()
	select {
	case got := <-w.events:
		if !strings.HasPrefix(got, want) {
			t.Fatalf("event %q, want one starting %q", got, want)
		}
		return got
	case <-time.After(time.Minute):
		t.Fatalf("no event; want %q", want)
	}
	return ""
}

// TestWatchesLoseTheirRights: an open watch is authorized again when the
// policy or the tokens file changes, and ends (CLOSED, saying why) as
// soon as its user may no longer read what it selects; connecting again
// is refused. Every watch also ends after a time the server sets.
func TestWatchesLoseTheirRights(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	ctx := context.Background()
	row := store.InventoryRow{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "first", UID: "u1",
		ResourceVersion: "1", Health: "Healthy", ObservedAt: time.Now().UTC()}
	if err := h.store.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{row}); return err }); err != nil {
		t.Fatal(err)
	}

	bob, _ := h.watch(t, "bob", "namespace=team-a")
	bob.next(t, "ADDED first")
	alice, _ := h.watch(t, "alice", "namespace=team-a")
	alice.next(t, "ADDED first")

	// bob is no longer a viewer of team-a.
	p := testPolicy()
	nsp := p.Namespaces["team-a"]
	nsp.Roles = map[policy.Role][]string{policy.RoleEditor: {"alice"}, policy.RoleApprover: {"carol"}}
	p.Namespaces["team-a"] = nsp
	start := time.Now()
	h.setPolicy(t, p)
	reason := bob.nextPrefix(t, "CLOSED the policy no longer lets bob read this")
	t.Logf("bob's watch ended %v after the policy was written: %s", time.Since(start).Round(time.Millisecond), reason)
	if _, r := h.watch(t, "bob", "namespace=team-a"); r.code != http.StatusForbidden {
		t.Fatalf("bob watching again: %d %s, want 403", r.code, r.raw)
	}

	// alice's token leaves the tokens file.
	h.removeToken(t, "alice")
	alice.nextPrefix(t, "CLOSED the credential of this watch is no longer valid")

	// However allowed, a watch ends after the server's time.
	short := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) {
		cfg.Limits = server.Limits{WatchTimeout: 200 * time.Millisecond, FailedAuthBurst: 1 << 20}
	})
	w, r := short.watch(t, "admin", "namespace=team-a")
	if w == nil {
		t.Fatalf("a watch: %d %s", r.code, r.raw)
	}
	w.nextPrefix(t, "CLOSED the watch was open for as long as the server keeps one")
}
