package scheduler_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// clock is a time tests move by hand.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

var alice = policy.User{Name: "alice"}

func testPolicy(t *testing.T, writers ...string) *policy.Policy {
	t.Helper()
	p, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: writers}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func job() map[string]any {
	return map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}}
}

func newSchedule(name, cron string) *v1alpha1.Schedule {
	s := &v1alpha1.Schedule{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindSchedule},
		Metadata: v1alpha1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec:     v1alpha1.ScheduleSpec{Schedule: cron, Template: v1alpha1.RunnableSpec{Template: job()}},
	}
	s.SetDefaults()
	return s
}

func put(t *testing.T, st *store.Store, s *v1alpha1.Schedule, now time.Time) {
	t.Helper()
	if errs := v1alpha1.ValidateSchedule(s, now); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := st.Tx(t.Context(), func(tx *store.Tx) error {
		_, _, err := scheduler.Put(t.Context(), tx, s, alice, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func runsOf(t *testing.T, st *store.Store, name string) []scheduler.Run {
	t.Helper()
	var runs []scheduler.Run
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		var err error
		runs, err = scheduler.Runs(t.Context(), tx, "team-a", name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}

func open(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestExactlyOnceAcrossSchedulers: two schedulers, each on its own
// connection pool as two replicas in two DCs would be, fire the same due
// tick from eight goroutines at once, tick after tick; each tick has
// exactly one runnable and one audit entry of its creation, on each
// engine.
func TestExactlyOnceAcrossSchedulers(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			dsn := eng.NewDSN(t)
			stores := []*store.Store{open(t, dsn), open(t, dsn)}
			var clk clock
			start := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
			clk.Set(start)
			put(t, stores[0], newSchedule("every", "* * * * *"), start)
			pol := testPolicy(t, "alice")
			var scheds []*scheduler.Scheduler
			for _, st := range stores {
				scheds = append(scheds, scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now}))
			}
			const ticks = 4
			for i := range ticks {
				clk.Set(start.Add(time.Duration(i+1)*time.Minute - 29*time.Second)) // 1 s after the tick
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				gate := make(chan struct{})
				for g := range 8 {
					wg.Go(func() {
						<-gate
						errs <- scheds[g%2].Fire(t.Context(), "team-a", "every")
					})
				}
				close(gate)
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Errorf("tick %d: Fire: %v", i+1, err)
					}
				}
			}
			runs := runsOf(t, stores[0], "every")
			seen := map[string]int{}
			for _, r := range runs {
				seen[r.Rec.Name]++
			}
			for i := range ticks {
				tick := start.Truncate(time.Minute).Add(time.Duration(i+1) * time.Minute)
				if n := seen[v1alpha1.TickRunName("every", tick)]; n != 1 {
					t.Errorf("tick %s: %d runnables, want 1 (runs %v)", tick, n, seen)
				}
			}
			if len(runs) != ticks {
				t.Errorf("%d runnables for %d ticks: %v", len(runs), ticks, seen)
			}
			var creates int
			if err := stores[1].Read(t.Context(), func(tx *store.Tx) error {
				es, err := tx.Audit().List(t.Context(), store.AuditFilter{Namespace: "team-a", Action: "create"})
				creates = len(es)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if creates != ticks {
				t.Errorf("%d audit entries of a create, want %d", creates, ticks)
			}
		})
	}
}
