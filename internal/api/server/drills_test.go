package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
)

// drillFarm registers dc1-a (DC dc1, two Running jobs of 2 CPUs of
// team-a, the second of class high) and dc2-a (DC dc2, 3 CPUs free).
func drillFarm(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct{ name, dc string }{{"dc1-a", "dc1"}, {"dc2-a", "dc2"}} {
		body := strings.Replace(clusterYAML(c.name, "tok-"+c.name), "labels: {dc: dc1,", "labels: {dc: "+c.dc+",", 1)
		h.yaml("admin", "POST", "/api/v1/clusters", body).want(t, http.StatusCreated)
	}
	report := func(free string) []byte {
		b, err := json.Marshal(stream.Capacity{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(free)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		// dc1-a runs two jobs of 2 CPUs; dc2-a has 3 CPUs free: one fits.
		if err := tx.Agents().RecordCapacity(ctx, "dc1-a", time.Now(), report("4")); err != nil {
			return err
		}
		if err := tx.Agents().RecordCapacity(ctx, "dc2-a", time.Now(), report("3")); err != nil {
			return err
		}
		for i, prio := range []string{``, `,"priority":"high"`} {
			if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: "team-a", Name: fmt.Sprintf("j%d", i), UID: fmt.Sprintf("uid-%d", i),
				Generation: 1, Spec: []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job"}` + prio + `}}`), SpecHash: "h",
				Phase: "Running", Cluster: "dc1-a", Submitter: "alice", Status: []byte(`{"phase":"Running","cluster":"dc1-a","requests":{"cpu":"2"}}`)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDrillDryRun: POST /api/v1/drills with dryRun answers the what-if of
// losing a DC from the farm as the store holds it (the clusters' labels,
// the agents' reports, the runnables on them), for admins only, and
// changes nothing; GET /api/v1/dcs gives each DC's headroom.
func TestDrillDryRun(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	drillFarm(t, h)
	before := h.counts()

	dry := `{"target":{"kind":"dc","name":"dc1"},"dryRun":true}`
	h.do("alice", "POST", "/api/v1/drills", "application/json", []byte(dry)).want(t, http.StatusForbidden)
	r := h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(dry)).want(t, http.StatusOK)
	var rep struct {
		Target  struct{ Kind, Name string }
		Verdict string
		Moves   []struct {
			Runnable, From, To string
			DowntimeSeconds    float64
		}
		Unplaceable     []struct{ Runnable, Reason string }
		Clusters        []struct{ Name string }
		DurationSeconds float64
	}
	if err := json.Unmarshal(r.raw, &rep); err != nil {
		t.Fatal(err)
	}
	// The one of class high goes first and takes the room.
	if rep.Verdict != "Partial" || len(rep.Moves) != 1 || rep.Moves[0].Runnable != "team-a/j1" || rep.Moves[0].To != "dc2-a" ||
		rep.Moves[0].From != "dc1-a" || len(rep.Unplaceable) != 1 || !strings.Contains(rep.Unplaceable[0].Reason, "cpu") ||
		rep.DurationSeconds != 0.5 || len(rep.Clusters) != 2 || rep.Target.Name != "dc1" {
		t.Fatalf("what-if: %s", r.raw)
	}
	// ?dryRun=All says the same; a cluster is a target too.
	h.do("admin", "POST", "/api/v1/drills?dryRun=All", "application/json", []byte(`{"target":{"kind":"cluster","name":"dc2-a"}}`)).
		want(t, http.StatusOK)

	for _, bad := range []struct{ path, body, names string }{
		{"/api/v1/drills", `{"target":{"kind":"dc","name":"nowhere"},"dryRun":true}`, "nowhere"},
		{"/api/v1/drills", `{"target":{"kind":"zone","name":"dc1"},"dryRun":true}`, "zone"},
		{"/api/v1/drills", `{"target":{"kind":"selector","name":"dc in ("},"dryRun":true}`, "dc in ("},
		{"/api/v1/drills?dryRun=yes", `{"target":{"kind":"dc","name":"dc1"}}`, "dryRun=yes"},
		{"/api/v1/drills", `{"target":{"kind":"dc"},"dryRun":true}`, "target.name"},
	} {
		got := h.do("admin", "POST", bad.path, "application/json", []byte(bad.body)).want(t, http.StatusUnprocessableEntity)
		if !strings.Contains(string(got.raw), bad.names) {
			t.Errorf("%s %s: %s does not name %q", bad.path, bad.body, got.raw, bad.names)
		}
	}
	h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc1"},"extra":1}`)).
		want(t, http.StatusBadRequest)
	// A real drill of a DC whose loss is not absorbed: refused with the
	// verdict and the shortage, nothing done (the counts below).
	refused := h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc1"}}`)).
		want(t, http.StatusConflict)
	if !strings.Contains(string(refused.raw), `"reason":"Partial"`) || !strings.Contains(string(refused.raw), "team-a/j0: asks for cpu 2") {
		t.Errorf("refusal of a real drill: %s", refused.raw)
	}
	h.do("admin", "POST", "/api/v1/drills", "application/json", []byte(`{"target":{"kind":"dc","name":"dc1"},"dryRun":true,"force":true}`)).
		want(t, http.StatusUnprocessableEntity)

	headroom := func(user string) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, it := range h.get(user, "/api/v1/dcs").want(t, http.StatusOK).items() {
			out[it["metadata"].(map[string]any)["name"].(string)] = it["status"].(map[string]any)
		}
		return out
	}
	dcs := headroom("alice")
	if hr := dcs["dc1"]["headroom"].(map[string]any); hr["absorbable"] != false || hr["short"].(map[string]any)["runnables"] != 1.0 ||
		hr["short"].(map[string]any)["requests"].(map[string]any)["cpu"] != "2" {
		t.Errorf("dc1 headroom %v", dcs["dc1"])
	}
	if dcs["dc1"]["message"] != nil {
		t.Errorf("a tenant sees which runnables: %v", dcs["dc1"]["message"])
	}
	if hr := dcs["dc2"]["headroom"].(map[string]any); hr["absorbable"] != true || hr["short"] != nil {
		t.Errorf("dc2 headroom %v", dcs["dc2"])
	}
	if msg, _ := headroom("admin")["dc1"]["message"].(string); !strings.Contains(msg, "team-a/j0: asks for cpu 2") {
		t.Errorf("admin's message %q does not name the runnable left", msg)
	}
	if after := h.counts(); !maps.Equal(before, after) {
		t.Errorf("a dry run changed the store: %v, then %v", before, after)
	}
}

// TestDCHeadroomKept: the DC list is computed at most once per
// DCHeadroomTTL, whoever asks: a change of the farm shows once it passed.
func TestDCHeadroomKept(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHarness(t, storetest.Engines()[0], func(cfg *server.Config, _ *http.Server) { cfg.Now = clock })
	drillFarm(t, h)
	absorbable := func(user string) any {
		for _, it := range h.get(user, "/api/v1/dcs").want(t, http.StatusOK).items() {
			if it["metadata"].(map[string]any)["name"] == "dc2" {
				return it["status"].(map[string]any)["headroom"].(map[string]any)["absorbable"]
			}
		}
		return nil
	}
	if got := absorbable("alice"); got != true {
		t.Fatalf("dc2 absorbable: %v", got)
	}
	// dc2-a now runs a job that dc1-a has no room for.
	ctx := context.Background()
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Runnables().Create(ctx, &store.Runnable{Namespace: "team-a", Name: "big", UID: "uid-big", Generation: 1,
			Spec: []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job"}}}`), SpecHash: "h", Phase: "Running",
			Cluster: "dc2-a", Status: []byte(`{"phase":"Running","cluster":"dc2-a","requests":{"cpu":"7"}}`)})
	}); err != nil {
		t.Fatal(err)
	}
	if got := absorbable("admin"); got != true {
		t.Errorf("within %s of the first list, another user's is computed again: dc2 absorbable %v", server.DCHeadroomTTL, got)
	}
	mu.Lock()
	now = now.Add(server.DCHeadroomTTL)
	mu.Unlock()
	if got := absorbable("alice"); got != false {
		t.Errorf("after %s, the list is not computed again: dc2 absorbable %v", server.DCHeadroomTTL, got)
	}
}
