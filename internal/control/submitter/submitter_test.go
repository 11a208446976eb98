package submitter_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// checkCreated asserts that a Submitted runnable's object exists once, on
// the attempt's cluster, with purser's labels, and that the attempt and
// the audit log say so.
func checkCreated(t *testing.T, f *fixture, name string, gvrName string) *store.Attempt {
	t.Helper()
	rec, msg, attempts := f.waitPhase(name, v1alpha1.PhaseSubmitted)
	if len(attempts) != 1 {
		t.Fatalf("%s: %d attempts, want 1: %+v", name, len(attempts), attempts)
	}
	a := attempts[0]
	if a.Number != 1 || a.Cluster == "" || a.Cluster != rec.Cluster || a.ObjectUID == "" || a.EndedAt != nil {
		t.Errorf("%s: attempt %+v, runnable cluster %q", name, a, rec.Cluster)
	}
	gvr := jobs
	if gvrName == "workflows" {
		gvr = workflows
	}
	total := 0
	for cluster := range f.dyn {
		objs := f.objects(cluster, gvr, rec.UID)
		total += len(objs)
		if cluster != a.Cluster {
			if len(objs) != 0 {
				t.Errorf("%s: %d objects on %s, which was not chosen", name, len(objs), cluster)
			}
			continue
		}
		if len(objs) != 1 {
			t.Fatalf("%s: %d objects on %s, want 1", name, len(objs), cluster)
		}
		o := objs[0]
		want := map[string]string{
			v1alpha1.LabelRunnable: name, v1alpha1.LabelRunnableNamespace: f.ns,
			v1alpha1.LabelRunnableUID: rec.UID, v1alpha1.LabelAttempt: "1",
		}
		for k, v := range want {
			if o.GetLabels()[k] != v {
				t.Errorf("%s: label %s = %q, want %q", name, k, o.GetLabels()[k], v)
			}
		}
		if string(o.GetUID()) != a.ObjectUID {
			t.Errorf("%s: attempt records object uid %s, object has %s", name, a.ObjectUID, o.GetUID())
		}
	}
	if total != 1 {
		t.Errorf("%s: %d objects across clusters, want 1", name, total)
	}
	if !strings.Contains(msg, "created") {
		t.Errorf("%s: status message %q", name, msg)
	}
	if got := actions(f.audit(name)); !slices.Equal(got, []string{"submitter:place", "submitter:submit"}) {
		t.Errorf("%s: audit %v, want place then submit", name, got)
	}
	return a
}

func TestSubmitJobsAndWorkflows(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	reg := prometheus.NewRegistry()
	f.start(submitter.Config{Registerer: reg})
	f.submit("job-a", runnableSpec{template: job(true)})
	f.submit("job-b", runnableSpec{template: job(true)})
	named := job(true)
	named["metadata"] = map[string]any{"name": "custom-name", "labels": map[string]any{"team": "a"}}
	f.submit("job-named", runnableSpec{template: named})
	f.submit("wf", runnableSpec{template: workflow()})

	a := checkCreated(t, f, "job-a", "jobs")
	b := checkCreated(t, f, "job-b", "jobs")
	checkCreated(t, f, "wf", "workflows")
	n := checkCreated(t, f, "job-named", "jobs")
	if a.Cluster == b.Cluster {
		t.Logf("job-a and job-b both on %s (least loaded is decided per placement)", a.Cluster)
	}
	obj, err := f.dyn[n.Cluster].Resource(jobs).Namespace(f.ns).Get(t.Context(), "custom-name", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("template's own name not used: %v", err)
	}
	if obj.GetLabels()["team"] != "a" {
		t.Errorf("template labels lost: %v", obj.GetLabels())
	}
	// The counters go up just after the commit that the phase shows.
	for _, name := range []string{"purser_submitter_attempts_total", "purser_submitter_outcomes_total"} {
		sandboxtest.Eventually(t, wait, name, func(context.Context) error {
			if got := metricSum(t, reg, name); got != 4 {
				return fmt.Errorf("%v, want 4", got)
			}
			return nil
		})
	}
}

// metricSum adds up every series of a counter family.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestStreamOutage stops NATS under a running submitter whose rescan is
// too slow to matter: a second submitter that only rescans places what is
// accepted during the outage (nothing depends on a message), and once the
// stream is back the first one consumes messages again.
func TestStreamOutage(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{RescanInterval: time.Hour}) // runs only at start
	f.submit("before", runnableSpec{template: job(true)})
	checkCreated(t, f, "before", "jobs")

	f.nats.Stop()
	stopRescanner := f.start(submitter.Config{RescanInterval: time.Second})
	// Stored as the API would, but its message cannot be published.
	doc := `{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job","spec":{"backoffLimit":0,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"busybox"}]}}}}}}`
	err := f.store.Tx(t.Context(), func(tx *store.Tx) error {
		return tx.Runnables().Create(t.Context(), &store.Runnable{
			Namespace: f.ns, Name: "during", UID: "uid-during-" + randomHex(4), Generation: 1, Spec: []byte(doc),
			SpecHash: "h", Phase: string(v1alpha1.PhaseQueued), Submitter: "alice",
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCreated(t, f, "during", "jobs")
	stopRescanner()

	f.nats.Restart()
	f.submit("after", runnableSpec{template: job(true)})
	checkCreated(t, f, "after", "jobs")
}

func TestAffinityAndExclusion(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{})
	cases := map[string]struct {
		placement v1alpha1.Placement
		want      string
	}{
		"names":    {onCluster("sandbox-2"), "sandbox-2"},
		"exclude":  {v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"sandbox-1"}}}, "sandbox-2"},
		"selector": {v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc-1"}}}}, "sandbox-1"},
	}
	for name, c := range cases {
		for i := range 3 {
			f.submit(fmt.Sprintf("%s-%d", name, i), runnableSpec{template: job(true), placement: c.placement})
		}
	}
	for name, c := range cases {
		for i := range 3 {
			a := checkCreated(t, f, fmt.Sprintf("%s-%d", name, i), "jobs")
			if a.Cluster != c.want {
				t.Errorf("%s-%d placed on %s, want %s", name, i, a.Cluster, c.want)
			}
		}
	}
	// A placement nothing matches waits, saying why.
	f.submit("nowhere", runnableSpec{template: job(true), placement: onCluster("no-such-cluster")})
	sandboxtest.Eventually(t, wait, "message on a runnable with no eligible cluster", func(context.Context) error {
		rec, msg, _ := f.get("nowhere")
		if rec.Phase != string(v1alpha1.PhaseQueued) || !strings.Contains(msg, "not in clusterNames") {
			return fmt.Errorf("phase %s, message %q", rec.Phase, msg)
		}
		return nil
	})
}

func TestDeadlineExpires(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{})
	past := time.Now().Add(-time.Minute).UTC()
	f.submit("late", runnableSpec{template: job(true), deadline: &past})
	_, msg, attempts := f.waitPhase("late", v1alpha1.PhaseExpired)
	if !strings.Contains(msg, "never created") || len(attempts) != 0 {
		t.Errorf("message %q, attempts %+v", msg, attempts)
	}
	rec, _, _ := f.get("late")
	for cluster := range f.dyn {
		if objs := f.objects(cluster, jobs, rec.UID); len(objs) != 0 {
			t.Errorf("expired runnable created on %s", cluster)
		}
	}
	if got := actions(f.audit("late")); !slices.Equal(got, []string{"submitter:expire"}) {
		t.Errorf("audit %v", got)
	}
}

func TestForeignObjectIsLeftAlone(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	if err := cs[0].EnsureNamespace(t.Context(), f.ns); err != nil {
		t.Fatal(err)
	}
	foreign := &unstructured.Unstructured{Object: job(true)}
	foreign.SetName("taken")
	foreign.SetLabels(map[string]string{"owner": "someone-else"})
	created, err := f.dyn[cs[0].Name()].Resource(jobs).Namespace(f.ns).Create(t.Context(), foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.start(submitter.Config{})
	f.submit("taken", runnableSpec{template: job(true), placement: onCluster(cs[0].Name())})
	_, msg, attempts := f.waitPhase("taken", v1alpha1.PhaseFailed)
	if !strings.Contains(msg, "was not created by purser") || !strings.Contains(msg, "left untouched") {
		t.Errorf("message %q", msg)
	}
	if len(attempts) != 1 || attempts[0].Result != "Failed" || attempts[0].Reason != "ForeignObject" || attempts[0].EndedAt == nil {
		t.Errorf("attempts %+v", attempts)
	}
	after, err := f.dyn[cs[0].Name()].Resource(jobs).Namespace(f.ns).Get(t.Context(), "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Job controller updates its status, so the resourceVersion moves;
	// the object itself (generation, labels) must not.
	if after.GetUID() != created.GetUID() || after.GetGeneration() != created.GetGeneration() ||
		after.GetLabels()[v1alpha1.LabelRunnableUID] != "" || after.GetLabels()["owner"] != "someone-else" {
		t.Errorf("foreign object was changed: %v -> %v", created.Object["metadata"], after.Object["metadata"])
	}
	if got := actions(f.audit("taken")); !slices.Equal(got, []string{"submitter:place", "submitter:fail"}) {
		t.Errorf("audit %v", got)
	}
}

func TestInvalidTemplateFails(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{})
	f.submit("no-containers", runnableSpec{template: job(false)})
	_, msg, attempts := f.waitPhase("no-containers", v1alpha1.PhaseFailed)
	// The API server's own words, which name the field.
	if !strings.Contains(msg, "containers") || !strings.Contains(msg, "Required value") {
		t.Errorf("message %q", msg)
	}
	if len(attempts) != 1 || attempts[0].Reason != "Invalid" {
		t.Errorf("attempts %+v", attempts)
	}
}

func TestCancelDeletesObject(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{})
	f.submit("doomed", runnableSpec{template: workflow()})
	a := checkCreated(t, f, "doomed", "workflows")
	rec, _, _ := f.get("doomed")
	f.cancel("doomed")
	sandboxtest.Eventually(t, wait, "object deleted and attempt closed", func(context.Context) error {
		if objs := f.objects(a.Cluster, workflows, rec.UID); len(objs) != 0 {
			return fmt.Errorf("%d objects left", len(objs))
		}
		_, _, attempts := f.get("doomed")
		if attempts[0].EndedAt == nil || attempts[0].Result != "Cancelled" {
			return fmt.Errorf("attempt %+v", attempts[0])
		}
		return nil
	})
	// Cancelling is idempotent: another message changes nothing.
	f.publish(rec, stream.SubmissionCancel, "/again")
	f.consumed()
	if got := actions(f.audit("doomed")); !slices.Equal(got, []string{"submitter:place", "submitter:submit", "submitter:delete"}) {
		t.Errorf("audit %v", got)
	}
}

// TestUnreachableCluster stops a cluster's kube-apiserver: work placed on
// it moves to the other cluster after a few tries, new work avoids it, and
// work that can only go there waits in Queued until it comes back.
func TestUnreachableCluster(t *testing.T) {
	down := env.Dedicated(t, false)
	shared := env.Clusters(t)[0]
	f := newFixture(t, sqliteDSN(t))
	// "a-down" sorts before "sandbox-1", so that with equal load the first
	// placement chooses it.
	f.register("a-down", down, map[string]string{"dc": "down"})
	f.register(shared.Name(), shared, shared.Labels())
	// A second farm where the stopped cluster is the only one.
	alone := newFixture(t, sqliteDSN(t))
	alone.register("a-down", down, nil)

	down.StopAPIServer()
	f.start(submitter.Config{RescanInterval: time.Second})
	alone.start(submitter.Config{RescanInterval: time.Second})

	f.submit("moves", runnableSpec{template: job(true)})
	alone.submit("waits", runnableSpec{template: job(true)})

	rec, _, attempts := f.waitPhase("moves", v1alpha1.PhaseSubmitted)
	if len(attempts) != 2 || attempts[0].Cluster != "a-down" || attempts[0].Reason != "ClusterUnreachable" ||
		attempts[0].EndedAt == nil || attempts[1].Cluster != shared.Name() || rec.Cluster != shared.Name() {
		t.Errorf("attempts %+v", attempts)
	}
	if got := actions(f.audit("moves")); !slices.Equal(got, []string{"submitter:place", "submitter:requeue", "submitter:place", "submitter:submit"}) {
		t.Errorf("audit %v", got)
	}
	// New work goes straight to the live cluster.
	f.submit("new", runnableSpec{template: job(true)})
	_, _, attempts = f.waitPhase("new", v1alpha1.PhaseSubmitted)
	if len(attempts) != 1 || attempts[0].Cluster != shared.Name() {
		t.Errorf("new work placed on the stopped cluster: %+v", attempts)
	}

	sandboxtest.Eventually(t, wait, "runnable waiting with a message while every cluster is down", func(context.Context) error {
		rec, msg, _ := alone.get("waits")
		if rec.Phase != string(v1alpha1.PhaseQueued) || !strings.Contains(msg, "not Ready") {
			return fmt.Errorf("phase %s, message %q", rec.Phase, msg)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := down.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _, attempts = alone.waitPhase("waits", v1alpha1.PhaseSubmitted)
	if n := len(attempts); attempts[n-1].Cluster != "a-down" {
		t.Errorf("attempts %+v", attempts)
	}
	if objs := alone.objects("a-down", jobs, rec.UID); len(objs) != 1 {
		t.Errorf("%d objects on the recovered cluster, want 1", len(objs))
	}
}

// TestCompetingSubmitters runs two submitters on one queue and database,
// restarts one of them every ten submissions, and sends every submission
// twice, while both rescan often: each runnable must be created exactly
// once.
func TestCompetingSubmitters(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng.NewDSN(t))
			f.registerShared()
			cfg := submitter.Config{Workers: 4, RescanInterval: 300 * time.Millisecond}
			stopA := f.start(cfg)
			f.start(cfg)
			const n = 50
			var names []string
			for i := range n {
				name := fmt.Sprintf("r-%02d", i)
				names = append(names, name)
				f.submit(name, runnableSpec{template: job(true)})
				rec, _, _ := f.get(name)
				f.publish(rec, stream.SubmissionSubmit, "/redelivered")
				if i%10 == 5 {
					stopA()
					stopA = f.start(cfg)
				}
			}
			var wg sync.WaitGroup
			for _, name := range names {
				wg.Go(func() { f.waitPhase(name, v1alpha1.PhaseSubmitted) })
			}
			wg.Wait()
			// Let anything still in flight land before counting: every
			// message, the duplicates included, settled.
			f.consumed()
			perCluster := map[string]int{}
			for _, name := range names {
				rec, _, attempts := f.get(name)
				if len(attempts) != 1 {
					t.Errorf("%s: %d attempts", name, len(attempts))
				}
				total := 0
				for cluster := range f.dyn {
					k := len(f.objects(cluster, jobs, rec.UID))
					total += k
					perCluster[cluster] += k
				}
				if total != 1 {
					t.Errorf("%s: created %d times", name, total)
				}
				if got := actions(f.audit(name)); !slices.Equal(got, []string{"submitter:place", "submitter:submit"}) {
					t.Errorf("%s: audit %v", name, got)
				}
			}
			t.Logf("objects per cluster: %v", perCluster)
		})
	}
}

// TestKindServedOnlySomewhere registers a cluster without Argo beside one
// with it: Workflows go only where the kind is served, and where no
// cluster serves it the runnable fails, saying so.
func TestKindServedOnlySomewhere(t *testing.T) {
	plain := env.Dedicated(t, false)
	argo := env.Clusters(t)[0]
	f := newFixture(t, sqliteDSN(t))
	// "a-plain" sorts first, so it would win every tie if it were eligible.
	f.register("a-plain", plain, nil)
	f.register(argo.Name(), argo, argo.Labels())
	none := newFixture(t, sqliteDSN(t))
	none.register("a-plain", plain, nil)
	f.start(submitter.Config{})
	none.start(submitter.Config{})

	for i := range 3 {
		f.submit(fmt.Sprintf("wf-%d", i), runnableSpec{template: workflow()})
	}
	for i := range 3 {
		if a := checkCreated(t, f, fmt.Sprintf("wf-%d", i), "workflows"); a.Cluster != argo.Name() {
			t.Errorf("workflow placed on %s, which does not serve Workflows", a.Cluster)
		}
	}
	none.submit("wf", runnableSpec{template: workflow()})
	_, msg, attempts := none.waitPhase("wf", v1alpha1.PhaseFailed)
	if !strings.Contains(msg, "no cluster serves argoproj.io/v1alpha1, Kind=Workflow") || len(attempts) != 0 {
		t.Errorf("message %q, attempts %+v", msg, attempts)
	}
}
