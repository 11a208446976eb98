package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
)

// startAnchors runs the api's publisher of the chain's heads, as purser
// api does: declared and anchored before the first request, woken by every
// commit that appends to the chain.
func startAnchors(t testing.TB, db *store.Store, streams *stream.Client) *anchor.Publisher {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := anchor.New(anchor.Config{Store: db, Stream: streams, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	db.OnAuditCommit(p.Notify)
	if err := p.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// Only an admin, with a reason, begins a new record of anchors, and only
// once the stream holds none; the restart is itself in the chain, and
// verification then says where the record begins.
func TestRestartAnchors(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r0", "true")).want(t, http.StatusAccepted)
			body := func(reason string) []byte { b, _ := json.Marshal(map[string]string{"reason": reason}); return b }
			before := h.counts()
			h.do("alice", "POST", "/api/v1/history/anchors/restart", "application/json", body("why not")).want(t, http.StatusForbidden)
			h.do("admin", "POST", "/api/v1/history/anchors/restart", "application/json", body("  ")).want(t, http.StatusUnprocessableEntity)
			h.do("admin", "POST", "/api/v1/history/anchors/restart", "application/json", []byte(`{"reason": "x", "force": true}`)).want(t, http.StatusBadRequest)
			h.do("admin", "POST", "/api/v1/history/anchors/restart", "application/json", body("restored")).want(t, http.StatusConflict)
			if after := h.counts(); !maps.Equal(before, after) {
				t.Fatalf("refused restarts changed %v into %v", before, after)
			}

			// The stream is lost: verification fails until an admin restarts.
			if err := h.streams.JetStream().DeleteStream(t.Context(), stream.AuditStream); err != nil {
				t.Fatal(err)
			}
			if err := h.streams.DeclareAudit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if v := h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK); v.body["ok"] != false {
				t.Fatalf("verify with an empty stream: %s", v.raw)
			}
			v := h.do("admin", "POST", "/api/v1/history/anchors/restart", "application/json", body("stream lost in INC-7")).want(t, http.StatusOK)
			since, _ := v.body["record"].(map[string]any)["since"].(map[string]any)
			if v.body["ok"] != true || since["actor"] != "admin" || since["reason"] != "stream lost in INC-7" || since["seq"] != float64(2) {
				t.Fatalf("verify after the restart: %s", v.raw)
			}
			hist := h.get("admin", "/api/v1/history?action=restart-anchors").want(t, http.StatusOK)
			if items := hist.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["actor"] != "admin" {
				t.Fatalf("the restart is not in the chain: %s", hist.raw)
			}
		})
	}
}

// Without an identity provider, the sign-in endpoints say so, and need no
// token.
func TestAuthEndpointsWithoutProvider(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	v := h.get("", "/api/v1/auth/config").want(t, http.StatusOK)
	if len(v.body) != 0 {
		t.Fatalf("auth config without a provider: %s", v.raw)
	}
	h.do("", "POST", "/api/v1/auth/token", "application/json", []byte(`{"code":"c","codeVerifier":"v","redirectURI":"http://x/"}`)).want(t, http.StatusNotFound)
}
