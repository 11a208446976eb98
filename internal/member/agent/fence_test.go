package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// fencedAt is when the table's objects are fenced.
var fencedAt = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestFencingFor(t *testing.T) {
	obj := func(apiVersion, kind string, spec map[string]any, deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "u-1"}}}
		if spec != nil {
			u.Object["spec"] = spec
		}
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}
		return u
	}
	for _, tc := range []struct {
		name   string
		gk     schema.GroupKind
		obj    *unstructured.Unstructured
		action string
		patch  string
	}{
		{"running Job", kinds.Job, obj("batch/v1", "Job", map[string]any{"parallelism": int64(1)}, false),
			fenceSuspend, `{"metadata":{"annotations":{"purser.io/fenced":"2026-11-29T12:00:00Z"},"uid":"u-1"},"spec":{"suspend":true}}`},
		{"Job resumed", kinds.Job, obj("batch/v1", "Job", map[string]any{"suspend": false}, false),
			fenceSuspend, `{"metadata":{"annotations":{"purser.io/fenced":"2026-11-29T12:00:00Z"},"uid":"u-1"},"spec":{"suspend":true}}`},
		{"suspended Job", kinds.Job, obj("batch/v1", "Job", map[string]any{"suspend": true}, false), "", ""},
		{"Job being deleted", kinds.Job, obj("batch/v1", "Job", nil, true), "", ""},
		{"running FlinkDeployment", kinds.FlinkDeployment, obj("flink.apache.org/v1beta1", "FlinkDeployment",
			map[string]any{"job": map[string]any{"jarURI": "local:///j.jar", "state": "running"}}, false),
			fenceSuspend, `{"metadata":{"annotations":{"purser.io/fenced":"2026-11-29T12:00:00Z"},"uid":"u-1"},"spec":{"job":{"state":"suspended"}}}`},
		{"FlinkDeployment without a state", kinds.FlinkDeployment, obj("flink.apache.org/v1beta1", "FlinkDeployment",
			map[string]any{"job": map[string]any{"jarURI": "local:///j.jar"}}, false),
			fenceSuspend, `{"metadata":{"annotations":{"purser.io/fenced":"2026-11-29T12:00:00Z"},"uid":"u-1"},"spec":{"job":{"state":"suspended"}}}`},
		{"suspended FlinkDeployment", kinds.FlinkDeployment, obj("flink.apache.org/v1beta1", "FlinkDeployment",
			map[string]any{"job": map[string]any{"state": "suspended"}}, false), "", ""},
		{"Flink session cluster", kinds.FlinkDeployment, obj("flink.apache.org/v1beta1", "FlinkDeployment",
			map[string]any{"flinkVersion": "v1_20"}, false), fenceDelete, ""},
		{"Argo Workflow", schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"},
			obj("argoproj.io/v1alpha1", "Workflow", map[string]any{"entrypoint": "main"}, false), fenceDelete, ""},
		{"Deployment", schema.GroupKind{Group: "apps", Kind: "Deployment"},
			obj("apps/v1", "Deployment", map[string]any{"replicas": int64(1)}, false), fenceDelete, ""},
		{"object being deleted", schema.GroupKind{Group: "apps", Kind: "Deployment"},
			obj("apps/v1", "Deployment", nil, true), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fencingFor(tc.gk, tc.obj, fencedAt)
			if f.action != tc.action || string(f.patch) != tc.patch {
				t.Errorf("got %q %s, want %q %s", f.action, f.patch, tc.action, tc.patch)
			}
		})
	}
}

// TestFencingOnARealCluster: an agent cut off from the stream suspends
// (Job, FlinkDeployment) or deletes (anything else) every object labelled
// AtMostOne once its lease has expired, including objects created after
// that, and leaves the others alone; restored, it resumes nothing.
func TestFencingOnARealCluster(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := sandbox.NewProxy("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })

	const cluster = "agent-fence"
	ctx := t.Context()
	ns := "agent-fence"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	atMostOne := func(runnable string) map[string]string {
		return map[string]string{v1alpha1.LabelConsistency: v1alpha1.ConsistencyAtMostOne, v1alpha1.LabelRunnableUID: runnable}
	}
	createJob(t, kc, ns, "fenced", atMostOne("r-job"))
	createJob(t, kc, ns, "free", map[string]string{v1alpha1.LabelRunnableUID: "r-free"})
	sandboxtest.InstallCRD(t, dyn, "flink.apache.org", "v1beta1", "FlinkDeployment", "flinkdeployments")
	flinks := dyn.Resource(schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkdeployments"}).Namespace(ns)
	sandboxtest.Eventually(t, 2*time.Minute, "a FlinkDeployment created once its CRD is served", func(ctx context.Context) error {
		_, err := flinks.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
			"metadata": map[string]any{"name": "fenced", "labels": toAny(atMostOne("r-flink"))},
			"spec": map[string]any{"flinkVersion": "v1_20",
				"job": map[string]any{"jarURI": "local:///job.jar", "state": "running", "upgradeMode": "savepoint"}}}},
			metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	// A kind that is not configured, tracked for purser's labels: deleted.
	cronJobs := kc.BatchV1().CronJobs(ns)
	if _, err := cronJobs.Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "fenced", Labels: atMostOne("r-cron")},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: new(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec()}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const (
		heartbeat = 500 * time.Millisecond
		lease     = 5 * time.Second
	)
	got := consume(t, sc, cluster)
	a, _ := start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, "nats://"+proxy.Addr()),
		HeartbeatInterval: heartbeat, LeaseDuration: lease, SnapshotInterval: 5 * time.Second, DiscoveryInterval: time.Second})
	for _, kind := range []string{"Job", "FlinkDeployment", "CronJob"} {
		sandboxtest.Eventually(t, 2*time.Minute, "the agent sees the "+kind, func(context.Context) error {
			if !got.find(func(ev stream.Event) bool { return ev.Kind == kind && ev.Name == "fenced" && ev.Namespace == ns }) {
				return fmt.Errorf("no event for the %s", kind)
			}
			return nil
		})
	}
	sandboxtest.Eventually(t, time.Minute, "a heartbeat with the lease and the nodes", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		// Nodes are among the default kinds, for placement.
		if hb.LeaseSeconds != lease.Seconds() || hb.Objects["v1/Node"] == 0 {
			return fmt.Errorf("heartbeat %+v", hb)
		}
		return nil
	})
	if n := a.fenced.Load(); n != 0 {
		t.Fatalf("the agent fenced %d objects while connected", n)
	}

	cut := time.Now()
	proxy.Cut()
	sandboxtest.Eventually(t, 2*time.Minute, "the AtMostOne Job suspended", func(ctx context.Context) error {
		return jobSuspended(ctx, kc, ns, "fenced", true)
	})
	t.Logf("AtMostOne Job seen suspended %s after the cut (lease %s)", time.Since(cut).Round(time.Millisecond), lease)
	sandboxtest.Eventually(t, 2*time.Minute, "the AtMostOne FlinkDeployment suspended", func(ctx context.Context) error {
		return flinkState(ctx, flinks, "fenced", "suspended")
	})
	sandboxtest.Eventually(t, 2*time.Minute, "the AtMostOne CronJob deleted", func(ctx context.Context) error {
		_, err := cronJobs.Get(ctx, "fenced", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	// A stale submitter creates another one while the lease is expired.
	createJob(t, kc, ns, "late", atMostOne("r-late"))
	sandboxtest.Eventually(t, 2*time.Minute, "the AtMostOne Job created after the expiry suspended", func(ctx context.Context) error {
		return jobSuspended(ctx, kc, ns, "late", true)
	})
	if err := jobSuspended(ctx, kc, ns, "free", false); err != nil {
		t.Errorf("the Job without the consistency label: %v", err)
	}
	fenced := a.fenced.Load()
	if fenced != 4 {
		t.Errorf("fenced %d objects, want 4", fenced)
	}

	restored := time.Now()
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	// Two beats after the first acknowledged one, the agent has had its
	// chance to undo anything.
	sandboxtest.Eventually(t, 2*time.Minute, "heartbeats acknowledged again", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		if hb.Time.Before(restored.Add(2 * heartbeat)) {
			return fmt.Errorf("last heartbeat at %s", hb.Time)
		}
		if hb.Fenced != fenced {
			return fmt.Errorf("heartbeat counts %d fenced objects, want %d", hb.Fenced, fenced)
		}
		return nil
	})
	for _, name := range []string{"fenced", "late"} {
		if err := jobSuspended(ctx, kc, ns, name, true); err != nil {
			t.Errorf("after the restore: %v", err)
		}
	}
	if err := flinkState(ctx, flinks, "fenced", "suspended"); err != nil {
		t.Errorf("after the restore: %v", err)
	}
	if err := jobSuspended(ctx, kc, ns, "free", false); err != nil {
		t.Errorf("after the restore, the Job without the consistency label: %v", err)
	}
	if n := a.fenced.Load(); n != fenced {
		t.Errorf("the agent fenced %d more objects once connected", n-fenced)
	}
}

func jobSpec() batchv1.JobSpec {
	return batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
	}}}
}

func createJob(t *testing.T, kc kubernetes.Interface, ns, name string, labels map[string]string) {
	t.Helper()
	if _, err := kc.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: jobSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func jobSuspended(ctx context.Context, kc kubernetes.Interface, ns, name string, want bool) error {
	j, err := kc.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := j.Spec.Suspend != nil && *j.Spec.Suspend; got != want {
		return fmt.Errorf("Job %s: spec.suspend is %v, want %v", name, got, want)
	}
	return nil
}

func flinkState(ctx context.Context, flinks dynamic.ResourceInterface, name, want string) error {
	f, err := flinks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if state, _, _ := unstructured.NestedString(f.Object, "spec", "job", "state"); state != want {
		b, _ := json.Marshal(f.Object["spec"])
		return fmt.Errorf("FlinkDeployment %s: spec %s, want job state %s", name, b, want)
	}
	return nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestFencingOnReturn: an agent that was away for longer than its lease
// (its DC lost power, say: nothing fenced the work, since nothing ran)
// fences the cluster's AtMostOne work when it comes back, before the old
// copy can run beside the one the control plane placed elsewhere. An
// agent back within its lease fences nothing.
func TestFencingOnReturn(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "agent-return"
	ctx := t.Context()
	ns := "agent-return"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	createJob(t, kc, ns, "away", map[string]string{v1alpha1.LabelConsistency: v1alpha1.ConsistencyAtMostOne, v1alpha1.LabelRunnableUID: "r-away"})
	createJob(t, kc, ns, "free", map[string]string{v1alpha1.LabelRunnableUID: "r-free"})
	const (
		heartbeat = 300 * time.Millisecond
		// Long enough that a fence on return is seen to come before the
		// new term's first lease runs out, not with it.
		lease = 10 * time.Second
	)
	cfg := Config{Cluster: cluster, RESTConfig: c.RESTConfig(), HeartbeatInterval: heartbeat, LeaseDuration: lease,
		SnapshotInterval: 5 * time.Second, DiscoveryInterval: time.Second}
	run := func() (*Agent, func()) {
		cfg := cfg
		cfg.Stream = streamtest.Connect(t, srv.URL)
		return start(t, cfg)
	}
	// The heartbeat's own time, from the agent's clock, is enough here:
	// the agent, the test and the NATS server share one machine.
	beatAfter := func(at time.Time) {
		t.Helper()
		sandboxtest.Eventually(t, time.Minute, "a heartbeat", func(ctx context.Context) error {
			hb, err := heartbeatOf(ctx, sc, cluster)
			if err != nil {
				return err
			}
			if !hb.Time.After(at) || hb.LastSnapshot.IsZero() {
				return fmt.Errorf("heartbeat %+v", hb)
			}
			return nil
		})
	}

	started := time.Now()
	_, stop := run()
	beatAfter(started)
	stop()
	// Back at once, within the lease: the caches fill and a snapshot goes
	// out (after which a fence would have run), and nothing is fenced.
	started = time.Now()
	a, stop := run()
	beatAfter(started)
	if n := a.fenced.Load(); n != 0 || a.returned.Load() {
		t.Fatalf("back within the lease, the agent fenced %d objects (returned %v)", n, a.returned.Load())
	}
	if err := jobSuspended(ctx, kc, ns, "away", false); err != nil {
		t.Fatal(err)
	}
	stop()

	// Away for longer than the lease.
	away := time.Now()
	time.Sleep(lease + time.Second)
	back := time.Now()
	a, _ = run()
	sandboxtest.Eventually(t, 2*time.Minute, "the AtMostOne Job suspended on return", func(ctx context.Context) error {
		return jobSuspended(ctx, kc, ns, "away", true)
	})
	// The fence loop of a new term first sleeps until the lease would run
	// out; the return must wake it, since the work may have moved already.
	if took := time.Since(back); took >= lease {
		t.Errorf("suspended %s after the agent came back: not on return, only when its first lease would have run out (%s)", took.Round(time.Millisecond), lease)
	}
	t.Logf("fenced %s after the agent went away, %s after it came back", time.Since(away).Round(time.Millisecond),
		time.Since(away.Add(lease+time.Second)).Round(time.Millisecond))
	if err := jobSuspended(ctx, kc, ns, "free", false); err != nil {
		t.Errorf("the Job without the consistency label: %v", err)
	}
	if n := a.fenced.Load(); n != 1 {
		t.Errorf("fenced %d objects on return, want 1", n)
	}
}
