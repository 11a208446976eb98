package store

import (
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

func testAgentFreshness(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	mustTx(t, s, func(tx *Tx) error { return tx.Agents().Touch(ctx, "dc1-a", nil, nil, &t1) })
	mustTx(t, s, func(tx *Tx) error { return tx.Agents().Touch(ctx, "dc1-a", nil, &t0, &t0) }) // a late batch
	var got map[string]AgentFreshness
	mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Agents().ListFreshness(ctx); return })
	f := got["dc1-a"]
	if f.LastEvent == nil || !f.LastEvent.Equal(t1) {
		t.Fatalf("last event %v, want %v: a late batch moved it back", f.LastEvent, t1)
	}
	if f.LastSnapshot == nil || !f.LastSnapshot.Equal(t0) || f.LastHeartbeat != nil {
		t.Fatalf("freshness %+v", f)
	}
	mustTx(t, s, func(tx *Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []InventoryRow{
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "x", UID: "u1", ResourceVersion: "5", ObservedAt: t0},
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "y", UID: "u2", ResourceVersion: "6", ObservedAt: t0},
			{Cluster: "dc2-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "x", UID: "u3", ResourceVersion: "7", ObservedAt: t0},
		})
		return err
	})
	// Heartbeats: the report of the newest beat wins, and the last
	// current one stays through beats that are not current.
	t2, t3 := t1.Add(10*time.Second), t1.Add(20*time.Second)
	mustTx(t, s, func(tx *Tx) error {
		return tx.Agents().RecordHeartbeat(ctx, "dc1-a", t2, []byte(`{"connected":true,"synced":true}`), true)
	})
	mustTx(t, s, func(tx *Tx) error {
		return tx.Agents().RecordHeartbeat(ctx, "dc1-a", t3, []byte(`{"connected":false,"synced":true}`), false)
	})
	mustTx(t, s, func(tx *Tx) error {
		return tx.Agents().RecordHeartbeat(ctx, "dc1-a", t2, []byte(`{"late":true}`), true)
	}) // redelivered
	mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Agents().ListFreshness(ctx); return })
	f = got["dc1-a"]
	if f.LastHeartbeat == nil || !f.LastHeartbeat.Equal(t3) || f.CurrentUntil == nil || !f.CurrentUntil.Equal(t2) ||
		string(f.KubeAPI) != `{"connected":false,"synced":true}` || !f.LastEvent.Equal(t1) || !f.LastSnapshot.Equal(t0) {
		t.Fatalf("after heartbeats: %+v (kubeAPI %s)", f, f.KubeAPI)
	}
	mustTx(t, s, func(tx *Tx) error { return tx.Agents().RecordHeartbeat(ctx, "dc9", t3, nil, false) }) // an agent that says nothing
	mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Agents().ListFreshness(ctx); return })
	if f := got["dc9"]; f.KubeAPI != nil || f.CurrentUntil != nil || !f.LastHeartbeat.Equal(t3) {
		t.Fatalf("a heartbeat without a report: %+v", f)
	}

	var counts map[string]int64
	mustRead(t, s, func(tx *Tx) (err error) { counts, err = tx.Inventory().CountByCluster(ctx); return })
	if counts["dc1-a"] != 2 || counts["dc2-a"] != 1 {
		t.Fatalf("counts %v", counts)
	}
}

func testInventoryLabelSelector(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	row := func(name string, l map[string]string) InventoryRow {
		return InventoryRow{Cluster: "c", APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: name, UID: name,
			ResourceVersion: "1", Labels: l, Health: "Healthy", ObservedAt: at}
	}
	mustTx(t, s, func(tx *Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []InventoryRow{
			row("web", map[string]string{"app.kubernetes.io/name": "web", "tier": "prod"}),
			row("db", map[string]string{"app.kubernetes.io/name": "db", "tier": "prod"}),
			row("dev", map[string]string{"tier": "dev"}),
			row("none", nil),
		})
		return err
	})
	for sel, want := range map[string]string{
		"tier=prod":                          "db,web",
		"tier==prod,app.kubernetes.io/name":  "db,web",
		"app.kubernetes.io/name in (web,x)":  "web",
		"tier!=prod":                         "dev,none",
		"app.kubernetes.io/name notin (web)": "db,dev,none",
		"!app.kubernetes.io/name":            "dev,none",
		"tier":                               "db,dev,web",
	} {
		parsed, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		var items []InventoryRow
		mustRead(t, s, func(tx *Tx) (err error) {
			items, _, err = tx.Inventory().List(ctx, InventoryFilter{Selector: parsed, WithoutObject: true})
			return
		})
		var names []string
		for _, it := range items {
			names = append(names, it.Name)
		}
		sort.Strings(names)
		if got := strings.Join(names, ","); got != want {
			t.Errorf("%q selected %q, want %q", sel, got, want)
		}
	}
}
