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
					a := &Attempt{RunnableUID: r.UID, Number: 1, Cluster: cluster, StartedAt: time.Now()}
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
		})
	}
}
