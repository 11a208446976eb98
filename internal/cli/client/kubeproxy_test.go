package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The proxy adds the user's credential, so it answers only requests
// addressed to it: a page that renamed its own host to 127.0.0.1 (DNS
// rebinding) sends its own name as Host and is refused before anything
// reaches purser.
func TestKubeProxyHost(t *testing.T) {
	var reached atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	}))
	defer upstream.Close()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- KubeProxy(ctx, ln, upstream.URL, func(context.Context) (string, error) { return "s3cret", nil })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, tc := range []struct {
		host string
		want int
	}{
		{ln.Addr().String(), http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST:" + port, http.StatusOK},
		{"attacker.example:" + port, http.StatusForbidden},
		{"attacker.example", http.StatusForbidden},
		{"127.0.0.1", http.StatusForbidden},
		{"127.0.0.1:1" + port, http.StatusForbidden},
	} {
		before := reached.Load()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/k8s/api/v1/namespaces/team-a/configmaps", http.NoBody)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s: %d %s, want %d", tc.host, resp.StatusCode, body, tc.want)
			continue
		}
		switch {
		case tc.want == http.StatusOK && string(body) != "Bearer s3cret":
			t.Errorf("Host %s: purser got credential %q", tc.host, body)
		case tc.want != http.StatusOK && (reached.Load() != before || !strings.Contains(string(body), "DNS rebinding") || strings.Contains(string(body), "s3cret")):
			t.Errorf("Host %s: refused with %q, purser reached: %v", tc.host, body, reached.Load() != before)
		}
	}
}
