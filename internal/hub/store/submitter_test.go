package store

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestSubmitterQueries(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := t.Context()
			put := func(name, phase, cluster string, ended bool) {
				r := newRunnable("team-a", name)
				r.Phase, r.Cluster = phase, cluster
				mustTx(t, s, func(tx *Tx) error {
					if err := tx.Runnables().Create(ctx, r); err != nil {
						return err
					}
					if cluster == "" {
						return nil
					}
					a := &Attempt{RunnableUID: r.UID, Number: 1, Cluster: cluster, StartedAt: time.Now(), Generation: r.Generation}
					if ended {
						now := time.Now()
						a.EndedAt, a.Result = &now, "Cancelled"
					}
					return tx.Attempts().Put(ctx, a)
				})
			}
			put("a", "Scheduled", "c1", false)
			put("b", "Submitted", "c1", false)
			put("c", "Running", "c2", false)
			put("d", "Succeeded", "c2", false) // not active
			put("e", "Queued", "", false)      // no cluster
			put("f", "Cancelled", "c1", false) // object may remain
			put("g", "Cancelled", "c2", true)  // settled

			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Runnables().CountByCluster(ctx, "Scheduled", "Submitted", "Running")
				if err != nil {
					return err
				}
				if want := map[string]int{"c1": 2, "c2": 1}; !reflect.DeepEqual(got, want) {
					t.Errorf("Runnables.CountByCluster = %v, want %v", got, want)
				}
				if got, err := tx.Runnables().CountByCluster(ctx); err != nil || len(got) != 0 {
					t.Errorf("Runnables.CountByCluster = %v, %v; want empty", got, err)
				}
				uids, err := tx.Runnables().UIDsWithOpenAttempt(ctx, "Cancelled", 0)
				if err != nil {
					return err
				}
				if want := []string{"uid-team-a-f"}; !slices.Equal(uids, want) {
					t.Errorf("Runnables.UIDsWithOpenAttempt = %v, want %v", uids, want)
				}
				return nil
			})

			// An update in place: c's spec moves on to generation 2, which
			// its attempt's object does not carry yet; b's and the
			// cancelled f's too, but f is not in the phases asked for.
			for _, name := range []string{"b", "c", "f"} {
				mustTx(t, s, func(tx *Tx) error {
					r, err := tx.Runnables().Get(ctx, "team-a", name)
					if err != nil {
						return err
					}
					r.Generation = 2
					return tx.Runnables().Update(ctx, r)
				})
			}
			pending := func() []string {
				t.Helper()
				var uids []string
				mustRead(t, s, func(tx *Tx) error {
					var err error
					uids, err = tx.Runnables().UIDsUpdatePending(ctx, []string{"Submitted", "Running"}, 0)
					return err
				})
				return uids
			}
			if got, want := pending(), []string{"uid-team-a-b", "uid-team-a-c"}; !slices.Equal(got, want) {
				t.Fatalf("Runnables.UIDsUpdatePending = %v, want %v", got, want)
			}
			mustTx(t, s, func(tx *Tx) error {
				// Put of a copy read before leaves the generation alone.
				if err := tx.Attempts().Put(ctx, &Attempt{RunnableUID: "uid-team-a-c", Number: 1, Cluster: "c2", StartedAt: time.Now()}); err != nil {
					return err
				}
				if open, err := tx.Attempts().SetGeneration(ctx, "uid-team-a-c", 1, 2); err != nil || !open {
					t.Errorf("SetGeneration of an open attempt = %v, %v", open, err)
				}
				if open, err := tx.Attempts().SetGeneration(ctx, "uid-team-a-g", 1, 2); err != nil || open {
					t.Errorf("SetGeneration of an ended attempt = %v, %v; want false", open, err)
				}
				return nil
			})
			if got, want := pending(), []string{"uid-team-a-b"}; !slices.Equal(got, want) {
				t.Fatalf("after SetGeneration: Runnables.UIDsUpdatePending = %v, want %v", got, want)
			}
			mustRead(t, s, func(tx *Tx) error {
				as, err := tx.Attempts().List(ctx, "uid-team-a-c")
				if err != nil {
					return err
				}
				if len(as) != 1 || as[0].Generation != 2 {
					t.Errorf("attempts of c: %+v, want generation 2", as)
				}
				return nil
			})
		})
	}
}
