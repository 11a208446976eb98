package tenancy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// testDrills: what a tenant can learn or do with drills. The what-if of
// losing a DC reads every tenant's work on it (names, demands, quotas):
// mallory may not ask for one, in any form, and asking changes nothing;
// the standing headroom of the DCs is every user's, but only as figures:
// which runnables would be left, and why, is for admins.
func testDrills(t *testing.T, f *farm) {
	ctx := t.Context()
	// dc1 in a DC of its own for the test, and a victim's runnable on it
	// that the farm could not place elsewhere (there is nowhere else).
	relabel := func(labels map[string]any) {
		t.Helper()
		cl := f.do("admin", "GET", "/api/v1/clusters/dc1", nil).want(t, http.StatusOK)
		meta, _ := cl.body["metadata"].(map[string]any)
		meta["labels"] = labels
		body, _ := json.Marshal(cl.body)
		f.do("admin", "PUT", "/api/v1/clusters/dc1", body).want(t, http.StatusOK)
	}
	cl := f.do("admin", "GET", "/api/v1/clusters/dc1", nil).want(t, http.StatusOK)
	before, _ := cl.body["metadata"].(map[string]any)["labels"].(map[string]any)
	with := map[string]any{"dc": "drill-zone"}
	for k, v := range before {
		with[k] = v
	}
	relabel(with)
	defer relabel(before)
	secret := &store.Runnable{Namespace: f.victim, Name: "payroll-close", UID: "drill-" + f.victim, Generation: 1,
		Spec: []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job"}}}`), SpecHash: "h", Phase: string(v1alpha1.PhaseRunning),
		Cluster: "dc1", Submitter: "victor", Status: []byte(`{"phase":"Running","cluster":"dc1","requests":{"cpu":"3"}}`)}
	if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Runnables().Create(ctx, secret) }); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.store.Tx(ctx, func(tx *store.Tx) error {
			cur, err := tx.Runnables().GetByUID(ctx, secret.UID)
			if err != nil {
				return err
			}
			return tx.Runnables().Delete(ctx, cur.UID, cur.ResourceVersion)
		}); err != nil {
			t.Error(err)
		}
	}()

	for _, try := range []struct{ what, path, body string }{
		{"a dry run", "/api/v1/drills", "target: {kind: dc, name: drill-zone}\ndryRun: true\n"},
		{"a dry run by query", "/api/v1/drills?dryRun=All", "target: {kind: cluster, name: dc1}\n"},
		{"a dry run over a selector", "/api/v1/drills", "target: {kind: selector, name: 'dc'}\ndryRun: true\n"},
		{"a real drill", "/api/v1/drills", "target: {kind: dc, name: drill-zone}\n"},
		{"a real drill of a DC that does not exist", "/api/v1/drills", "target: {kind: dc, name: nowhere}\n"},
	} {
		a := f.refused("mallory asks "+try.what, http.StatusForbidden, func() answer { return f.yaml("mallory", "POST", try.path, try.body) })
		if strings.Contains(string(a.raw), "payroll") {
			t.Errorf("mallory's refusal of %s names the victim's work: %s", try.what, a.raw)
		}
	}

	// The headroom: mallory sees that losing the DC leaves work behind,
	// and how much, never whose.
	var mine map[string]any
	a := f.do("mallory", "GET", "/api/v1/dcs", nil).want(t, http.StatusOK)
	for _, it := range a.body["items"].([]any) {
		if dc := it.(map[string]any); dc["metadata"].(map[string]any)["name"] == "drill-zone" {
			mine = dc["status"].(map[string]any)
		}
	}
	if mine == nil || mine["headroom"].(map[string]any)["absorbable"] != false {
		t.Fatalf("mallory's DC list: %s", a.raw)
	}
	if strings.Contains(string(a.raw), "payroll") || strings.Contains(string(a.raw), f.victim) || mine["message"] != nil {
		t.Errorf("mallory's DC list names the victim's work: %s", a.raw)
	}
	// The same figures on /metrics, which asks for no token: the DC and
	// how much, never whose.
	m := f.do("", "GET", "/metrics", nil).want(t, http.StatusOK)
	if !strings.Contains(string(m.raw), `purser_dc_headroom_absorbable{dc="drill-zone"} 0`) {
		t.Errorf("/metrics lacks drill-zone's headroom")
	}
	for line := range strings.Lines(string(m.raw)) {
		if strings.HasPrefix(line, "purser_dc_headroom") && (strings.Contains(line, "payroll") || strings.Contains(line, f.victim)) {
			t.Errorf("/metrics names the victim's work: %s", line)
		}
	}
	// The admin's says which runnable is short first (the farm may hold
	// others' work by now), and the dry run lists the victim's among those
	// it places nowhere.
	if a := f.do("admin", "GET", "/api/v1/dcs", nil).want(t, http.StatusOK); !strings.Contains(string(a.raw), `"message":"losing dc drill-zone is not absorbed`) {
		t.Errorf("the admin's DC list does not say what is short: %s", a.raw)
	}
	rep := f.yaml("admin", "POST", "/api/v1/drills", "target: {kind: dc, name: drill-zone}\ndryRun: true\n").want(t, http.StatusOK)
	if rep.str("verdict") != "NotAbsorbed" || !strings.Contains(string(rep.raw), f.victim+"/payroll-close") {
		t.Errorf("the admin's dry run: %s", rep.raw)
	}
}
