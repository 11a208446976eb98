package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// jobRunnable is a Job that starts at once and runs until it is stopped.
// kwok moves a pod from one stage to the next after the delay its
// annotations give, and the jitter's too, since a jitter below the delay
// replaces it: without them a pod takes 2 to 10 s to turn ready, which
// would blur what purser's failover takes; with them it is ready in a
// fraction of a second and completes after an hour. Its placement allows
// clusters a and b; fmt fills in the name and the consistency.
const jobRunnable = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      backoffLimit: 0
      template:
        metadata:
          annotations:
            pod-create.stage.kwok.x-k8s.io/delay: "100ms"
            pod-create.stage.kwok.x-k8s.io/jitter-delay: "100ms"
            pod-ready.stage.kwok.x-k8s.io/delay: "100ms"
            pod-ready.stage.kwok.x-k8s.io/jitter-delay: "100ms"
            pod-complete.stage.kwok.x-k8s.io/delay: "1h"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1h"
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]
  placement:
    clusterAffinity: {clusterNames: [a, b]}
  failover:
    consistency: %s
`

// failoverBound is how long a cluster failover may take in these tests:
// the farm's NoExecute grace is 2 s and its agent lease plus margin 4 s,
// so a failover takes seconds; the bound only catches one that hangs
// (or waits for something it should not), never a slow machine.
const failoverBound = time.Minute

// A cluster whose kube-apiserver stops is marked Unknown and tainted; once
// the NoExecute grace is over, an AtLeastOne Job on it runs on the other
// cluster at once, without waiting for the agent's lease, and the copy it
// left behind is deleted when the cluster is back.
func TestClusterFailoverMovesAJob(t *testing.T) {
	a := env.Clusters(t)[0]
	b := env.Dedicated(t, false)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: a}, {name: "b", sandbox: b}})
	f.startOn("b", fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtLeastOne))
	if n := len(f.objects("b", jobsGVR)); n != 1 {
		t.Fatalf("%d Jobs on b, want 1", n)
	}
	conditionsBefore := len(f.audit(url.Values{"kind": {v1alpha1.KindCluster}, "name": {"b"}, "action": {clusters.ActionCondition}}))

	stopped := time.Now()
	b.StopAPIServer()
	c := f.waitCluster("b", "unreachable with a NoExecute taint", func(c *v1alpha1.Cluster) bool {
		return hasTaint(c, v1alpha1.TaintUnreachable, corev1.TaintEffectNoExecute)
	})
	ready := clusters.ReadyCondition(c.Status)
	if ready == nil || ready.Status != metav1.ConditionUnknown || ready.Reason != clusters.ReasonAPIServerUnreachable {
		t.Errorf("Ready condition of b with its kube-apiserver stopped: %+v", ready)
	}
	if !hasTaint(c, v1alpha1.TaintUnreachable, corev1.TaintEffectNoSchedule) {
		t.Errorf("b has no %s:NoSchedule taint: %+v", v1alpha1.TaintUnreachable, c.Status.Taints)
	}
	t.Logf("b tainted NoExecute %s after its kube-apiserver was stopped", time.Since(stopped).Round(time.Millisecond))

	r := f.waitFor("report", "running on a", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "a" && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
	took := time.Since(stopped)
	t.Logf("failed over from b to a in %s (kube-apiserver stopped to Running on a)", took.Round(time.Millisecond))
	if took > failoverBound {
		t.Errorf("the failover took %s, more than %s", took, failoverBound)
	}
	if n := len(r.Status.Attempts); n != 2 {
		t.Fatalf("%d attempts, want 2: %+v", n, r.Status.Attempts)
	}
	first := r.Status.Attempts[0]
	if first.Cluster != "b" || first.Result != attempt.ResultEvicted || first.Reason != failover.ReasonClusterUnreachable ||
		first.Cleanup != store.CleanupPending {
		t.Errorf("attempt 1 while b is down: %+v; want on b, Evicted, ClusterUnreachable, cleanup Pending", first)
	}
	if second := r.Status.Attempts[1]; second.Cluster != "a" || second.EndedAt != nil {
		t.Errorf("attempt 2: %+v", second)
	}
	if n := len(f.objects("a", jobsGVR)); n != 1 {
		t.Errorf("%d Jobs on a, want 1", n)
	}

	// b comes back: its old copy goes, and b turns Ready without taints.
	if err := b.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	r = f.waitFor("report", "with attempt 1 cleaned up", func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) > 0 && r.Status.Attempts[0].Cleanup == store.CleanupDone
	})
	if n := len(f.objects("b", jobsGVR)); n != 0 {
		t.Errorf("%d Jobs left on b after the cleanup", n)
	}
	if r.Status.Cluster != "a" || r.Status.Phase != v1alpha1.PhaseRunning || len(r.Status.Attempts) != 2 {
		t.Errorf("after b came back: cluster %s, phase %s, %d attempts", r.Status.Cluster, r.Status.Phase, len(r.Status.Attempts))
	}
	f.waitCluster("b", "Ready again without taints", func(c *v1alpha1.Cluster) bool {
		ready := clusters.ReadyCondition(c.Status)
		return ready != nil && ready.Status == metav1.ConditionTrue && len(c.Status.Taints) == 0
	})
	h := f.history("report")
	for _, action := range []string{"place", "evict", "purge"} {
		if !slices.Contains(h, action) {
			t.Errorf("history %v has no %q", h, action)
		}
	}
	// Down, then up: at least two changes of b's condition are recorded.
	if n := len(f.audit(url.Values{"kind": {v1alpha1.KindCluster}, "name": {"b"}, "action": {clusters.ActionCondition}})); n < conditionsBefore+2 {
		t.Errorf("%d %s entries for b after its outage, want at least %d", n, clusters.ActionCondition, conditionsBefore+2)
	}
}

// A runnable on a cluster that is not Ready reads health Unknown, from the
// first judgement that the cluster is not Ready, with a message that names
// the cluster's state and what purser waits for; it tolerates the
// cluster's NoExecute taint here, so it stays. When the cluster is Ready
// again, its health is what was last observed of its object (Healthy: the
// Job ran on through the outage), and the message says so.
func TestNotReadyClusterMakesHealthUnknown(t *testing.T) {
	b := env.Dedicated(t, false)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "b", sandbox: b}})
	// It tolerates an outage of its cluster.
	manifest := strings.Replace(fmt.Sprintf(jobRunnable, "steady", v1alpha1.ConsistencyAtLeastOne),
		"    clusterAffinity: {clusterNames: [a, b]}\n",
		"    clusterAffinity: {clusterNames: [a, b]}\n    clusterTolerations: [{key: "+v1alpha1.TaintUnreachable+", operator: Exists}]\n", 1)
	f.submit(manifest)
	f.waitFor("steady", "running Healthy on b", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "b" && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})

	b.StopAPIServer()
	c := f.waitCluster("b", "not Ready", func(c *v1alpha1.Cluster) bool {
		ready := clusters.ReadyCondition(c.Status)
		return ready != nil && ready.Status != metav1.ConditionTrue && ready.Reason != clusters.ReasonNotProbedYet
	})
	judged := clusters.ReadyCondition(c.Status).LastTransitionTime
	r := f.waitFor("steady", "health Unknown naming the cluster", func(r *v1alpha1.Runnable) bool {
		return r.Status.Health == v1alpha1.HealthUnknown && r.Status.Waiting == v1alpha1.WaitingClusterNotReady
	})
	for _, want := range []string{"cluster b is not Ready (" + clusters.ReasonAPIServerUnreachable + ") since", "what the runnable does there is not known"} {
		if !strings.Contains(r.Status.Message, want) {
			t.Errorf("message lacks %q: %s", want, r.Status.Message)
		}
	}
	if r.Status.Phase != v1alpha1.PhaseRunning || r.Status.Cluster != "b" || len(r.Status.Attempts) != 1 {
		t.Errorf("the runnable moved: phase %s on %s, %d attempts", r.Status.Phase, r.Status.Cluster, len(r.Status.Attempts))
	}
	t.Logf("health Unknown %s after b was judged not Ready", time.Since(judged).Round(time.Millisecond))

	if err := b.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	r = f.waitFor("steady", "Healthy again when b is Ready", func(r *v1alpha1.Runnable) bool {
		return r.Status.Health == v1alpha1.HealthHealthy && r.Status.Waiting == ""
	})
	if !strings.Contains(r.Status.Message, "cluster b answers again and is Ready") || len(r.Status.Attempts) != 1 {
		t.Errorf("after b came back: %q, %d attempts", r.Status.Message, len(r.Status.Attempts))
	}
}

// A kube-apiserver that the control plane loses for less than the failure
// threshold, again and again, changes nothing: the cluster stays Ready,
// nothing is written, nothing moves.
func TestFlappingClusterCausesNoEviction(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) { testFlapping(t, eng.NewDSN(t)) })
	}
}

func testFlapping(t *testing.T, dsn string) {
	cs := env.Clusters(t)
	proxy := newProxy(t, cs[1].APIServerAddr())
	f := newFarm(t, dsn, []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1], apiServer: "https://" + proxy.Addr()}})
	f.startOn("b", fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne))
	f.waitCluster("b", "Ready", func(c *v1alpha1.Cluster) bool {
		ready := clusters.ReadyCondition(c.Status)
		return ready != nil && ready.Status == metav1.ConditionTrue
	})
	bHistory := url.Values{"kind": {v1alpha1.KindCluster}, "name": {"b"}}
	before := f.audit(bHistory)

	// Three failed probes in a row are needed. The control plane's way to
	// b is cut, and restored from the health monitor's goroutine as soon
	// as a probe through it failed, before the next probe; it is cut again
	// once a probe succeeded. So probes fail one at a time, however slow
	// the machine, and everything else that reaches b through the proxy
	// (the submitter, the failover controller) loses it just as often.
	f.probes.setOnFailure("b", func() {
		if err := proxy.Restore(); err != nil {
			t.Errorf("restore the proxy: %v", err)
		}
	})
	const cycles = 8
	for range cycles {
		from := f.probes.count("b")
		proxy.Cut()
		f.probes.wait(t, "b", from, probe.Unreachable)
		f.probes.wait(t, "b", from, probe.OK)
	}
	f.probes.setOnFailure("b", nil)
	// Once the NoExecute grace has passed, a pass of the failover
	// controller has seen whatever the flapping caused.
	f.passedAfter(time.Now().Add(3 * time.Second))

	for _, e := range f.audit(bHistory)[len(before):] {
		t.Errorf("flapping wrote an audit entry for b: %s %s", e.Action, e.Summary)
	}
	c := f.clusterInfo("b")
	if ready := clusters.ReadyCondition(c.Status); ready == nil || ready.Status != metav1.ConditionTrue || len(c.Status.Taints) != 0 {
		y, _ := yaml.Marshal(c.Status)
		t.Errorf("b after flapping:\n%s", y)
	}
	r := f.runnable("report")
	if r.Status.Cluster != "b" || r.Status.Phase != v1alpha1.PhaseRunning || len(r.Status.Attempts) != 1 || r.Status.Attempts[0].EndedAt != nil {
		y, _ := yaml.Marshal(r.Status)
		t.Errorf("the runnable moved or ended:\n%s", y)
	}
	if h := f.history("report"); slices.Contains(h, "evict") {
		t.Errorf("history of the runnable: %v", h)
	}
	jobs := f.objects("b", jobsGVR)
	if len(jobs) != 1 || suspended(jobs[0].Object) {
		t.Errorf("Jobs on b after flapping: %d, suspended %v", len(jobs), len(jobs) == 1 && suspended(jobs[0].Object))
	}
}

// A runnable that should move but has nowhere to go gets the verdict's
// message as its status message; the next pass decides from that status
// and must come to the same message, or the controller would rewrite a
// longer one on every pass (and, on PostgreSQL, starve the ingester's
// writes to the runnable with conflicts).
func TestWaitingMessageIsStable(t *testing.T) {
	toleration := int64(3)
	spec := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{
		Application: &v1alpha1.ApplicationFailover{TolerationSeconds: &toleration}}}
	now := time.Now()
	since := now.Add(-time.Minute)
	ran := since.Add(-time.Minute) // it ran Healthy before: tolerationSeconds applies
	st := &v1alpha1.RunnableStatus{Health: v1alpha1.HealthUnhealthy, UnhealthySince: &since, HealthySince: &ran,
		Message: "FlinkDeployment t/wordcount is running on a"}
	a := failover.Cluster{Name: "a", Reachable: true}
	timing := failover.Timing{AgentLease: agentLease, FencingMargin: margin}
	first := failover.Decide(spec, st, a, now, timing)
	if !first.Evict || first.Message == "" {
		t.Fatalf("verdict %+v, want an eviction", first)
	}
	// What the controller writes when no other cluster is eligible.
	st.Message = first.Message + "; it stays on a because no other cluster is eligible (b: excluded)"
	if again := failover.Decide(spec, st, a, now.Add(time.Second), timing); again.Message != first.Message {
		t.Errorf("the message changed from one pass to the next:\n%q\n%q", first.Message, again.Message)
	}
}

func hasTaint(c *v1alpha1.Cluster, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(c.Status.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// entry is an audit entry as the history API returns it.
type entry struct {
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`
	Action  string    `json:"action"`
	Summary string    `json:"summary"`
}

// audit returns the audit entries that a history query (such as
// kind=Cluster&name=b) selects, oldest first.
func (f *farm) audit(query url.Values) []entry {
	f.t.Helper()
	var out struct {
		Items []entry `json:"items"`
	}
	f.do(http.MethodGet, "/api/v1/history?"+query.Encode(), nil, &out)
	return out.Items
}

// clusterInfo reads one cluster through the API.
func (f *farm) clusterInfo(name string) *v1alpha1.Cluster {
	f.t.Helper()
	var c v1alpha1.Cluster
	f.do(http.MethodGet, "/api/v1/clusters/"+name, nil, &c)
	return &c
}

// waitCluster polls a cluster through the API until ok says so, and
// fails the test with its last status after wait.
func (f *farm) waitCluster(name, what string, ok func(*v1alpha1.Cluster) bool) *v1alpha1.Cluster {
	f.t.Helper()
	var c *v1alpha1.Cluster
	sandboxtest.Eventually(f.t, wait, "cluster "+name+" "+what, func(context.Context) error {
		if c = f.clusterInfo(name); ok(c) {
			return nil
		}
		y, _ := yaml.Marshal(c.Status)
		return fmt.Errorf("status:\n%s", y)
	})
	return c
}

// setTaints replaces a cluster's spec.taints through the API; its
// kubeconfig stays.
func (f *farm) setTaints(name string, taints ...corev1.Taint) {
	f.t.Helper()
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"taints": taints},
	}
	f.do(http.MethodPut, "/api/v1/clusters/"+name, body, nil)
}

// startOn submits runnables whose placement allows other clusters too,
// and makes their first attempts land on cluster: every other cluster is
// tainted NoSchedule until they run there, then the taints go.
func (f *farm) startOn(cluster string, manifests ...string) {
	f.t.Helper()
	hold := corev1.Taint{Key: "test.purser.io/hold", Effect: corev1.TaintEffectNoSchedule}
	for name := range f.dyn {
		if name != cluster {
			f.setTaints(name, hold)
		}
	}
	var names []string
	for _, m := range manifests {
		names = append(names, f.submit(m))
	}
	for _, name := range names {
		if r := running(f, name); r.Status.Cluster != cluster {
			f.t.Fatalf("runnable %s runs on %s, want %s", name, r.Status.Cluster, cluster)
		}
	}
	for name := range f.dyn {
		if name != cluster {
			f.setTaints(name)
		}
	}
}

// suspended reports whether an object purser placed is stopped the way an
// agent fences it: a Job with spec.suspend, a FlinkDeployment whose job
// is suspended.
func suspended(obj map[string]any) bool {
	switch obj["kind"] {
	case "Job":
		s, _, _ := unstructured.NestedBool(obj, "spec", "suspend")
		return s
	case "FlinkDeployment":
		state, _, _ := unstructured.NestedString(obj, "spec", "job", "state")
		return state == "suspended"
	}
	return false
}
