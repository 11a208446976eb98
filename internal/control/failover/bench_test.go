package failover_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// The failover benchmarks measure, on real sandbox clusters and with the
// farm's short periods (probe 200 ms, failure threshold 3, NoExecute grace
// 2 s, agent heartbeat 300 ms, tolerationSeconds 3), where the time of a
// failover goes:
//
//   - detection: from the fault to purser knowing (the object seen
//     Unhealthy; the cluster's Ready condition leaving True);
//   - eviction:  from when the policy allows a move (toleration or grace
//     over) to the attempt's end;
//   - placement: from the attempt's end to the next attempt's start (for
//     Directly, this includes deleting the old copy);
//   - running:   from the next attempt's start to the object running
//     Healthy on its new cluster.
//
// Run with: go test -run '^$' -bench Failover -benchtime 1x ./internal/control/failover/

// BenchmarkFailoverApplication fails a FlinkDeployment's job and follows it
// to the other cluster, with the failover path's default periods
// (controller pass 1 s, outbox relay poll 1 s) rather than the tests'
// short ones. created-beyond-toleration-s is the measure: from
// the unhealthy status to the new copy created on the other cluster, less
// tolerationSeconds.
func BenchmarkFailoverApplication(b *testing.B) {
	cs := env.Clusters(b)
	f := newFarmWith(b, sqliteDSN(b), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}}, periods{})
	var overhead, created, place, run, total time.Duration
	for i := range b.N {
		name := fmt.Sprintf("wordcount-%d", i)
		f.submit(strings.Replace(strings.Replace(flinkRunnable, "%s", "a, b", 1), "name: wordcount", "name: "+name, 1))
		r := running(f, name)
		from := r.Status.Cluster
		waitCheckpointOf(b, f, from, name)
		appeared := f.watchCreated(other(from), flinkGVR, name)

		fault := time.Now()
		f.sims[from].Fail(f.ns, name, flinksim.Reconciling)
		r = f.waitFor(name, "moved", func(r *v1alpha1.Runnable) bool {
			return r.Status.Cluster != "" && r.Status.Cluster != from &&
				r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
		})
		done := time.Now()
		a1, a2 := r.Status.Attempts[0], r.Status.Attempts[1]
		// Detection and eviction together: how much later than
		// tolerationSeconds after the fault the attempt ended.
		overhead += a1.EndedAt.Sub(fault) - toleration*time.Second
		created += (<-appeared).Sub(fault) - toleration*time.Second
		place += a2.StartedAt.Sub(*a1.EndedAt)
		run += done.Sub(*a2.StartedAt)
		total += done.Sub(fault)
	}
	n := time.Duration(b.N)
	b.ReportMetric((overhead / n).Seconds(), "detect+evict-s")
	b.ReportMetric((created / n).Seconds(), "created-beyond-toleration-s")
	b.ReportMetric((place / n).Seconds(), "place-s")
	b.ReportMetric((run / n).Seconds(), "running-s")
	b.ReportMetric((total / n).Seconds(), "total-s")
	b.ReportMetric(toleration, "toleration-s")
}

// waitCheckpointOf waits until the job of name on cluster has a completed
// checkpoint, so that its failover has a restore point.
func waitCheckpointOf(b *testing.B, f *farm, cluster, name string) {
	b.Helper()
	sandboxtest.Eventually(b, time.Minute, name+" checkpointed", func(ctx context.Context) error {
		id, ok := f.sims[cluster].Running(f.ns, name)
		if !ok {
			return fmt.Errorf("not running")
		}
		_, err := f.checkpoints.Latest(ctx, "s3://flink/checkpoints", id)
		return err
	})
}

// BenchmarkFailoverCluster stops a cluster's kube-apiserver under many
// AtLeastOne FlinkDeployments and measures how long it takes until all of
// them run on the other cluster, each restored from the checkpoint its job
// last completed before the stop: with the farm's short periods, one
// runnable and 1,000 (with purser's eviction rate and client limits, and
// with both raised to what the two clusters sustain), and one runnable
// with purser's defaults (probes every 2 s, 3 failures, 40 s grace,
// failover passes every second).
//
// PURSER_BENCH_EVICTION_RATE, PURSER_BENCH_CLIENT_QPS and
// PURSER_BENCH_CLIENT_BURST override the tuned row's values, to find them.
func BenchmarkFailoverCluster(b *testing.B) {
	// The simulated operators look at a running deployment as often as
	// the real one does by default (every 60 s), not as often as the
	// tests need to see checkpoints.
	shipped := testPeriods
	shipped.reconcile = 0
	tuned := shipped
	tuned.evictionRate = envFloat(b, "PURSER_BENCH_EVICTION_RATE", tunedEvictionRate)
	tuned.clientLimits = clusters.Limits{
		QPS:   float32(envFloat(b, "PURSER_BENCH_CLIENT_QPS", tunedClientQPS)),
		Burst: int(envFloat(b, "PURSER_BENCH_CLIENT_BURST", tunedClientBurst)),
	}
	for _, c := range []struct {
		name string
		n    int
		p    periods
	}{{"1", 1, shipped}, {"1000", 1000, shipped}, {"1000-tuned", 1000, tuned}, {"defaults", 1, periods{}}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				failoverCluster(b, c.n, c.p)
			}
		})
	}
}

// The tuned row's eviction rate and client limits: the fastest that the
// two sandbox clusters, the simulator and the farm sustained in hand runs
// on 2 shared cores (docs/benchmarks.md, Failover).
const (
	tunedEvictionRate = 200
	tunedClientQPS    = 400
	tunedClientBurst  = 800
)

// envFloat is the number in the environment variable name, or def.
func envFloat(b *testing.B, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return f
}

// benchFlink is flinkRunnable as the failover benchmarks run it: with
// consistency, checkpoints every interval rather than the tests' 200 ms
// (1,000 jobs would otherwise write 5,000 checkpoints a second to the
// farm's S3 server), and Kubernetes HA, as production jobs on Kubernetes
// run: a checkpoint then completes only once the kube-apiserver stored its
// pointer, so none completes on a cluster whose kube-apiserver is down and
// the one to restore from is the last completed before (flinksim,
// checkpoints.go).
func benchFlink(consistency, interval string) string {
	m := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	m = strings.Replace(m, "consistency: AtMostOne", "consistency: "+consistency, 1)
	return strings.Replace(m, "execution.checkpointing.interval: 200ms", "execution.checkpointing.interval: "+interval+
		"\n        high-availability.type: kubernetes\n        high-availability.storageDir: s3://flink/ha", 1)
}

func failoverCluster(b *testing.B, n int, p periods) {
	a := env.Clusters(b)[0]
	lost := env.Dedicated(b, false)
	f := newFarmWith(b, sqliteDSN(b), []cluster{{name: "a", sandbox: a}, {name: "b", sandbox: lost}}, p)
	defer f.removeFlink("a")
	// Everything starts on b: a is cordoned until all run.
	f.cordon("a", true)
	names := f.submitMany(benchFlink("AtLeastOne", "10s"), n)
	waitAll(f, n, "b")
	// Each job has a checkpoint to move with (its restore point is
	// Required) before b goes: the benchmark measures the move, not the
	// wait for a first checkpoint.
	waitCheckpoints(b, f.sims["b"], f.ns, names)
	f.cordon("a", false)

	stopped := time.Now()
	lost.StopAPIServer()
	first, last := waitAll(f, n, "a")

	var c v1alpha1.Cluster
	f.do(http.MethodGet, "/api/v1/clusters/b", nil, &c)
	var notReady time.Time
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1alpha1.ConditionReady {
			notReady = cond.LastTransitionTime
		}
	}
	// What each job left: once a store of b's HA checkpoints has failed,
	// none completes any more, so the newest each job has is the newest
	// it completed before the stop.
	sandboxtest.Eventually(b, time.Minute, "b's checkpoint store seen down", func(context.Context) error {
		if !f.sims["b"].CheckpointStoreDown() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	mismatches := f.restoredExactly(names, latestCheckpoints(f.sims["b"], f.ns, names), "a")
	grace := cmp.Or(p.grace, clusters.DefaultNoExecuteGrace)
	// The outage is dated from its first failed probe: detection is the
	// time to that probe, the verdict comes a threshold of probes later.
	b.ReportMetric(notReady.Sub(stopped).Seconds(), "detect-s")
	b.ReportMetric(first.Sub(stopped).Seconds(), "first-running-s")
	b.ReportMetric(last.Sub(stopped).Seconds(), "all-running-s")
	b.ReportMetric((first.Sub(stopped) - grace).Seconds(), "beyond-grace-s")
	b.ReportMetric(grace.Seconds(), "grace-s")
	if n > 1 {
		// The pace between the first and the last: what bounds a big
		// failover once it has started.
		b.ReportMetric(float64(n-1)/last.Sub(first).Seconds(), "runnables/s")
	}
	b.ReportMetric(float64(mismatches), "mismatches")
	b.ReportMetric(cmp.Or(p.evictionRate, failover.DefaultEvictionRate), "eviction-rate")
	b.ReportMetric(float64(cmp.Or(p.clientLimits.QPS, clusters.QPS)), "client-qps")
	// The next iteration starts a dedicated cluster of the same name in
	// the same folder: this one must be gone by then.
	f.stop()
	lost.Stop()
}

// BenchmarkFailoverApplicationMany fails the jobs of 100 FlinkDeployments
// at the same moment (each turns RECONCILING: its JobManager cannot run)
// and follows them to the other cluster, with the failover path's default
// periods, as BenchmarkFailoverApplication does for one: how long beyond
// tolerationSeconds each runs Healthy there (p50, max), each restored from
// the checkpoint its job last completed before the fault.
func BenchmarkFailoverApplicationMany(b *testing.B) {
	const n = 100
	cs := env.Clusters(b)
	for range b.N {
		f := newFarmWith(b, sqliteDSN(b), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}}, periods{})
		// All start on a: b is cordoned until they run.
		f.cordon("b", true)
		names := f.submitMany(benchFlink("AtMostOne", "2s"), n)
		waitAll(f, n, "a")
		waitCheckpoints(b, f.sims["a"], f.ns, names)
		f.cordon("b", false)

		fault := time.Now()
		f.sims["a"].FailEach(f.ns, names, flinksim.Reconciling)
		// No checkpoint completes once FailEach has returned.
		want := latestCheckpoints(f.sims["a"], f.ns, names)
		seen := waitEach(f, names, "b")
		var beyond []time.Duration
		for _, at := range seen {
			beyond = append(beyond, at.Sub(fault)-toleration*time.Second)
		}
		slices.Sort(beyond)
		mismatches := f.restoredExactly(names, want, "b")
		b.ReportMetric(beyond[len(beyond)/2].Seconds(), "p50-beyond-toleration-s")
		b.ReportMetric(beyond[len(beyond)-1].Seconds(), "max-beyond-toleration-s")
		b.ReportMetric((beyond[len(beyond)-1] + toleration*time.Second).Seconds(), "all-running-s")
		b.ReportMetric(float64(n), "jobs")
		b.ReportMetric(float64(mismatches), "mismatches")
		b.ReportMetric(toleration, "toleration-s")
		b.ReportMetric(failover.DefaultEvictionRate, "eviction-rate")
		f.stop()
		f.removeFlink("a")
		f.removeFlink("b")
	}
}

// cordon taints cluster NoSchedule through the API (on), or clears its
// taints (off).
func (f *farm) cordon(cluster string, on bool) {
	f.t.Helper()
	spec := map[string]any{}
	if on {
		spec["taints"] = []map[string]string{{"key": "bench", "effect": "NoSchedule"}}
	}
	f.do(http.MethodPut, "/api/v1/clusters/"+cluster, map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": cluster},
		"spec": spec,
	}, nil)
}

// submitMany submits n copies of manifest named job-0 to job-<n-1>, eight
// at a time, and returns their names. A submission the API's rate limit
// of one user turns away (429) is sent again after its Retry-After.
func (f *farm) submitMany(manifest string, n int) []string {
	f.t.Helper()
	names := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		names[i] = fmt.Sprintf("job-%d", i)
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(strings.Replace(manifest, "name: wordcount", "name: "+names[i], 1)), &obj); err != nil {
			f.t.Fatal(err)
		}
		obj["metadata"].(map[string]any)["namespace"] = f.ns
		body, err := json.Marshal(obj)
		if err != nil {
			f.t.Fatal(err)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for {
				code, err := f.api.Do(f.ctx, http.MethodPost, "/api/v1/runnables", nil, body, "application/json", nil)
				if code == http.StatusTooManyRequests {
					time.Sleep(time.Second)
					continue
				}
				if err != nil || code/100 != 2 {
					f.t.Errorf("submit %s: %d %v", names[i], code, err)
				}
				return
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		f.t.FailNow()
	}
	return names
}

// waitCheckpoints waits until the job of each name has completed a
// checkpoint, as sim knows it (it knows it once its _metadata is in the
// farm's S3 storage), so that its failover has a restore point.
func waitCheckpoints(b *testing.B, sim *flinksim.Simulator, ns string, names []string) {
	b.Helper()
	sandboxtest.Eventually(b, 2*time.Minute, "every job checkpointed", func(context.Context) error {
		for _, name := range names {
			if sim.LatestCheckpoint(ns, name) == "" {
				return fmt.Errorf("%s has no checkpoint", name)
			}
		}
		return nil
	})
}

// latestCheckpoints is the newest completed checkpoint of each name's job
// on sim's cluster.
func latestCheckpoints(sim *flinksim.Simulator, ns string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, name := range names {
		out[name] = sim.LatestCheckpoint(ns, name)
	}
	return out
}

// restoredExactly counts the names whose copy on cluster does not restore
// from want[name]: its spec.job.initialSavepointPath differs, or its
// simulated job started from elsewhere. It reports the first few as
// errors: a benchmark whose failovers lose or repeat state fails.
func (f *farm) restoredExactly(names []string, want map[string]string, cluster string) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	list, err := f.dyn[cluster].Resource(flinkGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list FlinkDeployments on %s: %v", cluster, err)
	}
	spec := map[string]string{}
	for _, o := range list.Items {
		spec[o.GetName()], _, _ = unstructured.NestedString(o.Object, "spec", "job", "initialSavepointPath")
	}
	bad := 0
	for _, name := range names {
		w, got, started := want[name], spec[name], f.sims[cluster].RestoredFrom(f.ns, name)
		if w != "" && got == w && started == w {
			continue
		}
		bad++
		if bad <= 5 {
			f.t.Errorf("%s on %s: spec.job.initialSavepointPath %q, job started from %q; want the last checkpoint completed before the fault, %q",
				name, cluster, got, started, w)
		}
	}
	return bad
}

// removeFlink deletes the farm's FlinkDeployments on cluster and waits
// until they are gone, so that the next benchmark's simulator (which
// watches every namespace) does not find hundreds of them to run again
// while the namespace is being deleted.
func (f *farm) removeFlink(cluster string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := f.dyn[cluster].Resource(flinkGVR).Namespace(f.ns)
	if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		f.t.Logf("delete FlinkDeployments on %s: %v", cluster, err)
		return
	}
	sandboxtest.Eventually(f.t, 2*time.Minute, "FlinkDeployments gone from "+cluster, func(ctx context.Context) error {
		list, err := res.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("some left")
		}
		return nil
	})
}

// waitEach waits until each of names runs Healthy on cluster and returns
// when each was first seen so.
func waitEach(f *farm, names []string, cluster string) map[string]time.Time {
	seen := map[string]time.Time{}
	sandboxtest.Eventually(f.t, 10*time.Minute, fmt.Sprintf("%d runnables running on %s", len(names), cluster), func(context.Context) error {
		now := time.Now()
		for _, r := range f.runningOn(cluster) {
			if _, ok := seen[r.Metadata.Name]; !ok {
				seen[r.Metadata.Name] = now
			}
		}
		if len(seen) < len(names) {
			return fmt.Errorf("%d running", len(seen))
		}
		return nil
	})
	return seen
}

// runningOn lists the farm's runnables that run Healthy on cluster.
func (f *farm) runningOn(cluster string) []v1alpha1.Runnable {
	var out []v1alpha1.Runnable
	cont := ""
	for {
		var list struct {
			Items    []v1alpha1.Runnable `json:"items"`
			Continue string              `json:"continue"`
		}
		f.do(http.MethodGet, "/api/v1/runnables?namespace="+f.ns+"&cluster="+cluster+"&phase=Running&limit=1000&continue="+cont, nil, &list)
		for _, r := range list.Items {
			if r.Status.Health == v1alpha1.HealthHealthy {
				out = append(out, r)
			}
		}
		if cont = list.Continue; cont == "" {
			return out
		}
	}
}

// waitAll waits until n runnables run Healthy on cluster, and returns
// when the first and the last of them were seen so.
func waitAll(f *farm, n int, cluster string) (first, last time.Time) {
	sandboxtest.Eventually(f.t, 10*time.Minute, fmt.Sprintf("%d runnables running on %s", n, cluster), func(context.Context) error {
		count := len(f.runningOn(cluster))
		now := time.Now()
		if count > 0 && first.IsZero() {
			first = now
		}
		if count < n {
			return fmt.Errorf("%d running", count)
		}
		last = now
		return nil
	})
	return first, last
}
