package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// Priority is chosen by class: a tenant's integer, an undefined class or
// one its namespace may not use is 422 naming the classes it may, and
// changes nothing; an admin may give an integer; the namespace's default
// class is written into a spec that gives none.
func TestPriorityByClass(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	before := h.counts()
	for _, tc := range []struct{ what, user, ns, prio, says string }{
		{"a tenant's integer", "alice", "team-a", "2147483647", "an integer priority (2147483647) is for the farm's admins; namespace team-a may use the priority classes high, top, urgent"},
		{"a class of another namespace", "alice", "team-k", "top", `priority class \"top\" is not one namespace team-k may use; namespace team-k may use the priority classes high, urgent`},
		{"an undefined class", "alice", "team-a", "vip", `the policy defines no priority class \"vip\"`},
	} {
		a := h.yaml(tc.user, "POST", "/api/v1/runnables", runnableYAML(tc.ns, "p", "true")+"  priority: "+tc.prio+"\n").want(t, http.StatusUnprocessableEntity)
		if !strings.Contains(string(a.raw), tc.says) || !strings.Contains(string(a.raw), `"field":"spec.priority"`) {
			t.Errorf("%s: %s", tc.what, a.raw)
		}
	}
	if after := h.counts(); !equalCounts(before, after) {
		t.Fatalf("a refused priority changed the tables: %v -> %v", before, after)
	}

	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "top", "true")+"  priority: top\n").want(t, http.StatusAccepted)
	h.yaml("admin", "POST", "/api/v1/runnables", runnableYAML("team-k", "ops", "true")+"  priority: 1000\n").want(t, http.StatusAccepted)

	// A tenant's PUT may not raise it to an integer either, nor may a
	// tenant rerun an admin's integer as hers.
	got := h.get("alice", "/api/v1/runnables/team-a/top").want(t, http.StatusOK)
	put := strings.Replace(runnableYAML("team-a", "top", "true"), "  namespace: team-a\n", "  namespace: team-a\n  resourceVersion: \""+got.str("metadata", "resourceVersion")+"\"\n", 1) + "  priority: 99\n"
	h.yaml("alice", "PUT", "/api/v1/runnables/team-a/top", put).want(t, http.StatusUnprocessableEntity)

	// A namespace's default class fills a spec without one.
	pol := testPolicy()
	ns := pol.Namespaces["team-k"]
	ns.DefaultPriorityClass = "high"
	pol.Namespaces["team-k"] = ns
	h.setPolicy(t, pol)
	d := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-k", "dflt", "true")).want(t, http.StatusAccepted)
	if p, _ := d.body["spec"].(map[string]any)["priority"].(string); p != "high" {
		t.Fatalf("spec.priority of a runnable without one in team-k: %q, want the default class high: %s", p, d.raw)
	}
}
