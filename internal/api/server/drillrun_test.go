package server_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestDrillForcedAndEnded: a real drill forced over a Partial verdict
// cordons the DC's cluster, records the plan and what became of each
// runnable (here a move refused, as the runnable never started, and one
// left where it is), all audited; a tenant may neither start, read, list
// nor end one; its end uncordons, and a second end is refused. Bad input
// is refused and changes nothing.
func TestDrillForcedAndEnded(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	drillFarm(t, h)
	before := h.counts()
	start := []byte(`{"target":{"kind":"dc","name":"dc1"},"force":true}`)
	h.do("alice", "POST", "/api/v1/drills", "application/json", start).want(t, http.StatusForbidden)
	h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc9"},"force":true}`)).
		want(t, http.StatusUnprocessableEntity)
	h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc1"},"force":"yes"}`)).
		want(t, http.StatusBadRequest)
	if after := h.counts(); !maps.Equal(before, after) {
		t.Fatalf("a refused drill changed the store: %v, then %v", before, after)
	}

	var d v1alpha1.Drill
	r := h.do("admin", "POST", "/api/v1/drills", "application/json", start).want(t, http.StatusCreated)
	if err := json.Unmarshal(r.raw, &d); err != nil {
		t.Fatal(err)
	}
	st := d.Status
	if d.Metadata.Name == "" || !d.Spec.Force || st.StartedBy != "admin" || st.Planned == nil || st.Planned.Verdict != "Partial" ||
		!slices.Equal(st.Cordoned, []string{"dc1-a"}) || len(st.Runnables) != 2 {
		t.Fatalf("the drill: %s", r.raw)
	}
	// j1 (class high) was planned to dc2-a; it never ran here, so its move
	// is refused; j0 had no room and stays. Not one move: Failed.
	moved, left := st.Runnables[0], st.Runnables[1]
	if moved.Runnable != "team-a/j1" || moved.PlannedTo != "dc2-a" || moved.Step != v1alpha1.DrillNotMoved ||
		!strings.Contains(moved.Error, "only a Running runnable can be moved") ||
		left.Runnable != "team-a/j0" || left.PlannedTo != "" || left.From != "dc1-a" || left.Step != v1alpha1.DrillNotMoved ||
		st.State != v1alpha1.DrillFailed || st.Totals.Planned != 1 || st.Totals.Failed != 1 || st.Totals.Unplaceable != 1 || st.Totals.AsPlanned != 1 {
		t.Fatalf("outcomes: %s", r.raw)
	}
	taints := func() string {
		var c v1alpha1.Cluster
		if err := json.Unmarshal(h.get("admin", "/api/v1/clusters/dc1-a").want(t, http.StatusOK).raw, &c); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tn := range c.Spec.Taints {
			out = append(out, tn.Key+":"+string(tn.Effect))
		}
		return strings.Join(out, ",")
	}
	if got := taints(); got != v1alpha1.TaintCordon+":NoSchedule" {
		t.Fatalf("dc1-a's taints after the drill's start: %q", got)
	}
	history := string(h.get("admin", "/api/v1/history?limit=50").want(t, http.StatusOK).raw)
	for _, want := range []string{`"action":"drill-start"`, `cordoned by drill ` + d.Metadata.Name} {
		if !strings.Contains(history, want) {
			t.Errorf("history lacks %s: %s", want, history)
		}
	}

	path := "/api/v1/drills/" + d.Metadata.Name
	h.get("alice", "/api/v1/drills").want(t, http.StatusForbidden)
	h.get("alice", path).want(t, http.StatusForbidden)
	h.do("alice", "POST", path+"/end", "", nil).want(t, http.StatusForbidden)
	if items := h.get("admin", "/api/v1/drills").want(t, http.StatusOK).items(); len(items) != 1 {
		t.Errorf("list: %v", items)
	}
	if items := h.get("admin", "/api/v1/drills?state=Running").want(t, http.StatusOK).items(); len(items) != 0 {
		t.Errorf("running: %v", items)
	}
	h.get("admin", "/api/v1/drills?state=Asleep").want(t, http.StatusBadRequest)
	h.get("admin", "/api/v1/drills/99").want(t, http.StatusNotFound)
	h.get("admin", "/api/v1/drills/abc").want(t, http.StatusNotFound)
	h.do("admin", "POST", path+"/end", "application/json", []byte(`{"moveBack":"yes"}`)).want(t, http.StatusBadRequest)
	h.do("admin", "POST", path+"/end", "application/json", []byte(`{"back":true}`)).want(t, http.StatusBadRequest)
	if got := taints(); got != v1alpha1.TaintCordon+":NoSchedule" {
		t.Fatalf("a refused end changed dc1-a's taints: %q", got)
	}

	r = h.do("admin", "POST", path+"/end", "application/json", []byte(`{"moveBack":true}`)).want(t, http.StatusOK)
	var ended v1alpha1.Drill
	if err := json.Unmarshal(r.raw, &ended); err != nil {
		t.Fatal(err)
	}
	if e := ended.Status.End; e == nil || e.By != "admin" || !e.MoveBack || !slices.Equal(e.Uncordoned, []string{"dc1-a"}) ||
		ended.Status.State != v1alpha1.DrillFailed {
		t.Fatalf("ended: %s", r.raw)
	}
	if got := taints(); got != "" {
		t.Fatalf("dc1-a's taints after the end: %q", got)
	}
	h.do("admin", "POST", path+"/end", "", nil).want(t, http.StatusConflict)
	if !strings.Contains(string(h.get("admin", "/api/v1/history?limit=50").want(t, http.StatusOK).raw), `"action":"drill-end"`) {
		t.Error("the end is not in the history")
	}
}

// TestDrillRunning: an absorbed DC's drill starts without force and asks
// the planned move of its Running runnable (status.move, by the admin,
// to the planned target); a second drill is refused while it runs; it
// may be ended meanwhile (its cluster uncordoned) but not moved back.
func TestDrillRunning(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	for i, c := range []struct{ name, dc string }{{"sandbox-1", "dc1"}, {"sandbox-2", "dc2"}} {
		body := strings.Replace(clusterYAML(c.name, "tok-"+strconv.Itoa(i)), "labels: {dc: dc1,", "labels: {dc: "+c.dc+",", 1)
		h.yaml("admin", "POST", "/api/v1/clusters", body).want(t, http.StatusCreated)
	}
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r1", "true")).want(t, http.StatusAccepted)
	h.advance(t, "team-a", "r1", v1alpha1.PhaseRunning) // on sandbox-1

	start := []byte(`{"target":{"kind":"dc","name":"dc1"}}`)
	var d v1alpha1.Drill
	r := h.do("admin", "POST", "/api/v1/drills", "application/json", start).want(t, http.StatusCreated)
	if err := json.Unmarshal(r.raw, &d); err != nil {
		t.Fatal(err)
	}
	o := d.Status.Runnables
	if d.Status.State != v1alpha1.DrillRunning || d.Status.Planned.Verdict != "Absorbed" || len(o) != 1 || o[0].Runnable != "team-a/r1" ||
		o[0].Step != v1alpha1.MoveAsked || o[0].To != "sandbox-2" || o[0].PlannedTo != "sandbox-2" || o[0].AskedAt == nil || d.Status.Totals.Moving != 1 {
		t.Fatalf("the drill: %s", r.raw)
	}
	run := h.get("admin", "/api/v1/runnables/team-a/r1").want(t, http.StatusOK)
	if run.str("status", "move", "to") != "sandbox-2" || run.str("status", "move", "by") != "admin" || run.str("status", "move", "step") != v1alpha1.MoveAsked ||
		!strings.Contains(run.str("status", "message"), "(for drill "+d.Metadata.Name+")") {
		t.Fatalf("the runnable's move: %s", run.raw)
	}

	before := h.counts()
	again := h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc2"},"force":true}`)).
		want(t, http.StatusConflict)
	if !strings.Contains(string(again.raw), "drill "+d.Metadata.Name+" (dc dc1, started by admin) is still running") {
		t.Errorf("a second drill: %s", again.raw)
	}
	path := "/api/v1/drills/" + d.Metadata.Name + "/end"
	h.do("admin", "POST", path, "application/json", []byte(`{"moveBack":true}`)).want(t, http.StatusConflict)
	if after := h.counts(); !maps.Equal(before, after) {
		t.Fatalf("refusals wrote: %v -> %v", before, after)
	}
	r = h.do("admin", "POST", path, "", nil).want(t, http.StatusOK)
	var ended v1alpha1.Drill
	if err := json.Unmarshal(r.raw, &ended); err != nil {
		t.Fatal(err)
	}
	if e := ended.Status.End; e == nil || e.MoveBack || !slices.Equal(e.Uncordoned, []string{"sandbox-1"}) || ended.Status.State != v1alpha1.DrillRunning {
		t.Fatalf("ended while running: %s", r.raw)
	}
}
