package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// ownTail reads the numbered changes after from, as a watch does.
func ownTail(t *testing.T, s *Store, from int64) (FeedHead, []OwnChange) {
	t.Helper()
	var h FeedHead
	var out []OwnChange
	mustRead(t, s, func(tx *Tx) error {
		var err error
		if h, err = tx.OwnFeed().Head(t.Context()); err != nil {
			return err
		}
		out, err = tx.OwnFeed().Changes(t.Context(), from, 1000)
		return err
	})
	return h, out
}

func ownNumber(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	mustTx(t, s, func(tx *Tx) error {
		var err error
		n, err = tx.OwnFeed().Number(t.Context(), 10000)
		return err
	})
	return n
}

func describeOwn(cs []OwnChange) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s %s/%s; ", c.Type, c.Kind, c.Namespace, c.Name)
	}
	return b.String()
}

// TestOwnFeed: every write of a runnable, a deployable or a quota, by any
// path, leaves a change in its own transaction (a rolled-back one leaves
// none); changes are watchable once numbered, in order; pruning moves the
// horizon.
func TestOwnFeed(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := t.Context()
			start, _ := ownTail(t, s, 0)
			r := newRunnable("team-a", "job")
			mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(ctx, r) })
			if _, got := ownTail(t, s, start.Seq); len(got) != 0 {
				t.Fatalf("a change is watchable before it is numbered: %s", describeOwn(got))
			}
			mustTx(t, s, func(tx *Tx) error {
				cur, err := tx.Runnables().Get(ctx, "team-a", "job")
				if err != nil {
					return err
				}
				cur.Phase = "Running"
				return tx.Runnables().Update(ctx, cur)
			})
			// A write rolled back leaves no change.
			_ = s.Tx(ctx, func(tx *Tx) error {
				_ = tx.Runnables().Create(ctx, newRunnable("team-a", "rolled-back"))
				return fmt.Errorf("roll back")
			})
			mustTx(t, s, func(tx *Tx) error { return tx.Quotas().Put(ctx, &Quota{Namespace: "team-a", Spec: []byte(`{}`)}) })
			mustTx(t, s, func(tx *Tx) error {
				cur, err := tx.Runnables().Get(ctx, "team-a", "job")
				if err != nil {
					return err
				}
				return tx.Runnables().Delete(ctx, cur.UID, cur.ResourceVersion)
			})
			if n := ownNumber(t, s); n != 4 {
				t.Errorf("numbered %d changes, want 4", n)
			}
			h, got := ownTail(t, s, start.Seq)
			want := "ADDED Runnable team-a/job; MODIFIED Runnable team-a/job; ADDED Quota /team-a; DELETED Runnable team-a/job; "
			if describeOwn(got) != want {
				t.Errorf("changes: %q, want %q", describeOwn(got), want)
			}
			if h.Seq != start.Seq+4 || got[len(got)-1].Seq != h.Seq || got[0].Seq != start.Seq+1 {
				t.Errorf("head %d, positions %d..%d; want %d..%d", h.Seq, got[0].Seq, got[len(got)-1].Seq, start.Seq+1, start.Seq+4)
			}
			if got[0].UID != r.UID {
				t.Errorf("uid %q, want %q", got[0].UID, r.UID)
			}
			// Resuming from the middle repeats nothing.
			if _, rest := ownTail(t, s, got[1].Seq); describeOwn(rest) != describeOwn(got[2:]) {
				t.Errorf("from %d: %q, want %q", got[1].Seq, describeOwn(rest), describeOwn(got[2:]))
			}
			// Pruning forgets old numbered changes and moves the horizon.
			rawExec(t, s, `UPDATE own_changes SET at = ? WHERE pos <= ?`, s.d.ts(time.Now().Add(-time.Hour)), got[2].Seq)
			mustTx(t, s, func(tx *Tx) error {
				n, err := tx.OwnFeed().Prune(ctx, time.Now().Add(-15*time.Minute))
				if n != 3 {
					t.Errorf("pruned %d, want 3", n)
				}
				return err
			})
			h, left := ownTail(t, s, 0)
			if h.PrunedTo != got[2].Seq || describeOwn(left) != describeOwn(got[3:]) {
				t.Errorf("after pruning: horizon %d, left %q; want %d, %q", h.PrunedTo, describeOwn(left), got[2].Seq, describeOwn(got[3:]))
			}

			// A deployable's status on a cluster is a change of the
			// deployable; a sync that moved only last_synced_at is not.
			d := newDeployable("team-a", "app")
			mustTx(t, s, func(tx *Tx) error {
				if err := tx.Clusters().Create(ctx, &Cluster{Name: "c1"}); err != nil {
					return err
				}
				return tx.Deployables().Create(ctx, d)
			})
			put := func(state string) {
				t.Helper()
				now := time.Now()
				mustTx(t, s, func(tx *Tx) error {
					return tx.Deployables().PutStatus(ctx, &DeployableClusterStatus{DeployableUID: d.UID, Cluster: "c1", State: state, LastSyncedAt: &now})
				})
			}
			put("Pending")
			put("Pending")
			put("Synced")
			ownNumber(t, s)
			if _, got := ownTail(t, s, h.Seq); describeOwn(got) != "ADDED Deployable team-a/app; MODIFIED Deployable team-a/app; MODIFIED Deployable team-a/app; " {
				t.Errorf("a deployable and its status: %q", describeOwn(got))
			}
		})
	}
}

// TestOwnFeedCommitOrder: two writers whose changes commit in the other
// order than they were inserted (the first to insert commits last). A
// reader that follows the head sees each exactly once: the later commit
// never gets a position at or below one the reader has passed, as a
// number taken at insert would.
func TestOwnFeedCommitOrder(t *testing.T) {
	for _, eng := range engines(t) {
		if eng.name != "postgres" {
			continue // one writer at a time on SQLite: no two in flight
		}
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			start, _ := ownTail(t, s, 0)
			first, err := s.write.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = first.Rollback() }()
			if err := (&Tx{tx: first, s: s}).Runnables().Create(ctx, newRunnable("ns", "early")); err != nil {
				t.Fatal(err)
			}
			mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(ctx, newRunnable("ns", "late")) })
			var ids []int64
			rows, err := s.write.QueryContext(ctx, `SELECT id FROM own_changes ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				_ = rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			ownNumber(t, s)
			h1, seen := ownTail(t, s, start.Seq)
			if describeOwn(seen) != "ADDED Runnable ns/late; " {
				t.Fatalf("before the first commits: %q", describeOwn(seen))
			}
			if err := first.Commit(); err != nil {
				t.Fatal(err)
			}
			ownNumber(t, s)
			_, next := ownTail(t, s, h1.Seq)
			if describeOwn(next) != "ADDED Runnable ns/early; " {
				t.Errorf("a reader at %d after the early insert committed: %q, want it told (insert ids %v)", h1.Seq, describeOwn(next), ids)
			}
		})
	}
}

// BenchmarkRunnableInsertChangeCost is what the change sequence's trigger
// adds to a runnable's insert: the same inserts with the triggers and
// with them dropped, one runnable a transaction and a hundred (the
// schedule's CreateMany).
func BenchmarkRunnableInsertChangeCost(b *testing.B) {
	for _, eng := range engines(b) {
		for _, trig := range []string{"with-change", "without"} {
			for _, batch := range []int{1, 100} {
				b.Run(fmt.Sprintf("%s/%s/batch=%d", eng.name, trig, batch), func(b *testing.B) {
					s := eng.open(b)
					ctx := b.Context()
					if trig == "without" {
						drop := []string{"DROP TRIGGER runnables_own_change ON runnables"}
						if eng.name == "sqlite" {
							drop = []string{"DROP TRIGGER runnables_own_insert"}
						}
						for _, q := range drop {
							if _, err := s.write.ExecContext(ctx, q); err != nil {
								b.Fatal(err)
							}
						}
					}
					i := 0
					b.ResetTimer()
					for b.Loop() {
						recs := make([]*Runnable, batch)
						for j := range recs {
							i++
							recs[j] = newRunnable("bench", fmt.Sprintf("r-%09d", i))
							recs[j].Spec = benchSpec
						}
						err := s.Tx(ctx, func(tx *Tx) error {
							_, err := tx.Runnables().CreateMany(ctx, recs)
							return err
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "runnables/s")
				})
			}
		}
	}
}
