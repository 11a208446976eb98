package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchmarkSchedules (make bench): 10,000 schedules firing each
// minute, with 100 clusters' discovery recorded (what the gate reads of
// a tick's kind), on each engine. The lag of a tick is from its time to
// the commit of its runnable (stored, Queued), over two ticks of a
// running scheduler (the first with every schedule new, the second with a
// run of each already there), and apart from them at a third tick, met
// by a scheduler that starts exactly then. The ceiling, measured in the same run on the same database: as many
// plain creates through the submission gate, one after another from one
// loop, each lagging from the loop's start. Exactly once is checked: one
// runnable per schedule and tick.
func TestBenchmarkSchedules(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	n := benchInt("PURSER_BENCH_SCHEDULES", 10_000)
	clusters := benchInt("PURSER_BENCH_CLUSTERS", 100)
	const ticks = 2
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			dsn := eng.NewDSN(t)
			st, raw := open(t, dsn), storetest.RawDB(t, dsn)
			pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
				"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}},
				"team-b": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				for i := range clusters {
					if err := tx.Kinds().Replace(ctx, fmt.Sprintf("c-%03d", i), now, []store.ServedKind{
						{Group: "batch", Version: "v1", Kind: "Job", Namespaced: true}, {Version: "v1", Kind: "ConfigMap", Namespaced: true},
					}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// The timetable starts 30 s before the first tick, T.
			first := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			for lo := 0; lo < n; lo += 500 {
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					for i := lo; i < min(lo+500, n); i++ {
						if _, _, err := scheduler.Put(ctx, tx, newSchedule(fmt.Sprintf("s-%05d", i), "* * * * *"), alice, first.Add(-30*time.Second)); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}

			// The clock goes at the wall clock's pace from 8 s before T. A
			// scheduler runs from then, as one does that leads already, for
			// the ticks T and T+1m (steady: each reviewed ahead, Early
			// before it). Then it stops, and a new one starts exactly at
			// T+2m, as a scheduler taking over at a tick (the leader's
			// process restarted, or another elected) would: nothing of that
			// tick is reviewed ahead (cold).
			const lead = 8 * time.Second
			cold := first.Add(ticks * time.Minute)
			var mu sync.Mutex
			var lags, coldLags []time.Duration
			byTick := make([][]time.Duration, ticks)
			start := time.Now()
			clk := func() time.Time { return first.Add(-lead).Add(time.Since(start)) }
			accepted := func(at []time.Time) {
				now := clk()
				mu.Lock()
				defer mu.Unlock()
				for _, tick := range at {
					switch i := int(tick.Sub(first) / time.Minute); {
					case i < ticks:
						lags = append(lags, now.Sub(tick))
						byTick[i] = append(byTick[i], now.Sub(tick))
					case tick.Equal(cold):
						coldLags = append(coldLags, now.Sub(tick))
					}
				}
			}
			run := func(until func() bool) {
				t.Helper()
				sch := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk, Accepted: accepted})
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- sch.Run(runCtx) }()
				for deadline := time.Now().Add(ticks*time.Minute + 10*time.Minute); !until() && time.Now().Before(deadline); {
					time.Sleep(100 * time.Millisecond)
				}
				stop()
				if err := <-done; err != nil && ctx.Err() == nil && runCtx.Err() == nil {
					t.Fatal(err)
				}
			}
			counted := func(v *[]time.Duration, want int) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return len(*v) >= want }
			}
			run(counted(&lags, ticks*n))
			time.Sleep(cold.Sub(clk()))
			run(counted(&coldLags, n))
			mu.Lock()
			tickLags, coldTick := slices.Clone(lags), slices.Clone(coldLags)
			mu.Unlock()
			if len(tickLags) != ticks*n || len(coldTick) != n {
				t.Fatalf("%d ticks accepted, want %d; at the cold start %d, want %d", len(tickLags), ticks*n, len(coldTick), n)
			}
			// Exactly once: one runnable per schedule and tick.
			var count int
			if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM runnables WHERE namespace = 'team-a'`).Scan(&count); err != nil {
				t.Fatal(err)
			}
			if count != (ticks+1)*n {
				t.Fatalf("%d runnables of %d schedules after %d ticks, want %d", count, n, ticks+1, (ticks+1)*n)
			}

			// The ceiling: n plain creates through the gate, one loop.
			gate := &submission.Gate{Policy: pol, Store: st, Pods: admission.DefaultChecker(), Renderings: attempt.Renderings}
			tmpl := newSchedule("x", "* * * * *")
			tmpl.Metadata.Namespace = "team-b"
			ceiling := make([]time.Duration, 0, n)
			cstart := time.Now()
			for i := range n {
				req := &submission.Request{Runnable: tmpl.RunnableAt(fmt.Sprintf("plain-%05d", i), map[string]string{"bench": "ceiling"}), Author: alice}
				if err := gate.Prepare(ctx, req); err != nil {
					t.Fatal(err)
				}
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					_, err := submission.Create(ctx, tx, req)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				ceiling = append(ceiling, time.Since(cstart))
			}
			cwall := time.Since(cstart)
			p := func(d []time.Duration, q float64) string {
				slices.Sort(d)
				return d[min(len(d)-1, int(q*float64(len(d))))].Round(time.Millisecond).String()
			}
			t.Logf("schedules %s: %d schedules each minute over %d clusters, %d ticks: tick to accepted p50 %s p99 %s max %s "+
				"(first tick p99 %s, second %s; a scheduler started at a tick, p50 %s p99 %s); "+
				"ceiling, %d plain creates through the gate in one loop: %.0f/s, from the loop's start p50 %s p99 %s max %s",
				eng.Name, n, clusters, ticks, p(tickLags, 0.5), p(tickLags, 0.99), p(tickLags, 1), p(byTick[0], 0.99), p(byTick[1], 0.99), p(coldTick, 0.5), p(coldTick, 0.99),
				n, float64(n)/cwall.Seconds(), p(ceiling, 0.5), p(ceiling, 0.99), p(ceiling, 1))
		})
	}
}
