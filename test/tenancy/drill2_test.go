package tenancy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// testDrills2: a tenant and the real drills. Starting one cordons
// clusters and moves every tenant's work, and its report names that
// work: mallory may not start one (forced or not), list them, read one,
// or end one (with or without moving the work back); each refusal is a
// 403 that names nothing of the report, and changes nothing: no drill, no
// cluster's taints, the drill she aimed at as it was.
func testDrills2(t *testing.T, f *farm) {
	ctx := t.Context()
	// A drill of the admin's, as the API keeps one: it moved the
	// victim's work.
	d := &store.Drill{TargetKind: v1alpha1.DrillTargetCluster, TargetName: "dc1", Actor: "admin", State: store.DrillEnded,
		StartedAt: time.Now(), Planned: []byte(`{"target":{"kind":"cluster","name":"dc1"},"verdict":"Absorbed","moves":[],"unplaceable":[],"clusters":[]}`),
		Actual: []byte(`{"runnables":[{"runnable":"` + f.victim + `/payroll-close","from":"dc1","plannedTo":"dc2","step":"Done","to":"dc2"}],"cordoned":["dc1"]}`)}
	if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Drills().Create(ctx, d) }); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(d.ID, 10)
	drills := func() string {
		t.Helper()
		var n, rv int64
		if err := f.raw.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(resource_version), 0) FROM drills").Scan(&n, &rv); err != nil {
			t.Fatal(err)
		}
		var clusters int64
		if err := f.raw.QueryRowContext(ctx, "SELECT COALESCE(SUM(resource_version), 0) FROM clusters").Scan(&clusters); err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(n, 10) + " " + strconv.FormatInt(rv, 10) + " " + strconv.FormatInt(clusters, 10)
	}
	before := drills()
	for _, try := range []struct{ what, method, path, body string }{
		{"a real drill", "POST", "/api/v1/drills", "target: {kind: cluster, name: dc1}\n"},
		{"a forced real drill", "POST", "/api/v1/drills", "target: {kind: cluster, name: dc1}\nforce: true\n"},
		{"a forced real drill of a selector", "POST", "/api/v1/drills", "target: {kind: selector, name: dc}\nforce: true\n"},
		{"the list of drills", "GET", "/api/v1/drills", ""},
		{"the running drills", "GET", "/api/v1/drills?state=Running", ""},
		{"a drill's report", "GET", "/api/v1/drills/" + id, ""},
		{"a drill that does not exist", "GET", "/api/v1/drills/999999", ""},
		{"the end of a drill", "POST", "/api/v1/drills/" + id + "/end", ""},
		{"the end of a drill with its work moved back", "POST", "/api/v1/drills/" + id + "/end", "moveBack: true\n"},
	} {
		a := f.refused("mallory asks "+try.what, http.StatusForbidden, func() answer { return f.yaml("mallory", try.method, try.path, try.body) })
		if strings.Contains(string(a.raw), "payroll") || strings.Contains(string(a.raw), f.victim) {
			t.Errorf("mallory's refusal of %s names the victim's work: %s", try.what, a.raw)
		}
		if after := drills(); after != before {
			t.Fatalf("mallory's %s changed the drills or the clusters: %s -> %s", try.what, before, after)
		}
	}
	// The admin reads it; it was not ended by any of the above.
	a := f.do("admin", "GET", "/api/v1/drills/"+id, nil).want(t, http.StatusOK)
	if st, _ := a.body["status"].(map[string]any); st == nil || st["end"] != nil || !strings.Contains(string(a.raw), f.victim+"/payroll-close") {
		t.Errorf("the admin's report: %s", a.raw)
	}
}
