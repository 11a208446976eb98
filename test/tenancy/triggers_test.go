package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// triggerDoc is a trigger in ns on source (YAML flow), starting a Job.
func triggerDoc(ns, name, source, container string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Trigger
metadata: {name: %s, namespace: %s, labels: {app: loop}}
spec:
  source: %s
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [%s]
`, name, ns, source, container)
}

// hook calls a webhook with a raw bearer token.
func (f *farm) hook(path, token, key string, body []byte) answer {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodPost, f.url+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set(server.HeaderIdempotencyKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// endedRow stores a runnable of ns that ended Succeeded now, with labels,
// as the lifecycle leaves one: the event a trigger on ended work reads.
func (f *farm) endedRow(ns, name string, labels map[string]string) *store.Runnable {
	f.t.Helper()
	doc, _ := json.Marshal(store.Document[map[string]any]{Labels: labels, Spec: map[string]any{}})
	at := time.Now().UTC()
	rec := &store.Runnable{Namespace: ns, Name: name, UID: uuid.NewString(), Generation: 1, Spec: doc, SpecHash: "h",
		Phase: string(v1alpha1.PhaseSucceeded), Submitter: "victor", EndedAt: &at}
	if err := f.store.Tx(f.t.Context(), func(tx *store.Tx) error { return tx.Runnables().Create(f.t.Context(), rec) }); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// testTriggers: what a hostile tenant tries with triggers. A trigger
// creates runnables later, as its author, on events: so it must be
// refused where its author may not write, see only its own namespace's
// events whatever its selector, keep its template judged, hold a token
// that opens its own webhook only, bound what it reads, and not loop.
func testTriggers(t *testing.T, f *farm) {
	count := func() int {
		var n int
		if err := f.raw.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM triggers").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()

	// In another tenant's namespace: 403, nothing stored.
	f.refused("a trigger in the victim's namespace", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.victim+"/steal", triggerDoc(f.victim, "steal", "{webhook: {}}", plainContainer))
	})
	f.refused("reading the victim's triggers", http.StatusForbidden, func() answer {
		return f.do("mallory", "GET", "/api/v1/triggers?namespace="+f.victim, nil)
	})
	// A privileged template: 422 naming the template's field.
	priv := f.refused("a trigger of a privileged pod", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/priv",
			triggerDoc(f.own, "priv", "{webhook: {}}", `{name: c, image: busybox, securityContext: {privileged: true}}`))
	})
	if !strings.Contains(string(priv.raw), `"field":"spec.template.template.spec.template.spec`) {
		t.Errorf("the refusal of a privileged template does not name the template's field: %s", priv.raw)
	}
	// A self-loop: its own runs, with no selector: 422.
	loop := f.refused("a trigger on every end of its own runs", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/loop", triggerDoc(f.own, "loop", "{runnableEnded: {includeOwnRuns: true}}", plainContainer))
	})
	if !strings.Contains(string(loop.raw), `"field":"spec.source.runnableEnded.includeOwnRuns"`) {
		t.Errorf("the self-loop's refusal does not name includeOwnRuns: %s", loop.raw)
	}
	// A huge body: 413.
	f.refused("a trigger body over the limit", http.StatusRequestEntityTooLarge, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/huge",
			triggerDoc(f.own, "huge", "{webhook: {}}", plainContainer)+"# "+strings.Repeat("x", server.MaxBodyBytes))
	})
	if n := count(); n != before {
		t.Fatalf("refused triggers were stored: %d triggers, %d before", n, before)
	}

	// Webhook tokens: each opens its own trigger's path only.
	mine := f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/hook", triggerDoc(f.own, "hook", "{webhook: {}}", plainContainer)).want(t, http.StatusCreated)
	theirs := f.yaml("victor", "PUT", "/api/v1/triggers/"+f.victim+"/hook", triggerDoc(f.victim, "hook", "{webhook: {}}", plainContainer)).want(t, http.StatusCreated)
	myToken, theirToken := mine.str("status", "token"), theirs.str("status", "token")
	if myToken == "" || theirToken == "" || myToken == theirToken {
		t.Fatalf("tokens %q and %q", myToken, theirToken)
	}
	f.refused("mallory's webhook token on the victim's webhook", http.StatusUnauthorized, func() answer {
		return f.hook("/api/v1/triggers/"+f.victim+"/hook/webhook", myToken, "x", nil)
	})
	f.refused("mallory's API token on the victim's webhook", http.StatusUnauthorized, func() answer {
		return f.hook("/api/v1/triggers/"+f.victim+"/hook/webhook", f.tokens["mallory"], "x", nil)
	})
	f.refused("a webhook token on the API", http.StatusUnauthorized, func() answer {
		return f.hook("/api/v1/runnables", myToken, "", []byte(runnable(f.own, "via-hook", job)))
	})
	f.refused("a webhook call's body over its cap", http.StatusRequestEntityTooLarge, func() answer {
		return f.hook("/api/v1/triggers/"+f.own+"/hook/webhook", myToken, "big", bytes.Repeat([]byte("x"), server.WebhookMaxBytes+1))
	})
	run := f.hook("/api/v1/triggers/"+f.own+"/hook/webhook", myToken, "deploy-1", nil).want(t, http.StatusAccepted).str("runnable")
	if r, err := f.runnableRow(run); err != nil || r.Submitter != "mallory" {
		t.Fatalf("the webhook's run %s: %+v, %v", run, r, err)
	}
	f.hook("/api/v1/triggers/"+f.own+"/hook/webhook", myToken, "deploy-1", nil).want(t, http.StatusOK)

	// Events: only the trigger's namespace's, whatever its selector; and
	// a chain stops at its bound. The loop is the controller's, on this
	// farm's database; one pass reads what ended.
	f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/spy",
		triggerDoc(f.own, "spy", "{runnableEnded: {selector: {matchLabels: {app: victim-etl}}}}", plainContainer)).want(t, http.StatusCreated)
	f.yaml("mallory", "PUT", "/api/v1/triggers/"+f.own+"/chain",
		triggerDoc(f.own, "chain", "{runnableEnded: {includeOwnRuns: true, selector: {matchLabels: {app: loop}}}}", plainContainer)).want(t, http.StatusCreated)
	f.endedRow(f.victim, "etl", map[string]string{"app": "victim-etl"})
	own := f.endedRow(f.own, "etl", map[string]string{"app": "victim-etl"}) // the positive control
	deep := f.endedRow(f.own, "deep", map[string]string{"app": "loop", v1alpha1.LabelTrigger: "chain",
		v1alpha1.LabelTriggerChain: fmt.Sprint(v1alpha1.MaxTriggerChain)})
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
		f.own: {Roles: map[policy.Role][]string{policy.RoleEditor: {"mallory"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := triggers.NewLoop(triggers.Config{Store: f.store, Policy: func() *policy.Policy { return pol }})
	for _, name := range []string{"spy", "chain"} {
		if _, err := l.Pass(t.Context(), f.own, name); err != nil {
			t.Fatal(err)
		}
	}
	spied := v1alpha1.EventRunName("spy", v1alpha1.RunnableEndedEvent(own.UID, 0))
	if _, err := f.runnableRow(spied); err != nil {
		t.Fatalf("the trigger did not fire on its own namespace's end (the control): %v", err)
	}
	var spyRuns, chainRuns int
	if err := f.store.Read(t.Context(), func(tx *store.Tx) error {
		for name, n := range map[string]*int{"spy": &spyRuns, "chain": &chainRuns} {
			rs, err := triggers.Runs(t.Context(), tx, f.own, name)
			if err != nil {
				return err
			}
			*n = len(rs)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if spyRuns != 1 {
		t.Errorf("the spy trigger has %d runs: it fired on the victim's runnable", spyRuns)
	}
	if chainRuns != 0 {
		t.Errorf("a run at chain %d fired %d more (%s)", v1alpha1.MaxTriggerChain, chainRuns, deep.Name)
	}
	for _, name := range []string{"hook", "spy", "chain"} {
		f.do("mallory", "DELETE", "/api/v1/triggers/"+f.own+"/"+name, nil).want(t, http.StatusOK)
	}
	f.do("victor", "DELETE", "/api/v1/triggers/"+f.victim+"/hook", nil).want(t, http.StatusOK)
}
