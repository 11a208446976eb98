package store

import (
	"reflect"
	"testing"
	"time"
)

func testCounts(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	runnables := []*Runnable{newRunnable("a", "one"), newRunnable("a", "two"), newRunnable("b", "three"), newRunnable("b", "queued")}
	for i, phase := range []string{"Running", "Running", "Succeeded", "Queued"} {
		runnables[i].Phase = phase
		if phase != "Queued" {
			runnables[i].Cluster = []string{"dc1", "dc1", "dc2"}[i]
		}
	}
	mustTx(t, s, func(tx *Tx) error {
		for _, r := range runnables {
			if err := tx.Runnables().Create(ctx, r); err != nil {
				return err
			}
		}
		for n := 1; n <= 2; n++ {
			if err := tx.Attempts().Put(ctx, &Attempt{RunnableUID: runnables[0].UID, Number: n, Cluster: "dc1", StartedAt: at}); err != nil {
				return err
			}
		}
		return tx.Attempts().Put(ctx, &Attempt{RunnableUID: runnables[2].UID, Number: 1, Cluster: "dc2", StartedAt: at})
	})
	var byPhase map[string]map[string]int
	var attempts map[string]int
	mustRead(t, s, func(tx *Tx) (err error) {
		if byPhase, err = tx.Runnables().CountByClusterPhase(ctx); err != nil {
			return err
		}
		attempts, err = tx.Attempts().Count(ctx, []string{runnables[0].UID, runnables[1].UID, runnables[2].UID})
		return err
	})
	if want := map[string]map[string]int{"dc1": {"Running": 2}, "dc2": {"Succeeded": 1}}; !reflect.DeepEqual(byPhase, want) {
		t.Errorf("by cluster and phase: %v, want %v", byPhase, want)
	}
	if want := map[string]int{runnables[0].UID: 2, runnables[2].UID: 1}; !reflect.DeepEqual(attempts, want) {
		t.Errorf("attempts: %v, want %v", attempts, want)
	}
}

func testInventorySystem(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	row := func(kind, ns, name string, l map[string]string) InventoryRow {
		return InventoryRow{Cluster: "c", APIVersion: "v1", Kind: kind, Namespace: ns, Name: name, UID: kind + ns + name,
			ResourceVersion: "1", Labels: l, ObservedAt: at}
	}
	rows := []InventoryRow{
		row("ConfigMap", "team-a", "kube-root-ca.crt", nil),
		row("ConfigMap", "team-a", "app-config", nil),
		row("ConfigMap", "kube-system", "extension-apiserver-authentication", nil),
		row("ConfigMap", "kube-system", "synced", map[string]string{"purser.io/deployable": "x"}),
		row("ServiceAccount", "team-a", "default", nil),
		row("ServiceAccount", "team-a", "builder", nil),
		row("Lease", "kube-node-lease", "node-1", nil),
		row("Node", "", "node-1", nil),
		row("Job", "team-a", "default", map[string]string{"purser.io/runnable-uid": "u"}),
	}
	mustTx(t, s, func(tx *Tx) error { _, err := tx.Inventory().Upsert(ctx, rows); return err })
	for _, system := range []bool{false, true} {
		var items []InventoryRow
		mustRead(t, s, func(tx *Tx) (err error) {
			items, _, err = tx.Inventory().List(ctx, InventoryFilter{System: system, WithoutObject: true})
			return
		})
		var got []string
		for _, it := range items {
			got = append(got, it.Kind+"/"+it.Namespace+"/"+it.Name)
			if IsSystemObject(it.Kind, it.Namespace, it.Name, it.Labels) && !system {
				t.Errorf("%s/%s/%s is a system object, listed without ?system", it.Kind, it.Namespace, it.Name)
			}
		}
		want := []string{"ConfigMap/kube-system/synced", "ConfigMap/team-a/app-config", "Job/team-a/default", "Node//node-1", "ServiceAccount/team-a/builder"}
		if system {
			want = []string{"ConfigMap/kube-system/extension-apiserver-authentication", "ConfigMap/kube-system/synced",
				"ConfigMap/team-a/app-config", "ConfigMap/team-a/kube-root-ca.crt", "Job/team-a/default",
				"Lease/kube-node-lease/node-1", "Node//node-1", "ServiceAccount/team-a/builder", "ServiceAccount/team-a/default"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("system %v: %v, want %v", system, got, want)
		}
	}
}
