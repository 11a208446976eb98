package failover_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/flink"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// movable is a FlinkDeployment with no failover section (AtMostOne), as
// most users write one, allowed on both clusters.
const movable = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s}
spec:
  template:
    apiVersion: flink.apache.org/v1beta1
    kind: FlinkDeployment
    spec:
      image: flink:1.20
      flinkConfiguration:
        state.checkpoints.dir: s3://flink/checkpoints
        state.savepoints.dir: s3://flink/savepoints
        execution.checkpointing.interval: 200ms
      job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: 1}
  placement:
    clusterAffinity: {clusterNames: [a, b]}
`

// setTaint sets (effect "") or removes purser's maintenance taint on a
// cluster through the API, as purser cordon and uncordon do.
func (f *farm) setTaint(cluster string, effect corev1.TaintEffect) {
	f.t.Helper()
	if _, _, err := f.api.EditCluster(f.ctx, cluster, func(cl *v1alpha1.Cluster) (bool, error) {
		var changed bool
		cl.Spec.Taints, changed = client.Cordon(cl.Spec.Taints, effect)
		return changed, nil
	}); err != nil {
		f.t.Fatal(err)
	}
}

// TestDrainBySavepoint is issue 25's drain: five FlinkDeployments on a
// move to b, two at a time, each restoring exactly the savepoint its job
// stopped with on a, never two copies running at once; a sixth, whose
// savepoint fails, keeps running on a and says so.
func TestDrainBySavepoint(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	names := []string{"wc-1", "wc-2", "wc-3", "wc-4", "wc-5"}
	const failing = "wc-fail"
	f.setTaint("b", corev1.TaintEffectNoSchedule) // so that everything lands on a
	f.sims["a"].Fail(f.ns, failing, flinksim.SavepointFails)
	for _, n := range append(names, failing) {
		f.submit(fmt.Sprintf(movable, n))
	}
	jobs := map[string]string{} // the job id each ran on a
	for _, n := range append(names, failing) {
		if r := running(f, n); r.Status.Cluster != "a" {
			t.Fatalf("%s runs on %s, not a", n, r.Status.Cluster)
		}
		sandboxtest.Eventually(t, wait, n+" running on a", func(context.Context) error {
			id, ok := f.sims["a"].Running(f.ns, n)
			if !ok {
				return fmt.Errorf("not running")
			}
			jobs[n] = id
			return nil
		})
	}
	f.setTaint("b", "")
	f.setTaint("a", corev1.TaintEffectNoSchedule) // drain's cordon

	// At most one copy runs at any moment: both simulators are watched
	// while the moves run.
	var twice atomic.Value
	stop := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		for {
			for _, n := range append(names, failing) {
				_, onA := f.sims["a"].Running(f.ns, n)
				_, onB := f.sims["b"].Running(f.ns, n)
				if onA && onB {
					twice.Store(n)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	work := make(chan string)
	var moving sync.WaitGroup
	results := sync.Map{}
	for range 2 {
		moving.Go(func() {
			for n := range work {
				r, err := f.api.Move(f.ctx, f.ns, n, "")
				if err != nil {
					results.Store(n, err)
					continue
				}
				ctx, cancel := context.WithTimeout(f.ctx, wait)
				done, err := f.api.WaitMoved(ctx, f.ns, n, r.Status.Move.At, 100*time.Millisecond, nil)
				cancel()
				if err != nil {
					results.Store(n, err)
					continue
				}
				results.Store(n, done)
			}
		})
	}
	for _, n := range append(names, failing) {
		work <- n
	}
	close(work)
	moving.Wait()
	close(stop)
	watching.Wait()
	if n := twice.Load(); n != nil {
		t.Errorf("%s ran on a and b at the same moment", n)
	}

	for _, n := range names {
		v, _ := results.Load(n)
		r, ok := v.(*v1alpha1.Runnable)
		if !ok {
			t.Errorf("%s: %v", n, v)
			continue
		}
		m := r.Status.Move
		if m.Step != v1alpha1.MoveDone || m.To != "b" || r.Status.Cluster != "b" {
			t.Errorf("%s: move %+v on %s: %s", n, m, r.Status.Cluster, r.Status.Message)
			continue
		}
		// The copy on b restores exactly the savepoint the job on a
		// stopped with: written by that job, reported by the operator.
		if !flink.WrittenBy(m.Savepoint, jobs[n]) {
			t.Errorf("%s: savepoint %q is not one of job %s", n, m.Savepoint, jobs[n])
		}
		if got := f.sims["b"].RestoredFrom(f.ns, n); got != m.Savepoint {
			t.Errorf("%s: the job on b restored %q, want the savepoint %q", n, got, m.Savepoint)
		}
		obj := f.object("b", n)
		if p, _, _ := unstructured.NestedString(obj.Object, "spec", "job", "initialSavepointPath"); p != m.Savepoint {
			t.Errorf("%s: initialSavepointPath on b %q, want %q", n, p, m.Savepoint)
		}
		if m.DowntimeSeconds == nil || *m.DowntimeSeconds < 0 || m.StoppedAt == nil || m.RunningAt == nil ||
			!strings.Contains(strings.Join(f.historySummaries(n), "\n"), fmt.Sprintf("downtime %.1f s", *m.DowntimeSeconds)) {
			t.Errorf("%s: no downtime recorded in the status and the audit log: %+v", n, m)
		}
		last := r.Status.Attempts[len(r.Status.Attempts)-1]
		prev := r.Status.Attempts[len(r.Status.Attempts)-2]
		if prev.Reason != v1alpha1.ReasonPlannedMove || prev.Cluster != "a" || last.Cluster != "b" || last.CarriedIn["restorePath"] != m.Savepoint {
			t.Errorf("%s: attempts %+v then %+v", n, prev, last)
		}
		h := strings.Join(f.history(n), ",")
		for _, a := range []string{"move", "move-savepoint", "move-handover", "moved"} {
			if !strings.Contains(","+h+",", ","+a+",") {
				t.Errorf("%s: history %s lacks %s", n, h, a)
			}
		}
	}
	// The old copies go once the new ones run.
	sandboxtest.Eventually(t, wait, "the stopped copies removed from a", func(context.Context) error {
		var left []string
		for _, o := range f.objects("a", flinkGVR) {
			if o.GetName() != failing {
				left = append(left, o.GetName())
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still on a: %v", left)
		}
		return nil
	})

	v, _ := results.Load(failing)
	r, ok := v.(*v1alpha1.Runnable)
	if !ok {
		t.Fatalf("%s: %v", failing, v)
	}
	if m := r.Status.Move; m.Step != v1alpha1.MoveFailed || r.Status.Cluster != "a" || r.Status.Phase != v1alpha1.PhaseRunning ||
		!strings.Contains(r.Status.Message, "failed to stop the job with a savepoint") || !strings.Contains(r.Status.Message, "keeps running there") {
		t.Errorf("%s: %s on %s, move %+v: %s", failing, r.Status.Phase, r.Status.Cluster, m, r.Status.Message)
	}
	if state, _, _ := unstructured.NestedString(f.object("a", failing).Object, "spec", "job", "state"); state != "running" {
		t.Errorf("%s: spec.job.state on a is %q, want it put back to running", failing, state)
	}
	if _, ok := f.sims["a"].Running(f.ns, failing); !ok {
		t.Errorf("%s: its job no longer runs on a", failing)
	}
	if _, ok := f.sims["b"].Running(f.ns, failing); ok {
		t.Errorf("%s: a copy runs on b", failing)
	}
	if h := strings.Join(f.historySummaries(failing), "\n"); !strings.Contains(h, "Savepoint Error") {
		t.Errorf("%s: the audit log does not say the savepoint failed:\n%s", failing, h)
	}

	// A second move while one is refused as the API says.
	code, err := f.api.Do(f.ctx, "POST", "/api/v1/runnables/"+f.ns+"/wc-1/move", nil, []byte(`{"to":"nowhere"}`), "application/json", nil)
	if code != 422 || err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("move to an unknown cluster: %d %v", code, err)
	}
	code, err = f.api.Do(f.ctx, "POST", "/api/v1/runnables/"+f.ns+"/wc-1/move", nil, []byte(`{"to":"a"}`), "application/json", nil)
	if code != 422 || err == nil || !strings.Contains(err.Error(), "cordon") {
		t.Errorf("move to a cordoned cluster: %d %v", code, err)
	}
}

// object reads the FlinkDeployment name on cluster.
func (f *farm) object(cluster, name string) *unstructured.Unstructured {
	f.t.Helper()
	o, err := f.dyn[cluster].Resource(flinkGVR).Namespace(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get %s on %s: %v", name, cluster, err)
	}
	return o
}
