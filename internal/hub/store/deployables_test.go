package store

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func newDeployable(namespace, name string) *Deployable {
	return &Deployable{
		Namespace:  namespace,
		Name:       name,
		UID:        "uid-" + namespace + "-" + name,
		Generation: 1,
		Spec:       []byte(`{"template":{"apiVersion":"v1","kind":"Secret"}}`),
		Secret:     []byte{0, 1, 2, 0xff, 'x'}, // sealed bytes, not text
		SpecHash:   "h-" + name,
	}
}

func testDeployables(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	d := newDeployable("team-a", "app-secret")
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Clusters().Create(ctx, &Cluster{Name: "dc1-a", Spec: []byte(`{}`)}); err != nil {
			return err
		}
		if err := tx.Clusters().Create(ctx, &Cluster{Name: "dc2-a", Spec: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.Deployables().Create(ctx, d)
	})
	if d.ID == 0 || d.ResourceVersion != 1 || d.CreatedAt.IsZero() {
		t.Fatalf("create did not fill ID, times and ResourceVersion: %+v", d)
	}
	mustTx(t, s, func(tx *Tx) error {
		dup := newDeployable("team-a", "app-secret")
		dup.UID = "other"
		wantErr(t, tx.Deployables().Create(ctx, dup), ErrConflict)
		_, err := tx.Deployables().Get(ctx, "team-a", "missing")
		wantErr(t, err, ErrNotFound)
		got, err := tx.Deployables().Get(ctx, "team-a", "app-secret")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, d) {
			t.Errorf("Deployables.Get:\n got %+v\nwant %+v", got, d)
		}
		byUID, err := tx.Deployables().GetByUID(ctx, d.UID)
		if err == nil && !reflect.DeepEqual(byUID, d) {
			t.Errorf("Deployables.GetByUID:\n got %+v\nwant %+v", byUID, d)
		}
		return err
	})

	// A change awaiting approval, then the approval, then a stale writer.
	stale := *d
	d.Pending = []byte(`{"template":{"data":{"k":"v2"}}}`)
	d.PendingSecret = []byte{9, 9}
	d.PendingBy = "alice"
	d.PendingDelete = true
	mustTx(t, s, func(tx *Tx) error { return tx.Deployables().Update(ctx, d) })
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Deployables().Get(ctx, "team-a", "app-secret")
		if err == nil && !reflect.DeepEqual(got, d) {
			t.Errorf("after update:\n got %+v\nwant %+v", got, d)
		}
		return err
	})
	wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Deployables().Update(ctx, &stale) }), ErrConflict)
	ghost := newDeployable("team-a", "ghost")
	wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Deployables().Update(ctx, ghost) }), ErrNotFound)

	// Per-cluster status: upsert, unknown deployable or cluster.
	synced := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	mustTx(t, s, func(tx *Tx) error {
		for _, st := range []*DeployableClusterStatus{
			{DeployableUID: d.UID, Cluster: "dc2-a", State: "OutOfSync", SyncedGeneration: 0},
			{DeployableUID: d.UID, Cluster: "dc1-a", State: "OutOfSync"},
			{DeployableUID: d.UID, Cluster: "dc1-a", State: "Synced", SyncedGeneration: 1, LastSyncedAt: &synced, Message: "ok"},
		} {
			if err := tx.Deployables().PutStatus(ctx, st); err != nil {
				return err
			}
		}
		wantErr(t, tx.Deployables().PutStatus(ctx, &DeployableClusterStatus{DeployableUID: "nope", Cluster: "dc1-a"}), ErrNotFound)
		wantErr(t, tx.Deployables().PutStatus(ctx, &DeployableClusterStatus{DeployableUID: d.UID, Cluster: "nope"}), ErrNotFound)
		return nil
	})
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Deployables().ListStatus(ctx, d.UID)
		if err != nil {
			return err
		}
		want := []*DeployableClusterStatus{
			{DeployableUID: d.UID, Cluster: "dc1-a", State: "Synced", SyncedGeneration: 1, LastSyncedAt: &synced, Message: "ok"},
			{DeployableUID: d.UID, Cluster: "dc2-a", State: "OutOfSync"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Deployables.ListStatus:\n got %+v\nwant %+v", got, want)
		}
		return nil
	})

	// Tombstones are hidden from lists unless asked for.
	mustTx(t, s, func(tx *Tx) error {
		for i := range 5 {
			if err := tx.Deployables().Create(ctx, newDeployable(fmt.Sprintf("ns-%d", i%2), fmt.Sprintf("cm-%d", i))); err != nil {
				return err
			}
		}
		now := time.Now()
		d.DeletedAt = &now
		return tx.Deployables().Update(ctx, d)
	})
	list := func(f DeployableFilter) []string {
		var names []string
		mustRead(t, s, func(tx *Tx) error {
			for {
				items, next, err := tx.Deployables().List(ctx, f)
				if err != nil {
					return err
				}
				for _, it := range items {
					names = append(names, it.Namespace+"/"+it.Name)
				}
				if next == "" {
					return nil
				}
				f.Continue = next
			}
		})
		return names
	}
	if got := list(DeployableFilter{Limit: 2}); len(got) != 5 {
		t.Errorf("live deployables = %v, want 5", got)
	}
	if got := list(DeployableFilter{IncludeDeleted: true, Limit: 2}); len(got) != 6 || got[len(got)-1] != "team-a/app-secret" {
		t.Errorf("with tombstones = %v, want 6 ending in team-a/app-secret", got)
	}
	if got := list(DeployableFilter{Namespace: "ns-1"}); !reflect.DeepEqual(got, []string{"ns-1/cm-1", "ns-1/cm-3"}) {
		t.Errorf("namespace filter = %v", got)
	}
	mustRead(t, s, func(tx *Tx) error {
		_, _, err := tx.Deployables().List(ctx, DeployableFilter{Continue: "%%%"})
		wantErr(t, err, ErrBadContinue)
		return nil
	})

	// Purge removes the row and its status rows.
	mustTx(t, s, func(tx *Tx) error { return tx.Deployables().Purge(ctx, d.UID) })
	mustRead(t, s, func(tx *Tx) error {
		_, err := tx.Deployables().Get(ctx, "team-a", "app-secret")
		wantErr(t, err, ErrNotFound)
		st, err := tx.Deployables().ListStatus(ctx, d.UID)
		if err != nil || len(st) != 0 {
			t.Errorf("status after purge = %v, %v", st, err)
		}
		return nil
	})
	wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Deployables().Purge(ctx, d.UID) }), ErrNotFound)
}

func testClusters(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	c := &Cluster{
		Name:       "dc2-a",
		Labels:     map[string]string{"region": "us-east", "dc": "dc2", "tier": "prod"},
		Spec:       []byte(`{"taints":[{"key":"maintenance","effect":"NoSchedule"}]}`),
		Kubeconfig: []byte{0xde, 0xad, 0xbe, 0xef},
	}
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Clusters().Create(ctx, c); err != nil {
			return err
		}
		return tx.Clusters().Create(ctx, &Cluster{Name: "dc1-a", Spec: []byte(`{}`)})
	})
	if c.ResourceVersion != 1 || c.CreatedAt.IsZero() {
		t.Fatalf("create did not fill times and ResourceVersion: %+v", c)
	}
	mustTx(t, s, func(tx *Tx) error {
		wantErr(t, tx.Clusters().Create(ctx, &Cluster{Name: "dc2-a", Spec: []byte(`{}`)}), ErrConflict)
		got, err := tx.Clusters().Get(ctx, "dc2-a")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("Clusters.Get:\n got %+v\nwant %+v", got, c)
		}
		_, err = tx.Clusters().Get(ctx, "nope")
		wantErr(t, err, ErrNotFound)
		return nil
	})

	stale := *c
	c.Labels = nil
	c.Kubeconfig = nil
	// The status is the controller's: an update of the rest leaves it as
	// stored.
	c.Status = []byte(`{"conditions":[{"type":"Ready","status":"True"}]}`)
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Update(ctx, c) })
	c.Status = nil
	wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Clusters().Update(ctx, &stale) }), ErrConflict)
	wantErr(t, s.Tx(ctx, func(tx *Tx) error {
		return tx.Clusters().Update(ctx, &Cluster{Name: "nope", ResourceVersion: 1})
	}), ErrNotFound)

	mustRead(t, s, func(tx *Tx) error {
		all, err := tx.Clusters().List(ctx)
		if err != nil {
			return err
		}
		if len(all) != 2 || all[0].Name != "dc1-a" || all[1].Name != "dc2-a" {
			t.Fatalf("Clusters.List = %+v, want dc1-a, dc2-a", all)
		}
		if !reflect.DeepEqual(all[1], c) {
			t.Errorf("after update:\n got %+v\nwant %+v", all[1], c)
		}
		return nil
	})

	// Deleting a cluster takes the deployables' status on it along.
	d := newDeployable("team-a", "cm")
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Deployables().Create(ctx, d); err != nil {
			return err
		}
		return tx.Deployables().PutStatus(ctx, &DeployableClusterStatus{DeployableUID: d.UID, Cluster: "dc2-a", State: "Synced"})
	})
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Delete(ctx, "dc2-a") })
	wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Clusters().Delete(ctx, "dc2-a") }), ErrNotFound)
	mustRead(t, s, func(tx *Tx) error {
		st, err := tx.Deployables().ListStatus(ctx, d.UID)
		if err != nil || len(st) != 0 {
			t.Errorf("status after cluster deletion = %v, %v", st, err)
		}
		_, err = tx.Clusters().Get(ctx, "dc2-a")
		wantErr(t, err, ErrNotFound)
		return nil
	})
}

// The fingerprint moves with every create, update, tombstone and purge,
// and stays put when nothing changes.
func testDeployablesVersion(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	version := func() DeployablesVersion {
		var v DeployablesVersion
		mustRead(t, s, func(tx *Tx) (err error) {
			v, err = tx.Deployables().Version(ctx)
			return err
		})
		return v
	}
	seen := map[DeployablesVersion]string{}
	step := func(what string, fn func(tx *Tx) error) {
		t.Helper()
		mustTx(t, s, fn)
		v := version()
		if prev, ok := seen[v]; ok {
			t.Errorf("after %s the fingerprint %+v is the one after %s", what, v, prev)
		}
		seen[v] = what
	}
	seen[version()] = "the start"
	a, b := newDeployable("team-a", "a"), newDeployable("team-a", "b")
	step("a create", func(tx *Tx) error { return tx.Deployables().Create(ctx, a) })
	step("another create", func(tx *Tx) error { return tx.Deployables().Create(ctx, b) })
	if v := version(); seen[v] != "another create" {
		t.Errorf("the fingerprint moved without a change: %+v", v)
	}
	step("an update", func(tx *Tx) error {
		a.Generation++
		return tx.Deployables().Update(ctx, a)
	})
	step("a tombstone", func(tx *Tx) error {
		now := time.Now()
		b.DeletedAt = &now
		return tx.Deployables().Update(ctx, b)
	})
	step("a purge", func(tx *Tx) error { return tx.Deployables().Purge(ctx, b.UID) })
}
