package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// In a namespace that needs approval (team-b), an approval binds to a
// generation: a PUT of an approved, still Queued runnable, or of a running
// FlinkDeployment (an update in place), waits beside the live spec; the
// live spec and its generation stay until another approver approves the
// change, and status.approvedBy with approvedGeneration say who approved
// which. Its author cannot approve it, a PUT of the live spec withdraws
// it, a rejection leaves the live spec, and a rerun waits for the change
// to be decided.
func TestApprovalBindsToGeneration(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	path := "/api/v1/runnables/team-b/payroll"
	withRV := func(body, rv string) string {
		return strings.Replace(body, "  namespace: team-b\n", "  namespace: team-b\n  resourceVersion: \""+rv+"\"\n", 1)
	}
	gen := func(r response) string { return fmt.Sprint(r.body["metadata"].(map[string]any)["generation"]) }
	status := func(r response, key string) string { return fmt.Sprint(r.body["status"].(map[string]any)[key]) }

	h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "payroll", "echo v1")).want(t, http.StatusAccepted)
	ok := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if ok.str("status", "approvedBy") != "carol" || status(ok, "approvedGeneration") != "1" {
		t.Fatalf("after the first approval: %s", ok.raw)
	}

	// The approved, Queued runnable changed by its author: generation 1
	// stays live, the change waits as generation 2.
	put := h.yaml("dave", "PUT", path, withRV(runnableYAML("team-b", "payroll", "echo v2"), ok.str("metadata", "resourceVersion"))).want(t, http.StatusOK)
	if gen(put) != "1" || put.str("status", "phase") != "Queued" || !strings.Contains(string(put.raw), `"command":["sh","-c","echo v1"]`) {
		t.Fatalf("the change went live before approval: %s", put.raw)
	}
	pc, _ := put.body["status"].(map[string]any)["pendingChange"].(map[string]any)
	if pc == nil || pc["author"] != "dave" || fmt.Sprint(pc["generation"]) != "2" || !strings.Contains(fmt.Sprint(pc["spec"]), "echo v2") {
		t.Fatalf("status.pendingChange: %v", pc)
	}
	if status(put, "approvedGeneration") != "1" {
		t.Fatalf("approvedGeneration after the change: %s", put.raw)
	}
	h.decide("dave", path, "approve").want(t, http.StatusForbidden) // not an approver
	h.yaml("alice", "PUT", path, withRV(runnableYAML("team-b", "payroll", "echo v3"), put.str("metadata", "resourceVersion"))).want(t, http.StatusOK)
	if a := h.decide("alice", path, "approve").want(t, http.StatusForbidden); !strings.Contains(a.str("message"), "cannot also decide") {
		t.Fatalf("the change's author approving it: %s", a.raw)
	}
	// The version reviewed binds: an approval of dave's change, which
	// alice's replaced, is refused.
	h.do("carol", "POST", path+"/approve?resourceVersion="+put.str("metadata", "resourceVersion"), "", nil).want(t, http.StatusConflict)
	app := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if gen(app) != "2" || app.str("status", "approvedBy") != "carol" || status(app, "approvedGeneration") != "2" ||
		!strings.Contains(string(app.raw), "echo v3") || app.body["status"].(map[string]any)["pendingChange"] != nil {
		t.Fatalf("after approving the change: %s", app.raw)
	}

	// Withdrawn by sending the live spec again; rejected: the live spec stays.
	w := h.yaml("dave", "PUT", path, withRV(runnableYAML("team-b", "payroll", "echo v4"), app.str("metadata", "resourceVersion"))).want(t, http.StatusOK)
	back := h.yaml("dave", "PUT", path, withRV(runnableYAML("team-b", "payroll", "echo v3"), w.str("metadata", "resourceVersion"))).want(t, http.StatusOK)
	if back.body["status"].(map[string]any)["pendingChange"] != nil || gen(back) != "2" {
		t.Fatalf("after withdrawing: %s", back.raw)
	}
	h.yaml("dave", "PUT", path, withRV(runnableYAML("team-b", "payroll", "echo v5"), back.str("metadata", "resourceVersion"))).want(t, http.StatusOK)
	rej := h.decide("carol", path, "reject").want(t, http.StatusOK)
	if gen(rej) != "2" || rej.str("status", "phase") != "Queued" || !strings.Contains(string(rej.raw), "echo v3") || strings.Contains(string(rej.raw), "echo v5") {
		t.Fatalf("after rejecting: %s", rej.raw)
	}

	// A running FlinkDeployment: the update in place waits too, and the
	// submitter is asked to apply it only once approved.
	fpath := "/api/v1/runnables/team-b/wc"
	flink := func(parallelism int) string {
		return strings.Replace(flinkRunnableYAML("wc", parallelism, ""), "namespace: team-a", "namespace: team-b", 1)
	}
	h.yaml("dave", "POST", "/api/v1/runnables", flink(2)).want(t, http.StatusAccepted)
	h.decide("carol", fpath, "approve").want(t, http.StatusOK)
	h.advance(t, "team-b", "wc", v1alpha1.PhaseRunning)
	rv := h.get("dave", fpath).str("metadata", "resourceVersion")
	up := h.yaml("dave", "PUT", fpath, withRV(flink(3), rv)).want(t, http.StatusOK)
	if gen(up) != "1" || up.body["status"].(map[string]any)["update"] != nil || up.str("status", "phase") != "Running" {
		t.Fatalf("an update in place ran ahead of its approval: %s", up.raw)
	}
	fa := h.decide("carol", fpath, "approve").want(t, http.StatusOK)
	if gen(fa) != "2" || fa.str("status", "update", "by") != "carol" || status(fa, "approvedGeneration") != "2" {
		t.Fatalf("after approving the update in place: %s", fa.raw)
	}

	// An ended runnable with a change waiting is not rerun before the
	// change is decided.
	h.advance(t, "team-b", "wc", v1alpha1.PhaseSucceeded)
	rv = h.get("dave", fpath).str("metadata", "resourceVersion")
	h.yaml("dave", "PUT", fpath, withRV(flink(4), rv)).want(t, http.StatusOK)
	if r := h.do("dave", "POST", fpath+"/rerun", "", nil).want(t, http.StatusConflict); !strings.Contains(r.str("message"), "waits for approval") {
		t.Fatalf("rerun with a change waiting: %s", r.raw)
	}
}

// A deployable's live spec says who approved it and as which generation;
// a change of its overrides waits as any change of its spec does.
func TestDeployableApprovalNamesItsGeneration(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	path := "/api/v1/deployables/team-b/cfg"
	status := func(r response, key string) string { return fmt.Sprint(r.body["status"].(map[string]any)[key]) }
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "cfg", "v1")).want(t, http.StatusCreated)
	a := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if a.str("status", "approvedBy") != "carol" || status(a, "approvedGeneration") != "1" {
		t.Fatalf("after approval: %s", a.raw)
	}
	overridden := configMapDeployable("team-b", "cfg", "v1") + "  overrides:\n  - clusterSelector: {matchLabels: {dc: dc1}}\n    patch: {data: {key: v2}}\n"
	p := h.yaml("dave", "PUT", path, overridden).want(t, http.StatusOK)
	if status(p, "generation") != "1" || status(p, "approvedGeneration") != "1" || strings.Contains(fmt.Sprint(p.body["spec"]), "overrides") ||
		fmt.Sprint(p.body["status"].(map[string]any)["pendingChange"].(map[string]any)["generation"]) != "2" {
		t.Fatalf("an override went live before approval: %s", p.raw)
	}
	b := h.decide("alice", path, "approve").want(t, http.StatusOK)
	if status(b, "generation") != "2" || b.str("status", "approvedBy") != "alice" || status(b, "approvedGeneration") != "2" {
		t.Fatalf("after approving the override: %s", b.raw)
	}
}
