package store

import (
	"bytes"
	"errors"
	"testing"
)

// TestRollouts: a rollout row keeps the previous generation's sealed bytes
// verbatim, writes optimistically, goes with its deployable, and a status
// row records the generation its state is about.
func TestRollouts(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			d := newDeployable("team-a", "conf")
			mustTx(t, s, func(tx *Tx) error {
				if err := tx.Clusters().Create(ctx, &Cluster{Name: "c1", Spec: []byte(`{}`)}); err != nil {
					return err
				}
				return tx.Deployables().Create(ctx, d)
			})
			r := &DeployableRollout{DeployableUID: d.UID, PreviousGeneration: 1, PreviousSpec: d.Spec,
				PreviousSecret: d.Secret, PreviousSpecHash: d.SpecHash, Control: []byte(`{"paused":true}`)}
			mustTx(t, s, func(tx *Tx) error { return tx.Deployables().PutRollout(ctx, r) })
			stale := *r
			r.Status = []byte(`{"state":"Progressing"}`)
			mustTx(t, s, func(tx *Tx) error { return tx.Deployables().PutRollout(ctx, r) })
			wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Deployables().PutRollout(ctx, &stale) }), ErrConflict)
			dup := &DeployableRollout{DeployableUID: d.UID}
			wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Deployables().PutRollout(ctx, dup) }), ErrConflict)
			wantErr(t, s.Tx(ctx, func(tx *Tx) error {
				return tx.Deployables().PutRollout(ctx, &DeployableRollout{DeployableUID: "nobody"})
			}), ErrNotFound)

			var got *DeployableRollout
			var all []*DeployableRollout
			mustRead(t, s, func(tx *Tx) error {
				var err error
				if got, err = tx.Deployables().GetRollout(ctx, d.UID); err != nil {
					return err
				}
				all, err = tx.Deployables().ListRollouts(ctx)
				return err
			})
			if !bytes.Equal(got.PreviousSecret, d.Secret) || !bytes.Equal(got.PreviousSpec, d.Spec) ||
				string(got.Status) != `{"state":"Progressing"}` || string(got.Control) != `{"paused":true}` || got.ResourceVersion != 2 || len(all) != 1 {
				t.Fatalf("read back %+v (%d rows)", got, len(all))
			}

			st := &DeployableClusterStatus{DeployableUID: d.UID, Cluster: "c1", State: "Error", SyncedGeneration: 1, StateGeneration: 2}
			mustTx(t, s, func(tx *Tx) error { return tx.Deployables().PutStatus(ctx, st) })
			mustRead(t, s, func(tx *Tx) error {
				sts, err := tx.Deployables().ListStatus(ctx, d.UID)
				if err == nil && (len(sts) != 1 || sts[0].StateGeneration != 2) {
					t.Errorf("status rows %+v, want one with StateGeneration 2", sts)
				}
				return err
			})

			// The previous generation moves only past a completed rollout.
			keep := func(gen int64, oldRollsOut bool, status string) int64 {
				t.Helper()
				var prev int64
				mustTx(t, s, func(tx *Tx) error {
					r, err := tx.Deployables().GetRollout(ctx, d.UID)
					if err != nil {
						return err
					}
					r.Status = []byte(status)
					if err := tx.Deployables().PutRollout(ctx, r); err != nil {
						return err
					}
					rec := *d
					rec.Generation = gen
					if err := tx.Deployables().KeepPrevious(ctx, &rec, oldRollsOut); err != nil {
						return err
					}
					r, err = tx.Deployables().GetRollout(ctx, d.UID)
					prev = r.PreviousGeneration
					return err
				})
				return prev
			}
			if got := keep(5, false, ``); got != 5 {
				t.Fatalf("replacing generation 5, which did not roll out: previous %d, want 5", got)
			}
			if got := keep(6, true, `{"generation":6,"state":"Halted","clusters":[{"cluster":"c1","generation":6},{"cluster":"c2","generation":5}]}`); got != 5 {
				t.Fatalf("replacing generation 6 halted mid-rollout: previous %d, want 5", got)
			}
			if got := keep(7, true, `{"generation":7,"state":"Complete"}`); got != 7 {
				t.Fatalf("replacing generation 7 rolled out: previous %d, want 7", got)
			}
			// Generation 6, replaced mid-rollout, is kept for the clusters
			// it reached, with its spec and sealed values as stored, until
			// no decision names it.
			mustTx(t, s, func(tx *Tx) error {
				r, err := tx.Deployables().GetRollout(ctx, d.UID)
				if err != nil {
					return err
				}
				if len(r.Kept) != 1 || r.Kept[0].Generation != 6 || string(r.Kept[0].Spec) != string(d.Spec) ||
					!bytes.Equal(r.Kept[0].Secret, d.Secret) || r.Kept[0].SpecHash != d.SpecHash {
					t.Fatalf("kept %+v, want generation 6 as stored", r.Kept)
				}
				if r.KeepOnly([]int64{6, 8}) {
					t.Fatal("KeepOnly dropped a generation still named")
				}
				if !r.KeepOnly([]int64{8}) || len(r.Kept) != 0 {
					t.Fatalf("KeepOnly kept %+v", r.Kept)
				}
				if err := tx.Deployables().PutRollout(ctx, r); err != nil {
					return err
				}
				r, err = tx.Deployables().GetRollout(ctx, d.UID)
				if err == nil && len(r.Kept) != 0 {
					t.Fatalf("kept after the drop: %+v", r.Kept)
				}
				return err
			})

			// Generation 8, replaced before a decision gave it to any
			// cluster, is held by none: neither previous nor kept.
			if got := keep(8, true, `{"generation":8,"state":"Progressing","clusters":[{"cluster":"c1","generation":7}]}`); got != 7 {
				t.Fatalf("replacing generation 8 that no cluster was given: previous %d, want 7", got)
			}
			mustTx(t, s, func(tx *Tx) error {
				r, err := tx.Deployables().GetRollout(ctx, d.UID)
				if err == nil && len(r.Kept) != 0 {
					t.Fatalf("kept %+v, want none", r.Kept)
				}
				return err
			})

			mustTx(t, s, func(tx *Tx) error { return tx.Deployables().Purge(ctx, d.UID) })
			err := s.Read(ctx, func(tx *Tx) error { _, err := tx.Deployables().GetRollout(ctx, d.UID); return err })
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("rollout row after purge: %v, want ErrNotFound", err)
			}
		})
	}
}
