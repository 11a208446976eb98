package submitter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
)

// The scale benchmarks of placement and queueing (docs/benchmarks.md,
// "Placement and queueing at scale"). They drive the submitter itself
// (its queue, its placement, its waiting for capacity, its priority and
// fair-share order, lifecycle.Apply into the real store) over cluster
// records: each record's kubeconfig is one of the shared sandbox
// clusters', so that the check that a cluster serves the kind is a real
// discovery, and its capacity is a report written as the ingester writes
// an agent's heartbeat. Nothing is created on a cluster
// (submitter.PlaceOnly): the creation is TestBenchmarkSubmit's figure.
// They are tests that log their figures, skipped unless PURSER_BENCH is
// set.

// recordClusters registers n cluster records prefix-000..., labelled by
// labels(i), each with the kubeconfig of a shared sandbox cluster in turn.
func (f *fixture) recordClusters(prefix string, n int, labels func(i int) map[string]string) []string {
	f.t.Helper()
	var kcs [][]byte
	for _, c := range env.Clusters(f.t) {
		kc, err := c.Kubeconfig("")
		if err != nil {
			f.t.Fatal(err)
		}
		kcs = append(kcs, kc)
	}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
		clusterstest.Register(f.t, f.store, f.sealer, store.Cluster{Name: names[i], Labels: labels(i)}, kcs[i%len(kcs)])
	}
	return names
}

// report writes cluster's capacity as its agent's heartbeat would carry
// it: one node of cpu cores, usedMilli of them requested, purserMilli of
// those by purser's runnables (negative: the report does not say).
func (f *fixture) report(ctx context.Context, cluster string, cpu, usedMilli, purserMilli int64) error {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu*1000, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   resource.MustParse("100000"),
	}
	free := alloc.DeepCopy()
	free[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(cpu*1000-usedMilli, 0), resource.DecimalSI)
	c := stream.Capacity{Allocatable: alloc, Free: free, NodeMax: free, Nodes: 1, NodesTotal: 1}
	if purserMilli >= 0 {
		c.Runnables = &stream.RunnablePods{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(purserMilli, resource.DecimalSI)}}
	}
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Agents().RecordCapacity(ctx, cluster, time.Now(), body) })
}

// sizedRunnable is a Queued runnable of a Job of one pod asking for cpu.
func sizedRunnable(ns, name, cpu string, priority int32, p v1alpha1.Placement) *store.Runnable {
	container := map[string]any{"name": "main", "image": "busybox", "command": []any{"true"},
		"resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}
	tmpl := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{"backoffLimit": 0,
		"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{container}}}}}
	spec := v1alpha1.RunnableSpec{Template: tmpl, Placement: p}
	if priority != 0 {
		pr := intstr.FromInt32(priority)
		spec.Priority = &pr
	}
	doc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: spec}) // maps of strings only
	return &store.Runnable{
		Namespace: ns, Name: name, UID: "uid-" + randomHex(8), Generation: 1, Spec: doc, SpecHash: randomHex(8),
		Phase: string(v1alpha1.PhaseQueued), Submitter: "bench", Status: []byte(`{"message":"waiting for a cluster"}`),
	}
}

// startPlacing runs a submitter that places and creates nothing.
func (f *fixture) startPlacing(cfg submitter.Config) {
	f.t.Helper()
	cfg.Store, cfg.Sealer = f.store, f.sealer
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s := submitter.New(cfg)
	submitter.PlaceOnly(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// quantile is the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchmarkPlacementScale: 10,000 Queued runnables of one cpu each
// over 100 cluster records that report capacity (150 cores, a third of
// them with 40 already used); the submitter finds them on its first
// rescan. Placement rate and the time of each decision, from the start of
// its placement (attempt start) to its Scheduled row written, on SQLite
// and PostgreSQL.
//
//	PURSER_BENCH=1 go test ./internal/control/submitter -run TestBenchmarkPlacementScale -v
func TestBenchmarkPlacementScale(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	n := benchInt("PURSER_BENCH_RUNNABLES", 10_000)
	const records, cores = 100, 150
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng.NewDSN(t))
			ctx := t.Context()
			names := f.recordClusters("rec", records, func(i int) map[string]string { return map[string]string{"dc": fmt.Sprintf("dc-%d", i%4)} })
			used := map[string]int64{}
			for i, name := range names {
				if i%3 == 0 {
					used[name] = 40_000
				}
				if err := f.report(ctx, name, cores, used[name], -1); err != nil {
					t.Fatal(err)
				}
			}
			for start := 0; start < n; start += 500 {
				err := f.store.Tx(ctx, func(tx *store.Tx) error {
					for i := start; i < min(start+500, n); i++ {
						if err := tx.Runnables().Create(ctx, sizedRunnable(f.ns, fmt.Sprintf("r-%05d", i), "1", 0, v1alpha1.Placement{})); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			// No stream: the first rescan finds the backlog, and no
			// second one (a minute later at the earliest) runs meanwhile.
			begin := time.Now()
			f.startPlacing(submitter.Config{RescanInterval: 10 * time.Minute})
			placed := 0
			for placed < n {
				time.Sleep(200 * time.Millisecond)
				err := f.store.Read(ctx, func(tx *store.Tx) error {
					by, err := tx.Runnables().CountByCluster(ctx, string(v1alpha1.PhaseScheduled))
					placed = 0
					for _, c := range by {
						placed += c
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if time.Since(begin) > 30*time.Minute {
					t.Fatalf("only %d of %d placed in 30 min", placed, n)
				}
			}
			var rows []store.Placed
			attempts := map[string]time.Time{}
			err := f.store.Read(ctx, func(tx *store.Tx) error {
				var err error
				if rows, err = tx.Runnables().ListPlaced(ctx, begin); err != nil {
					return err
				}
				for _, r := range rows {
					as, err := tx.Attempts().List(ctx, r.UID)
					if err != nil {
						return err
					}
					attempts[r.UID] = as[len(as)-1].StartedAt
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var last time.Time
			var decisions []time.Duration
			onCluster := map[string]int64{}
			for _, r := range rows {
				if r.UpdatedAt.After(last) {
					last = r.UpdatedAt
				}
				decisions = append(decisions, r.UpdatedAt.Sub(attempts[r.UID]))
				onCluster[r.Cluster] += 1000
			}
			slices.Sort(decisions)
			fullest := 0.0
			for _, name := range names {
				if got, room := onCluster[name], int64(cores*1000)-used[name]; got > room {
					t.Errorf("%s: %d millicores placed, %d free", name, got, room)
				} else {
					fullest = max(fullest, float64(got+used[name])/float64(cores*1000))
				}
			}
			rate := float64(n) / last.Sub(begin).Seconds()
			t.Logf("placement %s: %d runnables over %d clusters: %.1f runnables/s, decision p50 %v p99 %v, fullest cluster %.0f%%",
				eng.Name, n, records, rate, quantile(decisions, 0.5).Round(100*time.Microsecond),
				quantile(decisions, 0.99).Round(100*time.Microsecond), 100*fullest)
		})
	}
}

// workload is one runnable of an admission run: submitted at offset from
// the start, running for runtime once placed.
type workload struct {
	ns, name, class string
	cpuMilli        int64
	priority        int32
	runtime, offset time.Duration
	placement       v1alpha1.Placement
}

// admissionRun is what happened to the workloads: when each was
// submitted (its row written and its message published), placed (its
// attempt's start) and finished (its simulated completion written).
type admissionRun struct {
	submitted, placed, finished map[string]time.Time // by name
	clusterOf                   map[string]string
	start, end                  time.Time
	lagP99                      time.Duration // submission behind its schedule
}

// simulation stands in for the member clusters, their agents and the
// ingester: each runnable placed (seen Scheduled, polled every 20 ms)
// counts as running on its cluster from its placement; runtime after it,
// the runnable moves Succeeded (lifecycle's row "its object is seen
// succeeded", by the ingester, with its attempt ended). Every
// agentEvery, each cluster's agent reports free = cores less what runs
// there, as a heartbeat does.
type simulation struct {
	f           *fixture
	cores       map[string]int64 // by cluster
	agentEvery  time.Duration
	sample      func(at time.Duration) // called every sampleEvery, if set
	sampleEvery time.Duration
}

func (sim *simulation) run(t *testing.T, loads []workload, timeout time.Duration) *admissionRun {
	f := sim.f
	ctx, cancel := context.WithCancel(t.Context())
	byName := map[string]*workload{}
	for i := range loads {
		byName[loads[i].name] = &loads[i]
	}
	run := &admissionRun{submitted: map[string]time.Time{}, placed: map[string]time.Time{}, finished: map[string]time.Time{},
		clusterOf: map[string]string{}}
	var mu sync.Mutex
	names := map[string]string{} // uid -> name
	used := map[string]int64{}   // millicores running, by cluster
	fail := make(chan error, 1)
	failed := func(err error) {
		if ctx.Err() != nil {
			return
		}
		select {
		case fail <- err:
		default:
		}
	}
	report := func() {
		mu.Lock()
		snapshot := maps.Clone(used)
		mu.Unlock()
		for cluster, cores := range sim.cores {
			if err := f.report(ctx, cluster, cores, snapshot[cluster], snapshot[cluster]); err != nil {
				failed(err)
			}
		}
	}
	report()

	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()

	// The generator: each workload at its offset, written as the API
	// writes it and published as its outbox relay publishes it.
	run.start = time.Now()
	var lags []time.Duration
	sorted := slices.Clone(loads)
	slices.SortStableFunc(sorted, func(a, b workload) int { return int(a.offset - b.offset) })
	bg.Go(func() {
		for _, w := range sorted {
			if d := time.Until(run.start.Add(w.offset)); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			rec := sizedRunnable(w.ns, w.name, resource.NewMilliQuantity(w.cpuMilli, resource.DecimalSI).String(), w.priority, w.placement)
			if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Runnables().Create(ctx, rec) }); err != nil {
				failed(err)
				return
			}
			now := time.Now()
			mu.Lock()
			names[rec.UID] = w.name
			run.submitted[w.name] = now
			lags = append(lags, now.Sub(run.start.Add(w.offset)))
			mu.Unlock()
			msg := stream.Submission{UID: rec.UID, Namespace: rec.Namespace, Name: rec.Name, Event: stream.SubmissionSubmit}
			data, _ := json.Marshal(msg)
			if err := f.streams.Publish(ctx, stream.SubjectSubmissions, msg.ID(), data); err != nil {
				failed(err)
				return
			}
		}
	})

	finish := func(uid, name, cluster string) {
		w := byName[name]
		err := f.store.Tx(ctx, func(tx *store.Tx) error {
			r, err := lifecycle.Load(ctx, tx, uid)
			if err != nil {
				return err
			}
			as, err := tx.Attempts().List(ctx, uid)
			if err != nil {
				return err
			}
			last := *as[len(as)-1]
			at := time.Now()
			last.EndedAt, last.Result = &at, string(v1alpha1.PhaseSucceeded)
			msg := "Job succeeded on " + cluster
			_, err = lifecycle.Apply(ctx, tx, r, lifecycle.Transition{To: v1alpha1.PhaseSucceeded, By: lifecycle.ByIngester,
				Message: msg, Attempt: &last, Audit: &audit.Entry{Action: "observe", Summary: msg + " (simulated completion)"}})
			return err
		})
		if err != nil {
			failed(fmt.Errorf("finish %s: %w", name, err))
			return
		}
		mu.Lock()
		used[cluster] -= w.cpuMilli
		run.finished[name] = time.Now()
		mu.Unlock()
	}

	// The clusters: what is placed runs from its placement (the time its
	// Scheduled row was written) and ends after its runtime.
	bg.Go(func() {
		seen := map[string]bool{}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var rows []store.Placed
			err := f.store.Read(ctx, func(tx *store.Tx) error {
				var err error
				rows, err = tx.Runnables().ListPlaced(ctx, time.Now())
				return err
			})
			if err != nil {
				failed(err)
				return
			}
			for _, r := range rows {
				if seen[r.UID] || r.Phase != string(v1alpha1.PhaseScheduled) {
					continue
				}
				seen[r.UID] = true
				mu.Lock()
				name := names[r.UID]
				w := byName[name]
				run.placed[name] = r.UpdatedAt
				run.clusterOf[name] = r.Cluster
				used[r.Cluster] += w.cpuMilli
				mu.Unlock()
				uid, cluster := r.UID, r.Cluster
				bg.Go(func() {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(r.UpdatedAt.Add(w.runtime))):
					}
					finish(uid, name, cluster)
				})
			}
		}
	})
	// The agents' heartbeats.
	bg.Go(func() {
		tick := time.NewTicker(sim.agentEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				report()
			}
		}
	})
	if sim.sample != nil {
		bg.Go(func() {
			tick := time.NewTicker(sim.sampleEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case at := <-tick.C:
					sim.sample(at.Sub(run.start))
				}
			}
		})
	}

	deadline := time.After(timeout)
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	for {
		select {
		case <-progress.C:
			mu.Lock()
			t.Logf("after %v: %d of %d submitted, %d placed, %d finished", time.Since(run.start).Round(time.Second),
				len(run.submitted), len(loads), len(run.placed), len(run.finished))
			mu.Unlock()
		case err := <-fail:
			t.Fatal(err)
		case <-deadline:
			mu.Lock()
			msg := fmt.Sprintf("after %v: %d of %d submitted, %d placed, %d finished", timeout, len(run.submitted), len(loads), len(run.placed), len(run.finished))
			mu.Unlock()
			t.Fatal(msg)
		case <-time.After(100 * time.Millisecond):
		}
		mu.Lock()
		done := len(run.finished) == len(loads)
		if done {
			for _, at := range run.finished {
				if at.After(run.end) {
					run.end = at
				}
			}
			slices.Sort(lags)
			run.lagP99 = quantile(lags, 0.99)
		}
		mu.Unlock()
		if done {
			return run
		}
	}
}

// kueueSet is one workloadsSet of Kueue's scheduler performance baseline
// (kueue test/performance/scheduler/configs/baseline/generator.yaml):
// per ClusterQueue, count workloads of one class created every interval.
type kueueSet struct {
	class    string
	count    int
	interval time.Duration
	runtime  time.Duration
	priority int32
	cpu      int64
}

var kueueBaseline = []kueueSet{
	{"small", 350, 100 * time.Millisecond, 200 * time.Millisecond, 50, 1},
	{"medium", 100, 500 * time.Millisecond, 500 * time.Millisecond, 100, 5},
	{"large", 50, 1200 * time.Millisecond, 1000 * time.Millisecond, 200, 20},
}

// Kueue's baseline: 5 cohorts of 6 ClusterQueues, each with a nominal
// quota of 20 cpu and a borrowing limit of 100.
const (
	kueueQueues         = 6
	kueueNominal        = 20
	kueueBorrowingLimit = 100
)

// TestBenchmarkKueueBaseline runs Kueue's scheduler performance baseline
// as purser work, the whole of it: 5 cohorts, 15,000 workloads (about
// ten minutes). TestBenchmarkKueueBaselineOneCohort runs one cohort, what
// make bench runs by default.
//
// A cohort is a cluster record whose capacity is the cohort's pooled
// nominal quota (6 × 20 cpu), reported by a simulated agent every second;
// a ClusterQueue is a namespace whose runnables go to its cohort's
// cluster (a label selector) under a Quota of cpu nominal + borrowing
// limit (120); Kueue's workload priorities are spec.priority. Runnables
// finish by a simulated completion their runtime after their placement
// (simulation). Kueue measures wall time from the first creation to the
// last finish, usage as the CPU time used over the nominal quota times
// that wall time, and time to admission from a workload's creation; so
// does this. The cohorts share nothing, in Kueue as here, so one cohort
// is the baseline's fifth with the same load on its cluster and its
// namespaces; what the five share is the submitter and the database.
//
//	PURSER_BENCH=1 go test ./internal/control/submitter -run TestBenchmarkKueueBaseline -v -timeout 60m
func TestBenchmarkKueueBaseline(t *testing.T) { kueueRun(t, 5) }

// TestBenchmarkKueueBaselineOneCohort is one cohort of the baseline:
// 6 namespaces, 3,000 workloads.
func TestBenchmarkKueueBaselineOneCohort(t *testing.T) { kueueRun(t, 1) }

func kueueRun(t *testing.T, cohorts int) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	f := newFixture(t, sqliteDSN(t))
	ctx := t.Context()
	names := f.recordClusters("cohort", cohorts, func(i int) map[string]string { return map[string]string{"cohort": strconv.Itoa(i)} })
	cores := map[string]int64{}
	var loads []workload
	for c, cluster := range names {
		cores[cluster] = kueueQueues * kueueNominal
		p := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cohort": strconv.Itoa(c)}}}}
		for q := range kueueQueues {
			ns := fmt.Sprintf("cq-%d-%d", c, q)
			spec, _ := json.Marshal(v1alpha1.QuotaSpec{Limits: map[string]string{"cpu": strconv.Itoa(kueueNominal + kueueBorrowingLimit)}})
			if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Quotas().Put(ctx, &store.Quota{Namespace: ns, Spec: spec}) }); err != nil {
				t.Fatal(err)
			}
			for _, set := range kueueBaseline {
				for i := range set.count {
					loads = append(loads, workload{ns: ns, name: fmt.Sprintf("%s-%s-%03d", ns, set.class, i), class: set.class,
						cpuMilli: set.cpu * 1000, priority: set.priority, runtime: set.runtime, offset: time.Duration(i) * set.interval, placement: p})
				}
			}
		}
	}
	f.startPlacing(submitter.Config{Stream: f.streams})
	sim := &simulation{f: f, cores: cores, agentEvery: time.Second}
	run := sim.run(t, loads, time.Duration(benchInt("PURSER_BENCH_KUEUE_TIMEOUT_MIN", 40))*time.Minute)

	wall := run.end.Sub(run.start)
	var cpuMs float64
	admission := map[string][]time.Duration{}
	for _, w := range loads {
		cpuMs += float64(w.cpuMilli) / 1000 * float64(run.finished[w.name].Sub(run.placed[w.name]).Milliseconds())
		admission[w.class] = append(admission[w.class], run.placed[w.name].Sub(run.submitted[w.name]))
	}
	usage := cpuMs / (float64(cohorts*kueueQueues*kueueNominal) * float64(wall.Milliseconds()))
	mean := func(class string) float64 {
		var sum time.Duration
		for _, d := range admission[class] {
			sum += d
		}
		return (sum / time.Duration(len(admission[class]))).Seconds()
	}
	t.Logf("kueue baseline %d of 5 cohorts, %d workloads: wall %.1fs, usage %.1f%%, mean time to admission large %.2fs medium %.2fs small %.2fs; submissions behind schedule p99 %v",
		cohorts, len(loads), wall.Seconds(), 100*usage, mean("large"), mean("medium"), mean("small"), run.lagP99.Round(time.Millisecond))
}

// TestBenchmarkFairShare: namespace fair-a submits ten times the load of
// fair-b (10 against 1 runnable a second, each 1 cpu for 4 s, for 30 s)
// onto one cluster of 20 cpu. Every 6 s it prints each namespace's share
// of the farm's cpu (what its active runnables request over the
// allocatable) beside its dominant-resource fair share: the max-min fair
// division of the farm between the namespaces' demands (what runs and
// what waits), equal weights.
//
//	PURSER_BENCH=1 go test ./internal/control/submitter -run TestBenchmarkFairShare -v
func TestBenchmarkFairShare(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	const cores = 20
	f := newFixture(t, sqliteDSN(t))
	ctx := t.Context()
	names := f.recordClusters("fair", 1, func(int) map[string]string { return map[string]string{"pool": "fair"} })
	var loads []workload
	for _, ns := range []struct {
		name  string
		every time.Duration
	}{{"fair-a", 100 * time.Millisecond}, {"fair-b", time.Second}} {
		for i := range int(30 * time.Second / ns.every) {
			loads = append(loads, workload{ns: ns.name, name: fmt.Sprintf("%s-%03d", ns.name, i), class: ns.name,
				cpuMilli: 1000, runtime: 4 * time.Second, offset: time.Duration(i) * ns.every})
		}
	}
	f.startPlacing(submitter.Config{Stream: f.streams})
	// demand reads, per namespace, the cpu its active runnables request
	// and the runnables it has queued, in millicores.
	demand := func(ns string) (used, queued int64, err error) {
		err = f.store.Read(ctx, func(tx *store.Tx) error {
			statuses, err := tx.Runnables().ActiveStatuses(ctx, ns)
			if err != nil {
				return err
			}
			for _, b := range statuses {
				var st v1alpha1.RunnableStatus
				if json.Unmarshal(b, &st) == nil {
					q, err := resource.ParseQuantity(st.Requests["cpu"])
					if err == nil {
						used += q.MilliValue()
					}
				}
			}
			cont := ""
			for {
				page, next, err := tx.Runnables().List(ctx, store.RunnableFilter{Namespace: ns, Phase: string(v1alpha1.PhaseQueued), Continue: cont, Limit: 1000})
				if err != nil {
					return err
				}
				queued += int64(len(page)) * 1000
				if cont = next; cont == "" {
					return nil
				}
			}
		})
		return used, queued, err
	}
	var lines []string
	sim := &simulation{f: f, cores: map[string]int64{names[0]: cores}, agentEvery: time.Second, sampleEvery: 6 * time.Second,
		sample: func(at time.Duration) {
			ua, qa, err := demand("fair-a")
			if err != nil {
				return
			}
			ub, qb, err := demand("fair-b")
			if err != nil {
				return
			}
			total := float64(cores * 1000)
			fa, fb := maxMinFair(float64(ua+qa)/total, float64(ub+qb)/total)
			lines = append(lines, fmt.Sprintf("fairness t=%.0fs: fair-a %.0f%% (fair share %.0f%%, %d queued), fair-b %.0f%% (fair share %.0f%%, %d queued)",
				at.Round(time.Second).Seconds(), 100*float64(ua)/total, 100*fa, qa/1000, 100*float64(ub)/total, 100*fb, qb/1000))
		}}
	run := sim.run(t, loads, 10*time.Minute)
	for _, l := range lines {
		t.Log(l)
	}
	waits := map[string][]time.Duration{}
	for _, w := range loads {
		waits[w.ns] = append(waits[w.ns], run.placed[w.name].Sub(run.submitted[w.name]))
	}
	for _, ns := range []string{"fair-a", "fair-b"} {
		slices.Sort(waits[ns])
		var sum time.Duration
		for _, d := range waits[ns] {
			sum += d
		}
		t.Logf("fairness %s: %d runnables, time to admission mean %.2fs p99 %.2fs", ns, len(waits[ns]),
			(sum / time.Duration(len(waits[ns]))).Seconds(), quantile(waits[ns], 0.99).Seconds())
	}
	t.Logf("fairness wall %.1fs", run.end.Sub(run.start).Seconds())
}

// maxMinFair divides a farm of 1 between two demands (shares of it) by
// max-min fairness with equal weights: each gets what it asks up to half,
// and what one leaves goes to the other.
func maxMinFair(a, b float64) (float64, float64) {
	fa, fb := min(a, 0.5), min(b, 0.5)
	return min(a, 1-fb), min(b, 1-fa)
}
