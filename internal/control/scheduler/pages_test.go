package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestPassOverPages: a tick due for more schedules than one page is
// fired over several pages, each read while the one before is written.
// Every schedule gets exactly one run of the tick, whichever page it fell
// in, every status says the next tick, and a second pass at the same
// moment creates nothing.
func TestPassOverPages(t *testing.T) {
	const n = 2_345 // three pages, the last one short
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			st := open(t, eng.NewDSN(t))
			var clk clock
			tick := time.Date(2026, 12, 7, 10, 1, 0, 0, time.UTC)
			clk.Set(tick.Add(-30 * time.Second))
			for lo := 0; lo < n; lo += 500 {
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					for i := lo; i < min(lo+500, n); i++ {
						if _, _, err := scheduler.Put(ctx, tx, newSchedule(fmt.Sprintf("p-%04d", i), "* * * * *"), alice, clk.Now()); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			var accepted int
			sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return testPolicy(t, "alice") }, Now: clk.Now,
				Accepted: func(at []time.Time) { accepted += len(at) }})
			clk.Set(tick.Add(time.Second))
			for range 2 {
				if _, err := sched.Pass(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if accepted != n {
				t.Errorf("%d runnables accepted over two passes, want %d (one per schedule)", accepted, n)
			}
			var runs, due int
			if err := st.Read(ctx, func(tx *store.Tx) error {
				got, err := tx.Runnables().ListByNamePrefixes(ctx, "team-a", []string{"p-"}, n+10)
				runs = len(got)
				if err != nil {
					return err
				}
				left, err := tx.Schedules().Due(ctx, clk.Now(), 10)
				due = len(left)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if runs != n || due != 0 {
				t.Errorf("%d runnables of %d schedules, %d schedules still due; want %d and 0", runs, n, due, n)
			}
			for _, name := range []string{"p-0000", "p-0999", "p-1000", "p-2344"} {
				st := statusOf(t, st, name)
				if st.NextScheduleTime == nil || !st.NextScheduleTime.Equal(tick.Add(time.Minute)) || len(st.Active) != 1 {
					t.Errorf("%s: next %v, %d active; want %s and 1", name, st.NextScheduleTime, len(st.Active), tick.Add(time.Minute))
				}
			}
		})
	}
}
