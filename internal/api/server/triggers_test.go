package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

const webhookTriggerYAML = `apiVersion: purser.io/v1alpha1
kind: Trigger
metadata: {name: deploy-hook, namespace: team-a}
spec:
  source: {webhook: {}}
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
`

// call calls a webhook with token and, when key is set, an
// Idempotency-Key.
func (h *harness) call(path, token, key string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodPost, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set(server.HeaderIdempotencyKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{code: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// TestTriggersAPI: a trigger's CRUD, its webhook token shown once, valid
// for its own webhook only, an event per Idempotency-Key, the rate limit
// and the body cap.
func TestTriggersAPI(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	path := "/api/v1/triggers/team-a/deploy-hook"
	created := h.yaml("alice", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusCreated)
	token := created.str("status", "token")
	if !strings.HasPrefix(token, "pwh_") || created.str("status", "webhookPath") != path+"/webhook" {
		t.Fatalf("no token or path in the answer of the create: %s", created.raw)
	}
	// Shown once: never read back, never stored as itself.
	if got := h.get("bob", path).want(t, http.StatusOK); got.str("status", "token") != "" {
		t.Fatalf("a GET shows the token: %s", got.raw)
	}
	var stored int
	if err := h.raw.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM triggers WHERE token_hash = $1 OR spec LIKE $2 OR status LIKE $2`, token, "%"+token+"%").Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the token is stored as itself (%d rows, %v)", stored, err)
	}
	// The same PUT again writes nothing and issues no new token.
	if again := h.yaml("alice", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusOK); again.str("status", "token") != "" {
		t.Fatalf("an unchanged PUT issued a token: %s", again.raw)
	}
	// A second trigger, with its own token.
	other := h.yaml("alice", http.MethodPut, "/api/v1/triggers/team-a/other", strings.Replace(webhookTriggerYAML, "deploy-hook", "other", 1)).want(t, http.StatusCreated)
	otherToken := other.str("status", "token")

	hook := path + "/webhook"
	first := h.call(hook, token, "build-41", nil).want(t, http.StatusAccepted)
	run := first.str("runnable")
	if run != v1alpha1.EventRunName("deploy-hook", v1alpha1.WebhookEvent(created.str("metadata", "uid"), "build-41")) {
		t.Fatalf("run named %q: %s", run, first.raw)
	}
	// The same key again is the same event: still one runnable.
	if again := h.call(hook, token, "build-41", []byte(`{"x":1}`)).want(t, http.StatusOK); again.str("runnable") != run {
		t.Fatalf("the same key made another run: %s", again.raw)
	}
	r := h.get("alice", "/api/v1/runnables/team-a/"+run).want(t, http.StatusOK)
	if r.str("metadata", "labels", v1alpha1.LabelTrigger) != "deploy-hook" || !strings.Contains(r.str("metadata", "annotations", v1alpha1.AnnotationTriggerEvent), "build-41") {
		t.Fatalf("the run does not say its trigger and event: %s", r.raw)
	}
	if n := len(h.get("admin", "/api/v1/history?kind=Runnable&name="+run+"&action=create").want(t, http.StatusOK).items()); n != 1 {
		t.Fatalf("%d audit entries of the run's creation, want 1", n)
	}
	// Without a key each call is an event of its own.
	a := h.call(hook, token, "", nil).want(t, http.StatusAccepted).str("runnable")
	b := h.call(hook, token, "", nil).want(t, http.StatusAccepted).str("runnable")
	if a == b || a == run {
		t.Fatalf("calls without a key share a run: %s %s %s", run, a, b)
	}
	// Refusals: the other trigger's token, a user's token, no token; the
	// webhook token anywhere else.
	h.call(hook, otherToken, "k", nil).want(t, http.StatusUnauthorized)
	h.call(hook, h.tokens["alice"], "k", nil).want(t, http.StatusUnauthorized)
	h.call(hook, "", "k", nil).want(t, http.StatusUnauthorized)
	h.call("/api/v1/triggers/team-a/nosuch/webhook", token, "k", nil).want(t, http.StatusUnauthorized)
	for _, p := range []string{"/api/v1/runnables", path, "/api/v1/whoami"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h.url+p, http.NoBody)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a webhook token: %d, want 401", p, resp.StatusCode)
		}
	}
	h.call(hook, token, "big", bytes.Repeat([]byte("x"), server.WebhookMaxBytes+1)).want(t, http.StatusRequestEntityTooLarge)
	h.call(hook, token, strings.Repeat("k", v1alpha1.MaxIdempotencyKeyLen+1), nil).want(t, http.StatusBadRequest)

	// Rotation: the old token stops, the new one works; a viewer may not.
	h.do("bob", http.MethodPost, path+"/rotate-token", "", nil).want(t, http.StatusForbidden)
	rotated := h.do("alice", http.MethodPost, path+"/rotate-token", "", nil).want(t, http.StatusOK).str("status", "token")
	if rotated == "" || rotated == token {
		t.Fatalf("rotate-token gave %q", rotated)
	}
	h.call(hook, token, "after", nil).want(t, http.StatusUnauthorized)
	h.call(hook, rotated, "after", nil).want(t, http.StatusAccepted)

	// Suspended: a call starts nothing (409), and the token stays valid.
	suspended := strings.Replace(webhookTriggerYAML, "  source: {webhook: {}}", "  suspend: true\n  source: {webhook: {}}", 1)
	if s := h.yaml("alice", http.MethodPut, path, suspended).want(t, http.StatusOK); s.str("status", "token") != "" {
		t.Fatalf("suspending issued a token: %s", s.raw)
	}
	h.call(hook, rotated, "while-suspended", nil).want(t, http.StatusConflict)
	h.yaml("alice", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusOK)
	h.call(hook, rotated, "resumed", nil).want(t, http.StatusAccepted)

	// A burst past the limit: 429 with Retry-After, for this trigger only.
	limited := false
	for i := range server.WebhookBurst + 5 {
		res := h.call(hook, rotated, "burst-"+string(rune('a'+i%26))+strings.Repeat("x", i), nil)
		if res.code == http.StatusTooManyRequests {
			if res.header.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After")
			}
			limited = true
			break
		}
	}
	if !limited {
		t.Fatalf("%d calls at once were not limited", server.WebhookBurst+5)
	}
	h.call("/api/v1/triggers/team-a/other/webhook", otherToken, "free", nil).want(t, http.StatusAccepted)

	// The rest of the kind: list, refusals of writes, delete.
	if n := len(h.get("bob", "/api/v1/triggers?namespace=team-a").want(t, http.StatusOK).items()); n != 2 {
		t.Fatalf("list: %d items", n)
	}
	h.yaml("bob", http.MethodPut, path, webhookTriggerYAML).want(t, http.StatusForbidden)
	h.get("mallory", path).want(t, http.StatusForbidden)
	two := strings.Replace(webhookTriggerYAML, "source: {webhook: {}}", "source: {webhook: {}, deployableRolledOut: {name: web}}", 1)
	if bad := h.yaml("alice", http.MethodPut, path, two).want(t, http.StatusUnprocessableEntity); !strings.Contains(string(bad.raw), `"field":"spec.source"`) {
		t.Fatalf("two sources: %s", bad.raw)
	}
	priv := strings.Replace(webhookTriggerYAML, "image: busybox}", "image: busybox, securityContext: {privileged: true}}", 1)
	if bad := h.yaml("alice", http.MethodPut, path, priv).want(t, http.StatusUnprocessableEntity); !strings.Contains(string(bad.raw), `"field":"spec.template.template.spec.template.spec`) {
		t.Fatalf("privileged template: %s", bad.raw)
	}
	h.do("alice", http.MethodDelete, path, "", nil).want(t, http.StatusOK)
	h.call(hook, rotated, "gone", nil).want(t, http.StatusUnauthorized)
	h.get("alice", "/api/v1/runnables/team-a/"+run).want(t, http.StatusOK) // its runs stay
	for _, action := range []string{"create", "rotate-token", "delete"} {
		if n := len(h.get("admin", "/api/v1/history?kind=Trigger&name=deploy-hook&action="+action).want(t, http.StatusOK).items()); n != 1 {
			t.Errorf("%d audit entries of the trigger's %s, want 1", n, action)
		}
	}
}
