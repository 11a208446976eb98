package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// countingStore counts the server's reads of the database.
type countingStore struct {
	server.Store
	reads *atomic.Int64
}

func (c countingStore) Read(ctx context.Context, fn func(tx *store.Tx) error) error {
	c.reads.Add(1)
	return c.Store.Read(ctx, fn)
}

// TestWebhookWithoutATokenReadsNothing: a call of a webhook with no
// token, an API token, or anything not of a webhook token's shape costs
// no read of the database, as a request without a valid token costs
// none anywhere else in the API; only a token of the right shape is
// looked up.
func TestWebhookWithoutATokenReadsNothing(t *testing.T) {
	reads := &atomic.Int64{}
	h := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) {
		cfg.Store = countingStore{Store: cfg.Store, reads: reads}
	})
	path := "/api/v1/triggers/team-a/deploy-hook"
	token := h.yaml("alice", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusCreated).str("status", "token")
	for _, bad := range []string{"", "not-a-token", h.tokens["alice"], "pwh_", token + "x", strings.Repeat("A", len(token))} {
		before := reads.Load()
		if r := h.call(path+"/webhook", bad, "k", nil); r.code != http.StatusUnauthorized && r.code != http.StatusTooManyRequests {
			t.Fatalf("a call with %q: %d %s", bad, r.code, r.raw)
		}
		if n := reads.Load() - before; n != 0 {
			t.Errorf("a call with %q read the database %d times", bad, n)
		}
	}
	// The control: a token of the right shape is looked up.
	before := reads.Load()
	h.call(path+"/webhook", "pwh_"+strings.Repeat("A", len(token)-4), "k", nil)
	if reads.Load() == before {
		t.Error("a token of the right shape was not looked up: the count is broken")
	}
}
