package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
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

// TestWebhookRefusalToldToTheAuthor: the caller of a webhook is an
// outside system holding one token, not a user of purser. When the
// author may no longer create the trigger's run, the call is refused
// with the code a POST of the author's would get, but what the policy
// says (who the author is, which namespaces may do what) is for the
// author, in the trigger's status.message, not for the caller.
func TestWebhookRefusalToldToTheAuthor(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	path := "/api/v1/triggers/team-a/deploy-hook"
	token := h.yaml("alice", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusCreated).str("status", "token")
	pf := testPolicy()
	ns := pf.Namespaces["team-a"]
	ns.Roles = map[policy.Role][]string{policy.RoleViewer: {"alice", "bob"}}
	pf.Namespaces["team-a"] = ns
	h.setPolicy(t, pf)
	r := h.call(path+"/webhook", token, "after", nil)
	if r.code != http.StatusForbidden {
		t.Fatalf("a call whose author may no longer write: %d %s", r.code, r.raw)
	}
	if _, has := r.body["details"]; has || strings.Contains(string(r.raw), "alice") {
		t.Errorf("the caller is told what the policy says of the author: %s", r.raw)
	}
	if msg := h.get("bob", path).want(t, http.StatusOK).str("status", "message"); !strings.Contains(msg, "alice") {
		t.Errorf("the trigger's status does not tell the author why: %q", msg)
	}
}
