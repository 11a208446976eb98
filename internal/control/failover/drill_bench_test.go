package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// BenchmarkDrillFlink is a real drill of cluster a running 100
// FlinkDeployments (POST /api/v1/drills, the follower writing its
// report), beside the failover of the same jobs in the same run:
//
//   - the drill cordons a and moves each job by a planned move: the job
//     stops on a with a savepoint and its copy on b starts from it. Each
//     copy must start from exactly the savepoint its job's stop wrote on
//     a (read from a's FlinkDeployments as the operator reports it:
//     status.jobStatus.savepointInfo.lastSavepoint of trigger UPGRADE),
//     so nothing is processed twice; and no job may ever run on both
//     clusters at once (each simulated operator's view sampled every
//     50 ms throughout).
//   - the drill ended (a uncordoned), the same jobs' JobManagers then fail
//     on b at once and they fail over to a, each from its last checkpoint
//     (what a failover can carry: the records since are processed again).
//
// drill-total-s is from the POST to the report's last move done;
// failover-total-s from the fault to the last job running Healthy on a
// (tolerationSeconds, 3 s, included). Downtime per job: for a move, from
// the job's stop on a to its copy first seen running on b (the report's);
// for the failover, from the attempt's end (its eviction) to the next
// one running Healthy.
func BenchmarkDrillFlink(b *testing.B) {
	const n = 100
	cs := env.Clusters(b)
	for range b.N {
		f := newFarmWith(b, sqliteDSN(b), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}}, periods{})
		f.cordon("b", true)
		names := f.submitMany(benchFlink("AtMostOne", "2s"), n)
		waitAll(f, n, "a")
		waitCheckpoints(b, f.sims["a"], f.ns, names)
		f.cordon("b", false)

		stops := f.watchUpgradeSavepoints("a")
		both := f.sampleTwoRunning(names, "a", "b")
		start := time.Now()
		var d v1alpha1.Drill
		f.do(http.MethodPost, "/api/v1/drills", map[string]any{"target": map[string]string{"kind": "cluster", "name": "a"}}, &d)
		id := d.Metadata.Name
		sandboxtest.Eventually(b, 10*time.Minute, "drill "+id+" ended", func(context.Context) error {
			f.do(http.MethodGet, "/api/v1/drills/"+id, nil, &d)
			if d.Status.State == v1alpha1.DrillRunning {
				return fmt.Errorf("%s", d.Status.Message)
			}
			return nil
		})
		drillTotal := time.Since(start)
		waitAll(f, n, "b")
		twoRunning := both()
		saved := stops()

		var down []float64
		reprocessed := 0
		for _, o := range d.Status.Runnables {
			name := strings.TrimPrefix(o.Runnable, f.ns+"/")
			if o.Step != v1alpha1.MoveDone || o.To != "b" || o.DowntimeSeconds == nil {
				b.Fatalf("%s: %+v", o.Runnable, o)
			}
			down = append(down, *o.DowntimeSeconds)
			if w, got := saved[name], f.sims["b"].RestoredFrom(f.ns, name); w == "" || got != w || o.RestorePoint != w {
				reprocessed++
				if reprocessed <= 5 {
					b.Errorf("%s on b started from %q (the report says %q); its stop on a wrote %q", name, got, o.RestorePoint, w)
				}
			}
		}
		if len(d.Status.Runnables) != n || d.Status.State != v1alpha1.DrillEnded || d.Status.Totals.AsPlanned != n {
			b.Fatalf("the drill's report: %d runnables, %+v", len(d.Status.Runnables), d.Status)
		}
		if twoRunning > 0 {
			b.Errorf("%d jobs were seen running on both clusters at once during the drill", twoRunning)
		}

		// The same jobs fail over back to a.
		f.do(http.MethodPost, "/api/v1/drills/"+id+"/end", nil, nil)
		waitCheckpoints(b, f.sims["b"], f.ns, names)
		fault := time.Now()
		f.sims["b"].FailEach(f.ns, names, flinksim.Reconciling)
		want := latestCheckpoints(f.sims["b"], f.ns, names)
		_, last := waitAll(f, n, "a")
		failoverTotal := last.Sub(fault)
		mismatches := f.restoredExactly(names, want, "a")
		var failed []float64
		for _, name := range names {
			r := f.runnable(name)
			prev := r.Status.Attempts[len(r.Status.Attempts)-2]
			if r.Status.HealthySince == nil || prev.EndedAt == nil {
				b.Fatalf("%s: %+v", name, r.Status)
			}
			failed = append(failed, r.Status.HealthySince.Sub(*prev.EndedAt).Seconds())
		}

		b.ReportMetric(float64(n), "jobs")
		b.ReportMetric(drillTotal.Seconds(), "drill-total-s")
		b.ReportMetric(d.Status.DurationSeconds, "drill-report-s")
		b.ReportMetric(d.Status.PlannedDurationSeconds, "drill-planned-s")
		b.ReportMetric(percentile(down, 50), "move-downtime-p50-s")
		b.ReportMetric(percentile(down, 100), "move-downtime-max-s")
		b.ReportMetric(float64(reprocessed), "drill-not-from-own-savepoint")
		b.ReportMetric(float64(twoRunning), "drill-two-running")
		b.ReportMetric(failoverTotal.Seconds(), "failover-total-s")
		b.ReportMetric(percentile(failed, 50), "failover-downtime-p50-s")
		b.ReportMetric(percentile(failed, 100), "failover-downtime-max-s")
		b.ReportMetric(float64(mismatches), "failover-not-from-last-checkpoint")
		f.stop()
		f.removeFlink("a")
		f.removeFlink("b")
	}
}

// watchUpgradeSavepoints follows cluster's FlinkDeployments and records
// each one's newest savepoint of trigger UPGRADE, the one a stop for an
// upgrade or a move writes, as the operator reports it in
// status.jobStatus.savepointInfo.lastSavepoint. The returned function
// stops the watch and returns what it recorded, by name.
func (f *farm) watchUpgradeSavepoints(cluster string) func() map[string]string {
	f.t.Helper()
	w, err := f.dyn[cluster].Resource(flinkGVR).Namespace(f.ns).Watch(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var mu sync.Mutex
	saved := map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			sp, _, _ := unstructured.NestedMap(o.Object, "status", "jobStatus", "savepointInfo", "lastSavepoint")
			if sp["triggerType"] == "UPGRADE" {
				if loc, _ := sp["location"].(string); loc != "" {
					mu.Lock()
					saved[o.GetName()] = loc
					mu.Unlock()
				}
			}
		}
	}()
	return func() map[string]string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return saved
	}
}

// sampleTwoRunning looks every 50 ms at each name's job on clusters x and
// y, as each cluster's simulated operator last saw or wrote its status,
// until the returned function is called; that returns how many names
// were seen RUNNING on both at once.
func (f *farm) sampleTwoRunning(names []string, x, y string) func() int {
	stop, done := make(chan struct{}), make(chan struct{})
	seen := map[string]bool{}
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, name := range names {
				_, onX := f.sims[x].Running(f.ns, name)
				_, onY := f.sims[y].Running(f.ns, name)
				if onX && onY {
					seen[name] = true
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int {
		close(stop)
		<-done
		return len(seen)
	}
}
