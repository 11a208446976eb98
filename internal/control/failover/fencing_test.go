package failover_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Invariant 3: a runnable with consistency AtMostOne never has two live
// copies, even while its cluster is cut off. Two ways of being cut off:
//
//   - agent cut off: b's agent loses NATS while the control plane still
//     reaches b's kube-apiserver. b turns NotReady (AgentLeaseExpired),
//     which is not Unknown, so the controller deletes the old copy itself
//     before placing the runnable on a.
//   - cluster cut off: the control plane loses b's kube-apiserver too. It
//     can delete nothing there, so it waits for the agent's lease and the
//     margin to run out, trusting the agent to have suspended its copy;
//     the copy is removed once b is back.
//
// A watcher reads both clusters' kube-apiservers directly (around the
// proxies) all along.
func TestFencingKeepsAtMostOneCopy(t *testing.T) {
	t.Run("agent cut off", func(t *testing.T) { testFencing(t, sqliteDSN(t), false) })
	for _, eng := range storetest.Engines() {
		t.Run("cluster cut off/"+eng.Name, func(t *testing.T) { testFencing(t, eng.NewDSN(t), true) })
	}
}

func testFencing(t *testing.T, dsn string, clusterCutOff bool) {
	cs := env.Clusters(t)
	f := newFarm(t, dsn, []cluster{{name: "a", sandbox: cs[0]}})
	natsProxy := f.natsProxy()
	b := cluster{name: "b", sandbox: cs[1], natsURL: "nats://" + natsProxy.Addr()}
	var apiProxy *sandbox.Proxy
	if clusterCutOff {
		apiProxy = newProxy(t, cs[1].APIServerAddr())
		b.apiServer = "https://" + apiProxy.Addr()
	}
	f.register(b, testPeriods)

	job := fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne)
	flink := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	f.startOn("b", job, flink)
	names := []string{"report", "wordcount"}
	jobID, _, _ := unstructured.NestedString(f.runnable("wordcount").Status.Result, "jobStatus", "jobId")

	w := watchCopies(t, f, []string{"b", "a"}, []schema.GroupVersionResource{jobsGVR, flinkGVR})
	w.waitRounds(t, 3)

	cut := time.Now()
	if clusterCutOff {
		apiProxy.Cut()
	}
	natsProxy.Cut()

	// Reachable, b's copy goes before the next is placed; cut off, it
	// waits for b to be back.
	wantReason, wantCleanup := failover.ReasonClusterNotReady, store.CleanupDone
	if clusterCutOff {
		wantReason, wantCleanup = failover.ReasonClusterUnreachable, store.CleanupPending
	}
	for _, name := range names {
		r := f.waitFor(name, "running on a", func(r *v1alpha1.Runnable) bool {
			return r.Status.Cluster == "a" && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
		})
		t.Logf("%s runs on a %s after the cut", name, time.Since(cut).Round(time.Millisecond))
		if n := len(r.Status.Attempts); n != 2 {
			t.Fatalf("%s: %d attempts, want 2: %+v", name, n, r.Status.Attempts)
		}
		first := r.Status.Attempts[0]
		if first.Cluster != "b" || first.Result != attempt.ResultEvicted || first.Reason != wantReason {
			t.Errorf("%s: attempt 1 %+v; want evicted from b (%s)", name, first, wantReason)
		}
		if first.Cleanup != wantCleanup {
			t.Errorf("%s: attempt 1 cleanup %q, want %q", name, first.Cleanup, wantCleanup)
		}
	}
	if got := f.runnable("wordcount").Status.Preserved["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("preserved job id %q, want %q", got, jobID)
	}

	c := f.clusterInfo("b")
	ready := clusters.ReadyCondition(c.Status)
	if clusterCutOff {
		if ready == nil || ready.Reason != clusters.ReasonAPIServerUnreachable {
			t.Errorf("b cut off: Ready %+v", ready)
		}
		// The agent was trusted: nothing was placed on a before its lease,
		// counted from its last heartbeat, and the margin were over.
		if c.Status.Agent == nil || c.Status.Agent.LastHeartbeat == nil {
			t.Fatalf("b has no agent heartbeat: %+v", c.Status.Agent)
		}
		fenced := c.Status.Agent.LastHeartbeat.Add(agentLease + margin)
		for _, name := range names {
			if started := f.runnable(name).Status.Attempts[1].StartedAt; started.Before(fenced) {
				t.Errorf("%s: attempt 2 started at %s, before b's agent had certainly fenced (%s)", name,
					started.Format(time.RFC3339Nano), fenced.Format(time.RFC3339Nano))
			}
		}
		// b's copies are still there, suspended by the agent.
		for _, gvr := range []schema.GroupVersionResource{jobsGVR, flinkGVR} {
			for _, obj := range f.objects("b", gvr) {
				if !suspended(obj.Object) {
					t.Errorf("%s %s on b is not suspended while b is cut off", obj.GetKind(), obj.GetName())
				}
			}
		}
	} else {
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != clusters.ReasonAgentLeaseExpired {
			t.Errorf("b with its agent cut off: Ready %+v", ready)
		}
		for _, gvr := range []schema.GroupVersionResource{jobsGVR, flinkGVR} {
			if objs := f.objects("b", gvr); len(objs) != 0 {
				t.Errorf("%d %s left on b", len(objs), gvr.Resource)
			}
		}
	}

	restored := time.Now()
	if err := natsProxy.Restore(); err != nil {
		t.Fatal(err)
	}
	if clusterCutOff {
		if err := apiProxy.Restore(); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCluster("b", "Ready with its agent reporting again", func(c *v1alpha1.Cluster) bool {
		ready := clusters.ReadyCondition(c.Status)
		return ready != nil && ready.Status == metav1.ConditionTrue && len(c.Status.Taints) == 0 &&
			c.Status.Agent != nil && c.Status.Agent.LastHeartbeat != nil && c.Status.Agent.LastHeartbeat.After(restored)
	})
	for _, name := range names {
		f.waitFor(name, "with attempt 1 cleaned up", func(r *v1alpha1.Runnable) bool {
			return len(r.Status.Attempts) == 2 && r.Status.Attempts[0].Cleanup == store.CleanupDone
		})
	}
	w.waitRounds(t, 5)
	w.stop()

	w.report(t, cut)
	for _, name := range names {
		r := f.runnable(name)
		if r.Status.Cluster != "a" || r.Status.Phase != v1alpha1.PhaseRunning || len(r.Status.Attempts) != 2 {
			t.Errorf("%s after the restore: cluster %s, phase %s, %d attempts", name, r.Status.Cluster, r.Status.Phase, len(r.Status.Attempts))
		}
		if h := f.history(name); !slices.Contains(h, "evict") || !slices.Contains(h, "purge") {
			t.Errorf("%s: history %v lacks evict or purge", name, h)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{jobsGVR, flinkGVR} {
		if objs := f.objects("b", gvr); len(objs) != 0 {
			t.Errorf("%d %s left on b after the restore", len(objs), gvr.Resource)
		}
		objs := f.objects("a", gvr)
		if len(objs) != 1 || suspended(objs[0].Object) {
			t.Errorf("%s on a after the restore: %d, want one live copy", gvr.Resource, len(objs))
		}
	}
}

// TestAtMostOneCreateLandingLate: a create sent into a partition that TCP
// outlasts lands when the partition heals, possibly after the cluster's
// agent, cut off, fenced what it knew; and the cluster may still look lost
// to the control plane at that moment, as in the DC soak that found it.
// The runnable must not move until such a create can no longer land and
// the agent has stopped what it made: the copy made by the late create is
// suspended before the next attempt's copy runs.
//
// b's kube-apiserver is held (connections open, nothing delivered) while
// the runnable is placed there, and its agent is cut off from NATS. Once
// b is lost and its agent's lease and the margin are over, the hold is
// released towards b only: the create lands, its answer never comes back,
// and b still looks lost. The runnable stays Scheduled, and the controller
// moves it once that create can no longer land.
func TestAtMostOneCreateLandingLate(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}})
	natsProxy := f.natsProxy()
	apiProxy := newProxy(t, cs[1].APIServerAddr())
	f.register(cluster{name: "b", sandbox: cs[1], natsURL: "nats://" + natsProxy.Addr(), apiServer: "https://" + apiProxy.Addr()}, testPeriods)
	// A runnable already on b, and only allowed there: the submitter's
	// connection to b is open, as in a farm at work, and the held create
	// travels on it.
	f.startOn("b", fmt.Sprintf(flinkRunnable, "b"))

	w := watchCopies(t, f, []string{"b", "a"}, []schema.GroupVersionResource{jobsGVR})
	w.waitRounds(t, 3)
	hold := corev1.Taint{Key: "test.purser.io/hold", Effect: corev1.TaintEffectNoSchedule}
	f.setTaints("a", hold)
	landed := f.watchCreated("b", jobsGVR, "late")
	cut := time.Now()
	apiProxy.Hold()
	natsProxy.Cut()
	name := f.submit(fmt.Sprintf(jobRunnable, "late", v1alpha1.ConsistencyAtMostOne))
	f.waitFor(name, "placed on b", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "b" && len(r.Status.Attempts) == 1
	})
	f.setTaints("a") // a may take it now, once it may leave b

	f.waitCluster("b", "lost, with its agent's lease and the margin over", func(c *v1alpha1.Cluster) bool {
		lost := slices.ContainsFunc(c.Status.Taints, func(t corev1.Taint) bool {
			return t.Key == v1alpha1.TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute
		})
		hb := c.Status.Agent
		return lost && hb != nil && hb.LastHeartbeat != nil && time.Since(*hb.LastHeartbeat) > agentLease+margin
	})
	released := time.Now()
	apiProxy.ReleaseToTarget()
	select {
	case at := <-landed:
		t.Logf("the held create landed on b %s after the release, %s after the cut",
			at.Sub(released).Round(time.Millisecond), at.Sub(cut).Round(time.Millisecond))
	case <-time.After(wait):
		t.Fatal("the held create never landed on b")
	}

	// It waits for the create, and says so.
	f.waitFor(name, "waiting for the late create", func(r *v1alpha1.Runnable) bool {
		return r.Status.Phase == v1alpha1.PhaseScheduled && r.Status.Waiting == v1alpha1.WaitingFencing &&
			strings.Contains(r.Status.Message, "a create of attempt 1 was sent to b")
	})
	r := f.waitFor(name, "running on a", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "a" && r.Status.Phase == v1alpha1.PhaseRunning
	})
	t.Logf("runs on a %s after the cut", time.Since(cut).Round(time.Millisecond))
	// Moved by the controller: the submitter neither gave up on attempt 1
	// nor sent anything more once b was lost.
	if a := r.Status.Attempts; len(a) != 2 || a[0].Result != attempt.ResultEvicted || a[0].Reason != failover.ReasonClusterUnreachable {
		t.Fatalf("attempts %+v, want attempt 1 evicted from b (%s) and attempt 2", r.Status.Attempts, failover.ReasonClusterUnreachable)
	}
	w.waitRounds(t, 3)

	// The copy the late create made on b stopped before the one on a ran.
	var bStopped, aLive time.Time
	w.mu.Lock()
	for _, c := range w.changes {
		switch {
		case c.key.cluster == "b" && c.key.name == "late" && c.state != "live" && bStopped.IsZero():
			bStopped = c.at
		case c.key.cluster == "a" && c.key.name == "late" && c.state == "live" && aLive.IsZero():
			aLive = c.at
		}
	}
	w.mu.Unlock()
	if bStopped.IsZero() || aLive.IsZero() || aLive.Before(bStopped) {
		t.Errorf("the copy on b stopped at %+.3fs, the copy on a was live at %+.3fs; want b's stopped first",
			bStopped.Sub(cut).Seconds(), aLive.Sub(cut).Seconds())
	}

	apiProxy.Release()
	if err := natsProxy.Restore(); err != nil {
		t.Fatal(err)
	}
	f.waitFor(name, "with attempt 1 cleaned up", func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 2 && r.Status.Attempts[0].Cleanup == store.CleanupDone
	})
	w.waitRounds(t, 3)
	w.stop()
	w.report(t, cut)
	if h := f.history(name); !slices.Contains(h, "evict") {
		t.Errorf("history %v lacks the eviction", h)
	}
}

// natsProxy is a proxy in front of the farm's NATS, for an agent that a
// test cuts off from the stream.
func (f *farm) natsProxy() *sandbox.Proxy {
	f.t.Helper()
	u, err := url.Parse(f.nats.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	return newProxy(f.t, u.Host)
}

// newProxy puts a proxy in front of target that a test can cut and
// restore (its port comes from localport, so nothing takes it meanwhile).
func newProxy(t testing.TB, target string) *sandbox.Proxy {
	t.Helper()
	p, err := sandbox.NewProxy("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// copyWatch reads the copies of the farm's runnables on every cluster
// again and again, straight from the kube-apiservers, and records the
// moments when two copies of one runnable were live at once. A copy is
// live when it exists and is not suspended.
//
// Reads of different clusters cannot happen at one instant, so each round
// reads every cluster twice, in the same order. A copy live in both reads
// of its cluster (the same object, and suspension is one-way) was live in
// between, while every other cluster was read once: another live copy of
// the same runnable seen there proves an overlap. Two copies seen live in
// one round without that proof are counted, not failed.
type copyWatch struct {
	f        *farm
	clusters []string
	gvrs     []schema.GroupVersionResource
	cancel   context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	rounds   int
	errors   int
	lastErr  error
	overlaps []string
	unproven int
	states   map[copyKey]string // the last state of each copy: live, suspended or gone
	changes  []copyChange
}

// copyKey is one object on one cluster.
type copyKey struct {
	cluster, kind, name string
	uid                 types.UID
}

func (k copyKey) String() string { return k.cluster + "/" + k.kind + "/" + k.name }

type copyChange struct {
	at    time.Time
	key   copyKey
	state string
}

// seen is one object in one read.
type seen struct {
	key      copyKey
	runnable string
	live     bool
}

func watchCopies(t *testing.T, f *farm, clusterNames []string, gvrs []schema.GroupVersionResource) *copyWatch {
	ctx, cancel := context.WithCancel(t.Context())
	w := &copyWatch{f: f, clusters: clusterNames, gvrs: gvrs, cancel: cancel, done: make(chan struct{}), states: map[copyKey]string{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.round(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// stop ends the watch and waits for it.
func (w *copyWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *copyWatch) round(ctx context.Context) {
	n := len(w.clusters)
	reads := make([][]seen, 2*n)
	for i := range reads {
		var err error
		if reads[i], err = w.read(ctx, w.clusters[i%n]); err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.errors++
				w.lastErr = err
				w.mu.Unlock()
			}
			return
		}
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds++
	for i := range n {
		w.track(now, w.clusters[i], reads[i+n])
		for _, x := range reads[i] {
			if !x.live || !slices.Contains(reads[i+n], x) {
				continue
			}
			for _, between := range reads[i+1 : i+n] {
				for _, y := range between {
					if y.live && y.runnable == x.runnable {
						w.overlaps = append(w.overlaps, fmt.Sprintf("%s: %s and %s live at once (round %d)",
							now.Format(time.RFC3339Nano), x.key, y.key, w.rounds))
					}
				}
			}
		}
	}
	live := map[string]int{}
	for _, x := range reads[n:] {
		for _, c := range x {
			if c.live {
				live[c.runnable]++
			}
		}
	}
	for _, count := range live {
		if count > 1 {
			w.unproven++
		}
	}
}

// track records how the copies on one cluster changed since its last read.
func (w *copyWatch) track(now time.Time, cluster string, objs []seen) {
	present := map[copyKey]bool{}
	for _, o := range objs {
		present[o.key] = true
		state := "suspended"
		if o.live {
			state = "live"
		}
		if w.states[o.key] != state {
			w.states[o.key] = state
			w.changes = append(w.changes, copyChange{at: now, key: o.key, state: state})
		}
	}
	for key, state := range w.states {
		if key.cluster == cluster && !present[key] && state != "gone" {
			w.states[key] = "gone"
			w.changes = append(w.changes, copyChange{at: now, key: key, state: "gone"})
		}
	}
}

func (w *copyWatch) read(ctx context.Context, cluster string) ([]seen, error) {
	var out []seen
	for _, gvr := range w.gvrs {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		list, err := w.f.dyn[cluster].Resource(gvr).Namespace(w.f.ns).List(lctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list %s on %s: %w", gvr.Resource, cluster, err)
		}
		for _, obj := range list.Items {
			out = append(out, seen{
				key:      copyKey{cluster: cluster, kind: obj.GetKind(), name: obj.GetName(), uid: obj.GetUID()},
				runnable: obj.GetLabels()[v1alpha1.LabelRunnableUID],
				live:     !suspended(obj.Object),
			})
		}
	}
	return out, nil
}

// waitRounds waits until the watch has completed n more rounds.
func (w *copyWatch) waitRounds(t *testing.T, n int) {
	t.Helper()
	w.mu.Lock()
	target := w.rounds + n
	w.mu.Unlock()
	sandboxtest.Eventually(t, wait, fmt.Sprintf("%d more rounds of the copy watch", n), func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.rounds < target && w.lastErr != nil {
			return fmt.Errorf("%d of %d rounds (%d failed reads, the last: %w)", w.rounds, target, w.errors, w.lastErr)
		}
		if w.rounds < target {
			return fmt.Errorf("%d of %d rounds", w.rounds, target)
		}
		return nil
	})
}

func (w *copyWatch) overlapCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.overlaps)
}

// report logs what the watch saw, relative to from, and fails the test on
// any proven overlap.
func (w *copyWatch) report(t *testing.T, from time.Time) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.changes {
		t.Logf("copy %s %s at %+.3fs", c.key, c.state, c.at.Sub(from).Seconds())
	}
	t.Logf("copy watch: %d rounds, %d failed reads, %d rounds with two copies live but no proof of overlap",
		w.rounds, w.errors, w.unproven)
	for _, o := range w.overlaps {
		t.Errorf("two live copies: %s", o)
	}
}

// The watch is the proof of the fencing test, so it is tested too: two
// live copies of one runnable are seen; once one of them is suspended,
// no more.
func TestCopyWatchSeesTwoLiveCopies(t *testing.T) {
	cs := env.Clusters(t)
	f := &farm{t: t, ns: "t-" + randomHex(4), dyn: map[string]dynamic.Interface{}}
	for i, name := range []string{"a", "b"} {
		var err error
		if f.dyn[name], err = dynamic.NewForConfig(cs[i].RESTConfig()); err != nil {
			t.Fatal(err)
		}
		if err := cs[i].EnsureNamespace(t.Context(), f.ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.dyn[name].Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).
				Delete(context.Background(), f.ns, metav1.DeleteOptions{})
		})
		job := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": "report", "labels": map[string]any{v1alpha1.LabelRunnableUID: "r-1"}},
			"spec": map[string]any{"suspend": name == "a", "template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "busybox"}}}}},
		}}
		if _, err := f.dyn[name].Resource(jobsGVR).Namespace(f.ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := watchCopies(t, f, []string{"a", "b"}, []schema.GroupVersionResource{jobsGVR})
	w.waitRounds(t, 3)
	if n := w.overlapCount(); n != 0 {
		t.Fatalf("%d overlaps while the copy on a is suspended", n)
	}
	patch := []byte(`{"spec":{"suspend":false}}`)
	if _, err := f.dyn["a"].Resource(jobsGVR).Namespace(f.ns).Patch(t.Context(), "report", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitRounds(t, 3)
	if n := w.overlapCount(); n == 0 {
		t.Fatal("two live copies, and the watch saw no overlap")
	}
}
