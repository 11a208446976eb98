package tenancy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// testAttack4: triggers tried by mallory, editor of her own namespace
// and of the approval namespace, and by an outsider holding one of her
// webhook tokens: what the token opens, how long it lives, what the
// Idempotency-Key may make of a run's name, and whether the chain's
// bound can be forged around.
func testAttack4(t *testing.T, f *farm) {
	trgPath := func(ns, name string) string { return "/api/v1/triggers/" + ns + "/" + name }
	hookPath := func(ns, name string) string { return trgPath(ns, name) + "/webhook" }
	labelsOf := func(t *testing.T, name string) map[string]string {
		t.Helper()
		r, err := f.runnableRow(name)
		if err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
		var doc store.Document[json.RawMessage]
		if err := json.Unmarshal(r.Spec, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Labels
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
		f.own: {Roles: map[policy.Role][]string{policy.RoleEditor: {"mallory"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	loop := triggers.NewLoop(triggers.Config{Store: f.store, Policy: func() *policy.Policy { return pol }})

	// A runnable she writes carries any label, purser's too: one that
	// says it is at a hop below zero. At "-1" its run was at hop 0, one
	// hop past the bound of MaxTriggerChain for a loop of triggers that
	// starts there; further below, the run's label ("-999999") was no
	// label value and every such end was a refused event, audited as
	// one. A count below zero, or no number, must be a chain's start.
	t.Run("ChainLabelForged", func(t *testing.T) {
		f.yaml("mallory", "PUT", trgPath(f.own, "relay"),
			triggerDoc(f.own, "relay", "{runnableEnded: {selector: {matchLabels: {app: forged}}}}", plainContainer)).want(t, http.StatusCreated)
		defer f.do("mallory", "DELETE", trgPath(f.own, "relay"), nil)
		for i, c := range []struct {
			label string
			hop   int // of the run; 0: none
		}{{"-1", 1}, {"-1000000", 1}, {"-9223372036854775808", 1}, {"x", 1}, {"+3", 4}, {"99999999999999999999999", 0}, {"10", 0}} {
			ended := f.endedRow(f.own, fmt.Sprintf("forged-%d", i), map[string]string{"app": "forged", v1alpha1.LabelTriggerChain: c.label})
			if _, err := loop.Pass(t.Context(), f.own, "relay"); err != nil {
				t.Fatal(err)
			}
			run := v1alpha1.EventRunName("relay", v1alpha1.RunnableEndedEvent(ended.UID, 0))
			r, err := f.runnableRow(run)
			switch {
			case c.hop == 0 && err == nil:
				t.Errorf("an end labelled at hop %s fired run %s", c.label, r.Name)
			case c.hop == 0:
			case err != nil:
				t.Errorf("the end labelled at hop %q fired nothing (%v); status: %s", c.label, err,
					f.do("mallory", "GET", trgPath(f.own, "relay"), nil).str("status", "message"))
			default:
				if got := labelsOf(t, run)[v1alpha1.LabelTriggerChain]; got != strconv.Itoa(c.hop) {
					t.Errorf("the end labelled at hop %q made a run at hop %q, want %d", c.label, got, c.hop)
				}
			}
		}
	})

	// The token opens the webhook of its own trigger only: no other
	// path of the API, /k8s, a watch, the trigger itself.
	t.Run("WebhookTokenElsewhere", func(t *testing.T) {
		tok := f.yaml("mallory", "PUT", trgPath(f.own, "leak"), triggerDoc(f.own, "leak", "{webhook: {}}", plainContainer)).
			want(t, http.StatusCreated).str("status", "token")
		defer f.do("mallory", "DELETE", trgPath(f.own, "leak"), nil)
		for _, c := range []struct{ method, path string }{
			{"GET", trgPath(f.own, "leak")},
			{"GET", "/api/v1/triggers?namespace=" + f.own},
			{"POST", trgPath(f.own, "leak") + "/rotate-token"},
			{"DELETE", trgPath(f.own, "leak")},
			{"PUT", trgPath(f.own, "leak")},
			{"GET", "/api/v1/runnables?namespace=" + f.own},
			{"GET", "/api/v1/inventory?watch=true&namespace=" + f.own},
			{"GET", "/api/v1/whoami"},
			{"GET", "/api/v1/history?namespace=" + f.own},
			{"GET", "/k8s/api/v1/namespaces/" + f.own + "/configmaps"},
			{"GET", "/k8s/apis/purser.io/v1alpha1/namespaces/" + f.own + "/runnables?watch=true"},
		} {
			f.refusedAuth("the webhook token on "+c.method+" "+c.path, func() answer {
				req, err := http.NewRequestWithContext(t.Context(), c.method, f.url+c.path, http.NoBody)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				return answer{code: resp.StatusCode, header: resp.Header}
			})
		}
	})

	// Rotation and re-creation: the old token is dead at once, and a
	// trigger made again under the same name is a new trigger (its
	// events, and so its runs' names, are new).
	t.Run("TokenLifetime", func(t *testing.T) {
		doc := triggerDoc(f.own, "rot", "{webhook: {}}", plainContainer)
		first := f.yaml("mallory", "PUT", trgPath(f.own, "rot"), doc).want(t, http.StatusCreated).str("status", "token")
		run1 := f.hook(hookPath(f.own, "rot"), first, "same-key", nil).want(t, http.StatusAccepted).str("runnable")
		second := f.do("mallory", "POST", trgPath(f.own, "rot")+"/rotate-token", nil).want(t, http.StatusOK).str("status", "token")
		if second == "" || second == first {
			t.Fatalf("rotation gave %q", second)
		}
		f.refusedAuth("the token rotated away", func() answer { return f.hook(hookPath(f.own, "rot"), first, "k2", nil) })
		// Mallory's API token rotates only her own namespace's triggers.
		f.refused("rotating the victim's trigger", http.StatusForbidden, func() answer {
			return f.do("mallory", "POST", trgPath(f.victim, "rot")+"/rotate-token", nil)
		})
		f.do("mallory", "DELETE", trgPath(f.own, "rot"), nil).want(t, http.StatusOK)
		f.refusedAuth("the token of a deleted trigger", func() answer { return f.hook(hookPath(f.own, "rot"), second, "k3", nil) })
		third := f.yaml("mallory", "PUT", trgPath(f.own, "rot"), doc).want(t, http.StatusCreated).str("status", "token")
		defer f.do("mallory", "DELETE", trgPath(f.own, "rot"), nil)
		for _, old := range []string{first, second} {
			f.refusedAuth("a token of the trigger before it was made again", func() answer {
				return f.hook(hookPath(f.own, "rot"), old, "k4", nil)
			})
		}
		run2 := f.hook(hookPath(f.own, "rot"), third, "same-key", nil).want(t, http.StatusAccepted).str("runnable")
		if run1 == run2 {
			t.Errorf("the trigger made again took the same key's event as done (%s)", run1)
		}
		// A token cut short, lengthened, in other case, or its prefix
		// alone: the compare is of the whole token.
		for _, bad := range []string{third[:len(third)-1], third + "A", strings.ToUpper(third), "pwh_", "pwh_" + third} {
			f.refusedAuth("a token that is nearly the trigger's", func() answer {
				return f.hook(hookPath(f.own, "rot"), bad, "k5", nil)
			})
		}
	})

	// The Idempotency-Key names the event and nothing else: a name is
	// the trigger's and a hash, whatever the key; a key past its bound,
	// or not printable, is 400 and starts nothing.
	t.Run("IdempotencyKeys", func(t *testing.T) {
		tok := f.yaml("mallory", "PUT", trgPath(f.own, "keys"), triggerDoc(f.own, "keys", "{webhook: {}}", plainContainer)).
			want(t, http.StatusCreated).str("status", "token")
		defer f.do("mallory", "DELETE", trgPath(f.own, "keys"), nil)
		long := strings.Repeat("k", v1alpha1.MaxIdempotencyKeyLen)
		run := f.hook(hookPath(f.own, "keys"), tok, long, nil).want(t, http.StatusAccepted).str("runnable")
		if run != v1alpha1.EventRunName("keys", v1alpha1.WebhookEvent(f.triggerUID(t, f.own, "keys"), long)) || len(run) > 63 {
			t.Errorf("the run of a %d-character key is named %q", len(long), run)
		}
		// A key that looks like another trigger's run name, or a path.
		for _, key := range []string{"../../" + f.victim + "/hook", v1alpha1.EventRunName("hook", "x"), "keys-000000000000"} {
			r := f.hook(hookPath(f.own, "keys"), tok, key, nil).want(t, http.StatusAccepted).str("runnable")
			if !strings.HasPrefix(r, "keys-") || len(r) != len("keys-")+v1alpha1.EventHashLength {
				t.Errorf("key %q named its run %q", key, r)
			}
		}
		for _, key := range []string{long + "k", "a b", "é", "a\tb"} {
			f.refused(fmt.Sprintf("an Idempotency-Key of %d bytes", len(key)), http.StatusBadRequest, func() answer {
				return f.hook(hookPath(f.own, "keys"), tok, key, nil)
			})
		}
		// A header bomb: past the server's header limit, refused before
		// any handler.
		f.refused("an Idempotency-Key past the header limit", http.StatusRequestHeaderFieldsTooLarge, func() answer {
			return f.hook(hookPath(f.own, "keys"), tok, strings.Repeat("k", 200<<10), nil)
		})
	})

	// A trigger's template is judged at each PUT, not only the first:
	// one made harmless, then changed to a privileged pod or to an
	// object in the victim's namespace, is refused and stays as it was.
	t.Run("TemplateChangedAfterCreation", func(t *testing.T) {
		f.yaml("mallory", "PUT", trgPath(f.own, "swap"), triggerDoc(f.own, "swap", "{webhook: {}}", plainContainer)).want(t, http.StatusCreated)
		defer f.do("mallory", "DELETE", trgPath(f.own, "swap"), nil)
		spec := func() string {
			var s string
			if err := f.raw.QueryRowContext(t.Context(), fmt.Sprintf("SELECT CAST(spec AS TEXT) FROM triggers WHERE namespace = '%s' AND name = 'swap'", f.own)).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		was := spec()
		for what, doc := range map[string]string{
			"a privileged pod": triggerDoc(f.own, "swap", "{webhook: {}}", `{name: c, image: busybox, securityContext: {privileged: true}}`),
			"the victim's namespace": strings.Replace(triggerDoc(f.own, "swap", "{webhook: {}}", plainContainer),
				"      kind: Job\n", "      kind: Job\n      metadata: {namespace: "+f.victim+"}\n", 1),
		} {
			f.refused("a trigger's template changed to "+what, http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "PUT", trgPath(f.own, "swap"), doc)
			})
			if spec() != was {
				t.Errorf("the refused change to %s was stored", what)
			}
		}
	})

	// The author's rights are read at each event: once she may no
	// longer write the namespace, its ends fire nothing, the trigger
	// says why, and the refusal is audited as the loop's.
	t.Run("AuthorLosesTheNamespace", func(t *testing.T) {
		f.yaml("mallory", "PUT", trgPath(f.own, "orphan"),
			triggerDoc(f.own, "orphan", "{runnableEnded: {selector: {matchLabels: {app: orphaned}}}}", plainContainer)).want(t, http.StatusCreated)
		defer f.do("mallory", "DELETE", trgPath(f.own, "orphan"), nil)
		ended := f.endedRow(f.own, "orphaned", map[string]string{"app": "orphaned"})
		without, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
			f.own: {Roles: map[policy.Role][]string{policy.RoleViewer: {"mallory"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		l := triggers.NewLoop(triggers.Config{Store: f.store, Policy: func() *policy.Policy { return without }})
		if _, err := l.Pass(t.Context(), f.own, "orphan"); err != nil {
			t.Fatal(err)
		}
		if r, err := f.runnableRow(v1alpha1.EventRunName("orphan", v1alpha1.RunnableEndedEvent(ended.UID, 0))); err == nil {
			t.Errorf("an author who may no longer write the namespace got run %s", r.Name)
		}
		if msg := f.do("mallory", "GET", trgPath(f.own, "orphan"), nil).want(t, http.StatusOK).str("status", "message"); !strings.Contains(msg, "created no runnable") {
			t.Errorf("the trigger does not say why its event created nothing: %q", msg)
		}
		var n int
		if err := f.raw.QueryRowContext(t.Context(), fmt.Sprintf(
			"SELECT COUNT(*) FROM audit_log WHERE actor = '%s' AND action = 'refuse' AND kind = 'Trigger' AND namespace = '%s' AND name = 'orphan'",
			triggers.Actor, f.own)).Scan(&n); err != nil || n != 1 {
			t.Errorf("the refused event is audited %d times (%v), want once as %q", n, err, triggers.Actor)
		}
	})

	// A trigger an admin made in her namespace, with a template only an
	// admin may write (a raw priority), its token given to someone else:
	// rotating the token (a writer of the namespace may) handed her the
	// firing of the admin's runs, on demand, with the admin's rights.
	// The rotator is now the author, judged as one.
	t.Run("RotateTheTokenOfAMorePrivilegedAuthor", func(t *testing.T) {
		doc := strings.Replace(triggerDoc(f.own, "boss", "{webhook: {}}", plainContainer), "  template:\n", "  template:\n    priority: 2147483647\n", 1)
		adminToken := f.yaml("admin", "PUT", trgPath(f.own, "boss"), doc).want(t, http.StatusCreated).str("status", "token")
		defer f.do("admin", "DELETE", trgPath(f.own, "boss"), nil)
		a := f.refused("rotating the token of an admin's trigger with an admin's priority", http.StatusUnprocessableEntity, func() answer {
			return f.do("mallory", "POST", trgPath(f.own, "boss")+"/rotate-token", nil)
		})
		if !strings.Contains(string(a.raw), `"field":"spec.template.priority"`) {
			t.Errorf("the refusal does not name spec.template.priority: %s", a.raw)
		}
		if tok := a.str("status", "token"); tok != "" {
			if r := f.hook(hookPath(f.own, "boss"), tok, "mine", nil); r.code == http.StatusAccepted {
				t.Errorf("the rotated token started %s as the admin", r.str("runnable"))
			}
		}
		// The admin's token still works: the refused rotation changed nothing.
		f.hook(hookPath(f.own, "boss"), adminToken, "admins", nil).want(t, http.StatusAccepted)
	})

	// Deep bodies: a trigger nested past any decoder's depth, as YAML
	// and as JSON, is refused whole (and quickly), nothing stored.
	t.Run("DeepBodies", func(t *testing.T) {
		deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
		for _, c := range []struct {
			what, contentType, body string
			code                    int
		}{
			{"YAML", "application/yaml", strings.Replace(triggerDoc(f.own, "deep", "{webhook: {}}", plainContainer), "restartPolicy: Never", "restartPolicy: Never\n            deep: "+deep, 1), http.StatusBadRequest},
			{"JSON", "application/json", `{"apiVersion":"purser.io/v1alpha1","kind":"Trigger","metadata":{"name":"deep","namespace":"` + f.own +
				`"},"spec":{"source":{"webhook":{}},"template":{"template":{"apiVersion":"batch/v1","kind":"Job","spec":` + deep + `}}}}`, http.StatusUnprocessableEntity},
		} {
			start := time.Now()
			a := f.refused("a trigger nested 200,000 deep as "+c.what, c.code, func() answer {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, f.url+trgPath(f.own, "deep"), strings.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+f.tokens["mallory"])
				req.Header.Set("Content-Type", c.contentType)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				return answer{code: resp.StatusCode, header: resp.Header, raw: raw}
			})
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the %s refusal took %v", c.what, d)
			}
			if len(a.raw) > 4096 {
				t.Errorf("the %s refusal is %d bytes long", c.what, len(a.raw))
			}
		}
	})

	// The run of a webhook call is the author's, audited as hers, and
	// judged as her POST would be: in the approval namespace it waits
	// for an approver.
	t.Run("WebhookRunAdmittedAsTheAuthor", func(t *testing.T) {
		tok := f.yaml("mallory", "PUT", trgPath(f.approval, "gate"), triggerDoc(f.approval, "gate", "{webhook: {}}", plainContainer)).
			want(t, http.StatusCreated).str("status", "token")
		defer f.do("mallory", "DELETE", trgPath(f.approval, "gate"), nil)
		a := f.hook(hookPath(f.approval, "gate"), tok, "approve-me", nil).want(t, http.StatusAccepted)
		if a.str("phase") != string(v1alpha1.PhasePendingApproval) {
			t.Errorf("a webhook's run in a namespace needing approval is %q: %s", a.str("phase"), a.raw)
		}
		var actor, summary string
		if err := f.raw.QueryRowContext(t.Context(), fmt.Sprintf(
			"SELECT actor, summary FROM audit_log WHERE kind = 'Runnable' AND namespace = '%s' AND name = '%s' AND action = 'create' ORDER BY seq DESC LIMIT 1",
			f.approval, a.str("runnable"))).Scan(&actor, &summary); err != nil {
			t.Fatalf("the webhook's run is not audited: %v", err)
		}
		if actor != "mallory" || !strings.Contains(summary, "trigger gate") {
			t.Errorf("the webhook's run is audited as %q: %q", actor, summary)
		}
		// A priority class only the victim's namespace may use: refused
		// at the PUT, as her POST would be.
		for _, prio := range []string{"critical", "2147483647"} {
			a := f.refused("a trigger's template with priority "+prio, http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "PUT", trgPath(f.own, "prio"), strings.Replace(
					triggerDoc(f.own, "prio", "{webhook: {}}", plainContainer), "  template:\n", "  template:\n    priority: "+prio+"\n", 1))
			})
			if !strings.Contains(string(a.raw), `"field":"spec.template.priority"`) {
				t.Errorf("priority %s: the 422 does not name spec.template.priority: %s", prio, a.raw)
			}
		}
	})
}

// refusedAuth is refused for a call whose token is not valid there: 401,
// or 429 once the address has spent its calls without a valid token
// (which a valid token never counts against, so 429 says as much).
func (f *farm) refusedAuth(what string, attempt func() answer) {
	f.t.Helper()
	before := f.state()
	if a := attempt(); a.code != http.StatusUnauthorized && a.code != http.StatusTooManyRequests {
		f.t.Errorf("%s: %d %s, want 401 (or 429 for too many failed calls)", what, a.code, a.raw)
	}
	if after := f.state(); after != before {
		f.t.Errorf("%s changed the database: %s -> %s", what, before, after)
	}
}

// triggerUID is the uid of trigger ns/name as stored.
func (f *farm) triggerUID(t *testing.T, ns, name string) string {
	t.Helper()
	var uid string
	if err := f.store.Read(t.Context(), func(tx *store.Tx) error {
		rec, err := tx.Triggers().Get(t.Context(), ns, name)
		if err == nil {
			uid = rec.UID
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return uid
}
