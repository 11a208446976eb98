package scheduler_test

import (
	"context"
	"fmt"
	"strings"
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
	t.Cleanup(func() { _ = st.Close() })
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

// end moves a runnable to phase behind the API, as its cluster's
// ingester would record its end.
func end(t *testing.T, st *store.Store, name string, phase v1alpha1.Phase) {
	t.Helper()
	if err := st.Tx(t.Context(), func(tx *store.Tx) error {
		rec, err := tx.Runnables().Get(t.Context(), "team-a", name)
		if err != nil {
			return err
		}
		rec.Phase = string(phase)
		now := time.Now()
		rec.EndedAt = &now
		return tx.Runnables().Update(t.Context(), rec)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCatchUpAndHistory: after purser was down for half an hour, a
// schedule with catchUp All runs each tick it missed within its window,
// oldest first, once; ended runs beyond the history limits are deleted,
// with an audit entry each, and the newest are kept.
func TestCatchUpAndHistory(t *testing.T) {
	st := open(t, storetest.Engines()[0].NewDSN(t))
	var clk clock
	start := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
	clk.Set(start)
	s := newSchedule("often", "*/5 * * * *")
	s.Spec.CatchUp = &v1alpha1.CatchUp{Policy: v1alpha1.CatchUpAll, WindowSeconds: 17 * 60}
	one, none := int32(1), int32(0)
	s.Spec.SuccessfulRunsHistoryLimit, s.Spec.FailedRunsHistoryLimit = &one, &none
	put(t, st, s, start)
	pol := testPolicy(t, "alice")
	sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now})

	// Down from 10:00:30 to 10:31:10: ticks 10:05 .. 10:30 passed; the
	// window keeps 10:15, 10:20, 10:25, 10:30.
	clk.Set(start.Add(30*time.Minute + 40*time.Second))
	if err := sched.Fire(t.Context(), "team-a", "often"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runsOf(t, st, "often") {
		names = append(names, r.Rec.Name)
	}
	tick := func(hm string) string {
		at, _ := time.Parse(time.RFC3339, "2026-12-07T"+hm+":00Z")
		return v1alpha1.TickRunName("often", at)
	}
	want := []string{tick("10:15"), tick("10:20"), tick("10:25"), tick("10:30")}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("caught up %v, want %v", names, want)
	}
	got := statusOf(t, st, "often")
	if got.Missed != 2 || len(got.Active) != 4 || got.NextScheduleTime == nil || got.NextScheduleTime.Format("15:04") != "10:35" {
		t.Fatalf("status after the catch-up: %+v", got)
	}
	// The same look again creates nothing.
	if err := sched.Fire(t.Context(), "team-a", "often"); err != nil {
		t.Fatal(err)
	}
	if n := len(runsOf(t, st, "often")); n != 4 {
		t.Fatalf("%d runs after a second look, want 4", n)
	}

	// Three succeed and one fails; the next tick keeps the newest
	// success only (limits 1 and 0).
	end(t, st, tick("10:15"), v1alpha1.PhaseSucceeded)
	end(t, st, tick("10:20"), v1alpha1.PhaseFailed)
	end(t, st, tick("10:25"), v1alpha1.PhaseSucceeded)
	end(t, st, tick("10:30"), v1alpha1.PhaseSucceeded)
	clk.Set(time.Date(2026, 12, 7, 10, 35, 1, 0, time.UTC))
	if err := sched.Fire(t.Context(), "team-a", "often"); err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, r := range runsOf(t, st, "often") {
		names = append(names, r.Rec.Name)
	}
	if want := []string{tick("10:30"), tick("10:35")}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("runs kept %v, want %v", names, want)
	}
	var deletes int
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		es, err := tx.Audit().List(t.Context(), store.AuditFilter{Namespace: "team-a", Action: "delete"})
		deletes = len(es)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if deletes != 3 {
		t.Fatalf("%d audit entries of a delete, want 3", deletes)
	}
}

func statusOf(t *testing.T, st *store.Store, name string) v1alpha1.ScheduleStatus {
	t.Helper()
	var rec *store.Schedule
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Schedules().Get(t.Context(), "team-a", name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	return s.Obj.Status
}

// TestSuspend: a suspended schedule has no next tick and creates nothing;
// resumed, it does not catch up the ticks that passed while it was
// suspended, and runs the next one.
func TestSuspend(t *testing.T) {
	st := open(t, storetest.Engines()[0].NewDSN(t))
	var clk clock
	start := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
	clk.Set(start)
	s := newSchedule("paused", "*/5 * * * *")
	s.Spec.Suspend = true
	put(t, st, s, start)
	if got := statusOf(t, st, "paused"); got.NextScheduleTime != nil {
		t.Fatalf("a suspended schedule has a next tick: %+v", got)
	}
	pol := testPolicy(t, "alice")
	sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now})
	clk.Set(start.Add(20 * time.Minute)) // 10:20:30: ticks 10:05 .. 10:20 passed
	if next, err := sched.Pass(t.Context()); err != nil || next != nil {
		t.Fatalf("Pass: next %v, %v", next, err)
	}
	if err := sched.Fire(t.Context(), "team-a", "paused"); err != nil {
		t.Fatal(err)
	}
	if n := len(runsOf(t, st, "paused")); n != 0 {
		t.Fatalf("a suspended schedule created %d runs", n)
	}
	s.Spec.Suspend = false
	put(t, st, s, clk.Now())
	got := statusOf(t, st, "paused")
	if got.NextScheduleTime == nil || got.NextScheduleTime.Format("15:04") != "10:25" {
		t.Fatalf("next tick after resuming: %+v", got)
	}
	clk.Set(time.Date(2026, 12, 7, 10, 25, 2, 0, time.UTC))
	if _, err := sched.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	runs := runsOf(t, st, "paused")
	if len(runs) != 1 || runs[0].Rec.Name != v1alpha1.TickRunName("paused", time.Date(2026, 12, 7, 10, 25, 0, 0, time.UTC)) {
		t.Fatalf("runs after resuming: %+v", runs)
	}
	if got := statusOf(t, st, "paused"); got.Missed != 0 {
		t.Fatalf("ticks passed while suspended counted as missed: %+v", got)
	}
}

// TestExactlyOnceInBatches: the scheduler fires the schedules due at the
// same tick in batches (one transaction per page of them); two
// schedulers on their own pools run whole passes at once, four
// goroutines each, tick after tick, over more schedules than a batch
// holds. Each schedule has exactly one runnable per tick, whichever
// batch or single fire committed it.
func TestExactlyOnceInBatches(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			dsn := eng.NewDSN(t)
			stores := []*store.Store{open(t, dsn), open(t, dsn)}
			raw := storetest.RawDB(t, dsn)
			var clk clock
			start := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
			clk.Set(start)
			const schedules, ticks = 130, 3
			for i := range schedules {
				put(t, stores[0], newSchedule(fmt.Sprintf("s-%03d", i), "* * * * *"), start)
			}
			pol := testPolicy(t, "alice")
			var scheds []*scheduler.Scheduler
			for _, st := range stores {
				scheds = append(scheds, scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now}))
			}
			for i := range ticks {
				clk.Set(start.Add(time.Duration(i+1)*time.Minute - 29*time.Second))
				var wg sync.WaitGroup
				gate := make(chan struct{})
				for g := range 8 {
					wg.Go(func() {
						<-gate
						if _, err := scheds[g%2].Pass(t.Context()); err != nil {
							t.Errorf("tick %d: Pass: %v", i+1, err)
						}
					})
				}
				close(gate)
				wg.Wait()
			}
			rows, err := raw.QueryContext(t.Context(), `SELECT name FROM runnables WHERE namespace = 'team-a'`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			seen := map[string]int{}
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				seen[name]++
			}
			for s := range schedules {
				for i := range ticks {
					name := v1alpha1.TickRunName(fmt.Sprintf("s-%03d", s), start.Truncate(time.Minute).Add(time.Duration(i+1)*time.Minute))
					if seen[name] != 1 {
						t.Errorf("%s: %d runnables, want 1", name, seen[name])
					}
				}
			}
			if len(seen) != schedules*ticks {
				t.Errorf("%d runnables for %d schedules and %d ticks", len(seen), schedules, ticks)
			}
		})
	}
}
