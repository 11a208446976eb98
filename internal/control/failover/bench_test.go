package failover_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
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
// Run with: go test -run '^$' -bench Failover -benchtime 1x ./internal/failover/

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
// them run on the other cluster: with the farm's short periods (1 and
// 500 runnables), and one runnable with purser's defaults (probes every
// 2 s, 3 failures, 40 s grace, failover passes every second).
func BenchmarkFailoverCluster(b *testing.B) {
	// The simulated operators look at a running deployment as often as
	// the real one does by default (every 60 s), not as often as the
	// tests need to see checkpoints.
	short := testPeriods
	short.reconcile = 0
	for _, n := range []int{1, 500} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				failoverCluster(b, n, short)
			}
		})
	}
	b.Run("defaults", func(b *testing.B) {
		for range b.N {
			failoverCluster(b, 1, periods{})
		}
	})
}

func failoverCluster(b *testing.B, n int, p periods) {
	a := env.Clusters(b)[0]
	lost := env.Dedicated(b, false)
	f := newFarmWith(b, sqliteDSN(b), []cluster{{name: "a", sandbox: a}, {name: "b", sandbox: lost}}, p)
	// Everything starts on b: a is cordoned until all run.
	f.do(http.MethodPut, "/api/v1/clusters/a", map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{"taints": []map[string]string{{"key": "bench", "effect": "NoSchedule"}}},
	}, nil)
	manifest := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	manifest = strings.Replace(manifest, "consistency: AtMostOne", "consistency: AtLeastOne", 1)
	// Checkpoints every 10 s, as a production job takes them at most,
	// rather than the tests' 200 ms: 500 jobs would otherwise write 2,500
	// checkpoints a second to the farm's S3 server.
	manifest = strings.Replace(manifest, "execution.checkpointing.interval: 200ms", "execution.checkpointing.interval: 10s", 1)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f.submit(strings.Replace(manifest, "name: wordcount", fmt.Sprintf("name: job-%d", i), 1))
		})
	}
	wg.Wait()
	waitAll(f, n, "b")
	// Each job has a checkpoint to move with (its restore point is
	// Required) before b goes: the benchmark measures the move, not the
	// wait for a first checkpoint.
	for i := range n {
		waitCheckpointOf(b, f, "b", fmt.Sprintf("job-%d", i))
	}
	f.do(http.MethodPut, "/api/v1/clusters/a", map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{},
	}, nil)

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
	grace := cmp.Or(p.grace, clusters.DefaultNoExecuteGrace)
	// The outage is dated from its first failed probe: detection is the
	// time to that probe, the verdict comes a threshold of probes later.
	b.ReportMetric(notReady.Sub(stopped).Seconds(), "detect-s")
	b.ReportMetric(first.Sub(stopped).Seconds(), "first-running-s")
	b.ReportMetric(last.Sub(stopped).Seconds(), "all-running-s")
	b.ReportMetric((first.Sub(stopped) - grace).Seconds(), "beyond-grace-s")
	b.ReportMetric(grace.Seconds(), "grace-s")
	// The next iteration starts a dedicated cluster of the same name in
	// the same folder: this one must be gone by then.
	f.stop()
	lost.Stop()
}

// waitAll waits until n runnables run Healthy on cluster, and returns
// when the first and the last of them were seen so.
func waitAll(f *farm, n int, cluster string) (first, last time.Time) {
	sandboxtest.Eventually(f.t, 10*time.Minute, fmt.Sprintf("%d runnables running on %s", n, cluster), func(context.Context) error {
		var list struct {
			Items    []v1alpha1.Runnable `json:"items"`
			Continue string              `json:"continue"`
		}
		count := 0
		cont := ""
		for {
			f.do(http.MethodGet, "/api/v1/runnables?namespace="+f.ns+"&cluster="+cluster+"&phase=Running&limit=1000&continue="+cont, nil, &list)
			for _, r := range list.Items {
				if r.Status.Health == v1alpha1.HealthHealthy {
					count++
				}
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
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
