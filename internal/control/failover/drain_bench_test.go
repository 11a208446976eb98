package failover_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

// BenchmarkDrain drains cluster a of n FlinkDeployments by planned moves
// (one at a time, as purser drain does by default): each job stops with a
// savepoint on a and its copy on b restores from it. In the same run the
// same jobs then fail over back from b (a NoExecute taint on b, the drain
// of before this wave) from their last checkpoints. Downtime per job: for
// a move, from the job's stop on a (its savepoint) to the copy first seen
// running on b; for the failover, from the attempt's end (its eviction)
// to the next one first seen running.
func BenchmarkDrain(b *testing.B) {
	const n = 5
	cs := env.Clusters(b)
	f := newFarm(b, sqliteDSN(b), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	manifest := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	manifest = strings.Replace(manifest, "execution.checkpointing.interval: 200ms", "execution.checkpointing.interval: 1s", 1)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("job-%d", i)
	}
	for range b.N {
		f.setTaint("b", corev1.TaintEffectNoSchedule)
		for _, name := range names {
			f.submit(strings.Replace(manifest, "name: wordcount", "name: "+name, 1))
		}
		waitAll(f, n, "a")
		for _, name := range names {
			waitCheckpointOf(b, f, "a", name)
		}
		f.setTaint("b", "")

		f.setTaint("a", corev1.TaintEffectNoSchedule)
		start := time.Now()
		var moved []float64
		for _, name := range names {
			r, err := f.api.Move(f.ctx, f.ns, name, "")
			if err != nil {
				b.Fatal(err)
			}
			done, err := f.api.WaitMoved(f.ctx, f.ns, name, r.Status.Move.At, 50*time.Millisecond, nil)
			if err != nil || done.Status.Move.Step != v1alpha1.MoveDone || done.Status.Move.DowntimeSeconds == nil {
				b.Fatalf("%s: %v: %+v", name, err, done.Status.Move)
			}
			moved = append(moved, *done.Status.Move.DowntimeSeconds)
		}
		drain := time.Since(start)

		for _, name := range names {
			waitCheckpointOf(b, f, "b", name)
		}
		f.setTaint("a", "")
		start = time.Now()
		f.setTaint("b", corev1.TaintEffectNoExecute)
		waitAll(f, n, "a")
		failover := time.Since(start)
		var failed []float64
		for _, name := range names {
			r := f.runnable(name)
			prev := r.Status.Attempts[len(r.Status.Attempts)-2]
			if r.Status.HealthySince == nil || prev.EndedAt == nil {
				b.Fatalf("%s: %+v", name, r.Status)
			}
			failed = append(failed, r.Status.HealthySince.Sub(*prev.EndedAt).Seconds())
		}
		b.ReportMetric(percentile(moved, 50), "move-downtime-p50-s")
		b.ReportMetric(percentile(moved, 100), "move-downtime-max-s")
		b.ReportMetric(drain.Seconds(), "drain-total-s")
		b.ReportMetric(percentile(failed, 50), "failover-downtime-p50-s")
		b.ReportMetric(percentile(failed, 100), "failover-downtime-max-s")
		b.ReportMetric(failover.Seconds(), "failover-total-s")
		b.ReportMetric(n, "jobs")
		f.setTaint("b", "")
		for _, name := range names {
			f.do("DELETE", "/api/v1/runnables/"+f.ns+"/"+name, nil, nil)
		}
	}
}

// percentile is the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p int) float64 {
	s := slices.Sorted(slices.Values(xs))
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}
