package tenancy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// scheduleDoc is a schedule of a Job in ns, firing every five minutes.
func scheduleDoc(ns, name, container string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Schedule
metadata: {name: %s, namespace: %s}
spec:
  schedule: "*/5 * * * *"
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [%s]
`, name, ns, container)
}

const plainContainer = `{name: c, image: busybox, command: ["true"]}`

// testSchedules: what a hostile tenant tries with schedules. A schedule
// creates runnables later, as its author: so it must be refused where its
// author may not write, its template judged when it is written, its
// author's rights checked again at each tick, and its body bounded.
func testSchedules(t *testing.T, f *farm) {
	schedules := func() int {
		var n int
		if err := f.raw.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM schedules").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := schedules()

	// In another tenant's namespace: 403, nothing stored.
	f.refused("a schedule in the victim's namespace", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/schedules/"+f.victim+"/steal", scheduleDoc(f.victim, "steal", plainContainer))
	})
	f.refused("a run by hand of the victim's schedule", http.StatusForbidden, func() answer {
		return f.do("mallory", "POST", "/api/v1/schedules/"+f.victim+"/steal/run", nil)
	})
	f.refused("reading the victim's schedules", http.StatusForbidden, func() answer {
		return f.do("mallory", "GET", "/api/v1/schedules?namespace="+f.victim, nil)
	})

	// A privileged template: 422 at PUT, naming the template's field, as
	// the runnable of a tick would be refused.
	priv := f.refused("a schedule of a privileged pod", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/schedules/"+f.own+"/priv",
			scheduleDoc(f.own, "priv", `{name: c, image: busybox, securityContext: {privileged: true}}`))
	})
	if !strings.Contains(string(priv.raw), `"field":"spec.template.template.spec.template.spec`) {
		t.Errorf("the refusal of a privileged template does not name the template's field: %s", priv.raw)
	}

	// A huge cron expression, and a body of aliases: 4xx, nothing stored.
	huge := strings.Replace(scheduleDoc(f.own, "huge", plainContainer), `"*/5 * * * *"`, `"`+strings.Repeat("0,", 20000)+`0 * * * *"`, 1)
	f.refused("a huge cron expression", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/schedules/"+f.own+"/huge", huge)
	})
	var bomb strings.Builder
	bomb.WriteString("apiVersion: purser.io/v1alpha1\nkind: Schedule\nmetadata: {name: bomb, namespace: " + f.own + "}\nspec:\n  schedule: &c \"" + strings.Repeat("1,", 50<<10) + "1 * * * *\"\n  template:\n    template:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: bomb}\n      data:\n        b: [")
	for i := range 1000 {
		if i > 0 {
			bomb.WriteString(", ")
		}
		bomb.WriteString("*c")
	}
	bomb.WriteString("]\n")
	a := f.yaml("mallory", "PUT", "/api/v1/schedules/"+f.own+"/bomb", bomb.String())
	if a.code < 400 || a.code >= 500 {
		t.Errorf("a schedule body of aliases: %d %s, want 4xx", a.code, a.raw)
	}
	if n := schedules(); n != before {
		t.Fatalf("refused schedules were stored: %d schedules, %d before", n, before)
	}

	// An author who loses write: the schedule stays, but its tick creates
	// no runnable, and its status says why. The scheduler here is the one
	// the controller runs, on this farm's database, with a clock at the
	// next tick and the policy as it stands after mallory lost her role.
	f.yaml("mallory", "PUT", "/api/v1/schedules/"+f.own+"/orphan", scheduleDoc(f.own, "orphan", plainContainer)).want(t, http.StatusCreated)
	got := f.do("mallory", "GET", "/api/v1/schedules/"+f.own+"/orphan", nil).want(t, http.StatusOK)
	next, err := time.Parse(time.RFC3339, got.str("status", "nextScheduleTime"))
	if err != nil {
		t.Fatalf("no next tick: %s", got.raw)
	}
	revoked, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
		f.own: {Roles: map[policy.Role][]string{policy.RoleViewer: {"mallory"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	clock := next.Add(time.Second)
	sched := scheduler.New(scheduler.Config{Store: f.store, Policy: func() *policy.Policy { return revoked }, Now: func() time.Time { return clock }})
	if err := sched.Fire(t.Context(), f.own, "orphan"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runnableRow(v1alpha1.TickRunName("orphan", next)); err == nil {
		t.Fatalf("the tick of an author who lost write created runnable %s", v1alpha1.TickRunName("orphan", next))
	}
	st := f.do("admin", "GET", "/api/v1/schedules/"+f.own+"/orphan", nil).want(t, http.StatusOK)
	if msg := st.str("status", "message"); !strings.Contains(msg, `user "mallory" may not submit runnables in namespace "`+f.own+`"`) {
		t.Errorf("the status does not say why the tick created nothing: %q", msg)
	}
	status, _ := st.body["status"].(map[string]any)
	if st.str("status", "lastScheduleTime") == "" || status["missed"] != float64(1) {
		t.Errorf("the refused tick is not counted: %s", st.raw)
	}
	hist := f.do("admin", "GET", "/api/v1/history?kind=Schedule&name=orphan&action=refuse", nil).want(t, http.StatusOK)
	var page struct{ Items []json.RawMessage }
	if err := json.Unmarshal(hist.raw, &page); err != nil || len(page.Items) != 1 {
		t.Errorf("the refused tick is not audited once: %s", hist.raw)
	}
	f.do("mallory", "DELETE", "/api/v1/schedules/"+f.own+"/orphan", nil).want(t, http.StatusOK)
}

// runnableRow reads a runnable of mallory's namespace from the database.
func (f *farm) runnableRow(name string) (*store.Runnable, error) {
	var r *store.Runnable
	err := f.store.Read(f.t.Context(), func(tx *store.Tx) error {
		var err error
		r, err = tx.Runnables().Get(f.t.Context(), f.own, name)
		return err
	})
	return r, err
}
