package drill_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// farm writes a farm of clusters in dcs DCs (dc-0, dc-1, ...), each
// cluster's agent reporting 64 CPUs and 256Gi of which what perCluster
// runnables of 500m and 1Gi hold is used, as the agents and the
// submitter write them; the reports were made after the runnables started.
func farm(t testing.TB, st *store.Store, clusters, dcs, perCluster int) {
	t.Helper()
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	// The reports are made after every runnable started (the store
	// stamps their rows as it writes them), beyond the in-flight margin:
	// they count in the reports, not in flight.
	reported := time.Now().Add(time.Minute)
	const spec = `{"spec":{"priority":%d,"template":{"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{"containers":[{"name":"m","image":"i",` +
		`"resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}}}}}}`
	n := clusters * perCluster
	for lo := 0; lo < n; lo += 500 {
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			for i := lo; i < min(lo+500, n); i++ {
				cluster := fmt.Sprintf("c-%03d", i%clusters)
				if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: fmt.Sprintf("team-%d", i%10), Name: fmt.Sprintf("r-%05d", i),
					UID: fmt.Sprintf("uid-%05d", i), Generation: 1, Spec: fmt.Appendf(nil, spec, i%4), SpecHash: "h", Phase: "Running",
					Cluster: cluster, CreatedAt: old.Add(time.Duration(i) * time.Millisecond), UpdatedAt: old,
					Status: []byte(`{"phase":"Running","cluster":"` + cluster + `","requests":{"cpu":"500m","memory":"1Gi"}}`)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error {
		for i := range clusters {
			name := fmt.Sprintf("c-%03d", i)
			if err := tx.Clusters().Create(ctx, &store.Cluster{Name: name, Labels: map[string]string{"dc": fmt.Sprintf("dc-%d", i%dcs)},
				Spec: []byte(`{"spec":{}}`), Kubeconfig: []byte("x"), CreatedAt: old, UpdatedAt: old}); err != nil {
				return err
			}
			usedCPU := perCluster / 2 // 500m each
			report := fmt.Sprintf(`{"allocatable":{"cpu":"64","memory":"256Gi"},"free":{"cpu":"%dm","memory":"%dGi"},"nodeMax":{"cpu":"8","memory":"32Gi"}}`,
				64000-usedCPU*1000-(perCluster%2)*500, 256-perCluster)
			if err := tx.Agents().RecordCapacity(ctx, name, reported, []byte(report)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func snapshot(t testing.TB, st *store.Store, target *drill.Target) drill.Farm {
	t.Helper()
	var f drill.Farm
	if err := st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		f, err = controldrill.Snapshot(context.Background(), tx, controldrill.Options{Target: target})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSnapshot: the farm as the store holds it, read as placement reads
// it: each reporting cluster's free figure (the report, with nothing in
// flight for runnables that started before it), its load and DC; each
// runnable's demand by Kubernetes' pod rule, its priority, its cluster;
// each namespace's usage. Then the what-if on it.
func TestSnapshot(t *testing.T) {
	st := open(t, storetest.Engines()[0].NewDSN(t))
	farm(t, st, 4, 2, 10) // 5 CPUs of 64 used on each
	if err := st.Tx(context.Background(), func(tx *store.Tx) error {
		return tx.Quotas().Put(context.Background(), &store.Quota{Namespace: "team-0", Spec: []byte(`{"limits":{"runnables":"2"}}`)})
	}); err != nil {
		t.Fatal(err)
	}
	if f := snapshot(t, st, &drill.Target{Kind: drill.TargetDC, Name: "dc-1"}); len(f.Runnables) != 20 || f.Runnables[0].Cluster != "c-001" {
		t.Fatalf("the runnables of dc-1: %d, the first on %s", len(f.Runnables), f.Runnables[0].Cluster)
	}
	f := snapshot(t, st, nil)
	if len(f.Clusters) != 4 || len(f.Runnables) != 40 {
		t.Fatalf("%d clusters, %d runnables, want 4 and 40", len(f.Clusters), len(f.Runnables))
	}
	c := f.Clusters[1]
	free := c.Free.Free["cpu"]
	if c.Name != "c-001" || c.Labels["dc"] != "dc-1" || c.Active != 10 || !c.Ready || free.MilliValue() != 59000 || c.Free.InFlightCount != 0 {
		t.Fatalf("cluster %s: dc %s, active %d, ready %v, free %v, in flight %d", c.Name, c.Labels["dc"], c.Active, c.Ready, c.Free, c.Free.InFlightCount)
	}
	r := f.Runnables[5]
	cpu, mem := r.Demand.Total["cpu"], r.Demand.Pod["memory"]
	if r.Name != "r-00005" || r.Cluster != "c-001" || r.Priority != 1 || cpu.String() != "500m" || mem.String() != "1Gi" ||
		r.GVK != "batch/v1, Kind=Job" || r.Flink {
		t.Fatalf("runnable %+v", r)
	}
	if u := f.Usage["team-0"]["c-000"]["runnables"]; u.Value() != 2 {
		t.Fatalf("team-0's usage on c-000: %v", f.Usage["team-0"]["c-000"])
	}
	if _, ok := f.Quotas["team-0"]; !ok {
		t.Fatal("team-0's quota not read")
	}
	rep, err := drill.Plan(f, drill.Target{Kind: drill.TargetDC, Name: "dc-0"})
	if err != nil {
		t.Fatal(err)
	}
	// dc-0's 20 runnables move to dc-1, but team-0 (4 runnables, all in
	// dc-0, over a quota of 2 lowered since) gets 2 of them back.
	if rep.Verdict != drill.Partial || len(rep.Moves) != 18 || len(rep.Unplaceable) != 2 || rep.DurationSeconds != 9 {
		t.Fatalf("what-if of dc-0: %s, %d moves, %d left, %g s: %s", rep.Verdict, len(rep.Moves), len(rep.Unplaceable), rep.DurationSeconds, rep.Message)
	}
	// Priority first (dc-0 runs priorities 2 and 0), then age: team-0's
	// two of priority 2 take its quota, its two of priority 0 are left.
	if rep.Moves[0].Runnable != "team-2/r-00002" || rep.Moves[9].Runnable != "team-8/r-00038" {
		t.Errorf("moves in the order %s ... %s", rep.Moves[0].Runnable, rep.Moves[9].Runnable)
	}
	if rep.Unplaceable[0].Runnable != "team-0/r-00000" || rep.Unplaceable[1].Runnable != "team-0/r-00020" {
		t.Errorf("left %+v", rep.Unplaceable)
	}
}

func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchmarkDrill (make bench): the what-if of losing a DC on a farm
// of 100 clusters in 5 DCs running 10,000 runnables, as the API answers
// it: the snapshot read from the store, then the plan; and the standing
// headroom of every DC on one snapshot (GET /api/v1/dcs). The farm is
// loaded so that a DC's loss is only just absorbed (each cluster has
// 64 CPUs, of which its 100 runnables hold 50): every placement weighs
// most clusters. Target: under 1 s, which docs/benchmarks.md holds the
// figures against (a shared machine's load moves them by half).
func TestBenchmarkDrill(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	clusters := benchInt("PURSER_BENCH_CLUSTERS", 100)
	runnables := benchInt("PURSER_BENCH_RUNNABLES", 10_000)
	const dcs = 5
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			farm(t, st, clusters, dcs, runnables/clusters)
			dc0 := drill.Target{Kind: drill.TargetDC, Name: "dc-0"}
			snapshot(t, st, &dc0) // warm the connection and the caches, as a running API has them
			start := time.Now()
			f := snapshot(t, st, &dc0)
			read := time.Since(start)
			rep, err := drill.Plan(f, dc0)
			if err != nil {
				t.Fatal(err)
			}
			total := time.Since(start)
			start = time.Now()
			f = snapshot(t, st, nil)
			for i := range dcs {
				if _, err := drill.Plan(f, drill.Target{Kind: drill.TargetDC, Name: fmt.Sprintf("dc-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			headroom := time.Since(start)
			if rep.Verdict != drill.Absorbed || len(rep.Moves) != runnables/dcs {
				t.Errorf("dc-0: %s, %d moves: %s", rep.Verdict, len(rep.Moves), rep.Message)
			}
			b, _ := json.Marshal(rep)
			t.Logf("drill %s: %d clusters, %d runnables, dc-0 (%d to move): snapshot %.3f s, what-if %.3f s, total %.3f s; "+
				"headroom of %d DCs %.3f s; verdict %s, report %d KB",
				eng.Name, clusters, runnables, len(rep.Moves), read.Seconds(), (total - read).Seconds(), total.Seconds(),
				dcs, headroom.Seconds(), rep.Verdict, len(b)/1024)
		})
	}
}
