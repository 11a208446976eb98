package flinksim_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/health"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Options{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const ns = "flinksim"

var jobIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// fixture is one simulator on the shared cluster, stopped when the test
// ends so that the next test's simulator is the only one writing status.
type fixture struct {
	sim    *flinksim.Simulator
	client dynamic.ResourceInterface
}

func setup(t *testing.T, opts flinksim.Options) *fixture {
	t.Helper()
	c := env.Clusters(t)[0]
	cfg := c.RESTConfig()
	// Twice: installing must be idempotent, since every test does it.
	for range 2 {
		if err := flinksim.InstallCRD(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.EnsureNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	sim, err := flinksim.Start(t.Context(), c.Name(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Wait) // t.Context is done before cleanups run
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{sim: sim, client: dyn.Resource(flinksim.Resource).Namespace(ns)}
}

// create creates a FlinkDeployment, deleted when the test ends.
func (f *fixture) create(t *testing.T, name string, labels map[string]string, job map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flink.apache.org/v1beta1",
		"kind":       "FlinkDeployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"image":        "flink:1.20",
			"flinkVersion": "v1_20",
			"job":          job,
		},
	}}
	obj.SetLabels(labels)
	if _, err := f.client.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitStatus waits until the status fields named by dotted paths have the
// wanted values ("" meaning absent) and returns the object.
func (f *fixture) waitStatus(t *testing.T, name string, want map[string]string) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	sandboxtest.Eventually(t, time.Minute, name+" status "+fmt.Sprint(want), func(ctx context.Context) error {
		o, err := f.client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for path, v := range want {
			got, _, _ := unstructured.NestedString(o.Object, append([]string{"status"}, strings.Split(path, ".")...)...)
			if got != v {
				return fmt.Errorf("status.%s = %q, want %q", path, got, v)
			}
		}
		obj = o
		return nil
	})
	return obj
}

// waitRunning waits until the simulator reports name RUNNING.
func (f *fixture) waitRunning(t *testing.T, name string) string {
	t.Helper()
	var id string
	sandboxtest.Eventually(t, time.Minute, name+" running", func(context.Context) error {
		var ok bool
		if id, ok = f.sim.Running(ns, name); !ok {
			return fmt.Errorf("not running")
		}
		return nil
	})
	return id
}

// judge checks the verdict of purser's built-in Flink interpreter.
func judge(t *testing.T, obj *unstructured.Unstructured, want v1alpha1.Health, wantPhase string) health.Result {
	t.Helper()
	in, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := in.Interpret(obj.Object)
	if r.Health != want || r.Phase != wantPhase {
		t.Errorf("%s judged %s/%s (%s), want %s/%s", obj.GetName(), r.Health, r.Phase, r.Message, want, wantPhase)
	}
	return r
}

func TestNewDeploymentRuns(t *testing.T) {
	f := setup(t, flinksim.Options{})
	f.create(t, "fresh", nil, map[string]any{"jarURI": "local:///opt/flink/job.jar"})
	id := f.waitRunning(t, "fresh")
	if !jobIDPattern.MatchString(id) {
		t.Errorf("job id %q, want 32 hex digits", id)
	}
	obj := f.waitStatus(t, "fresh", map[string]string{
		"lifecycleState": "STABLE", "jobManagerDeploymentStatus": "READY",
		"jobStatus.state": "RUNNING", "jobStatus.jobId": id, "error": "",
	})
	start, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "startTime")
	ms, err := strconv.ParseInt(start, 10, 64)
	if err != nil || time.Since(time.UnixMilli(ms)).Abs() > time.Hour {
		t.Errorf("startTime %q, want milliseconds since the epoch of about now", start)
	}
	if got := f.sim.RestoredFrom(ns, "fresh"); got != "" {
		t.Errorf("RestoredFrom = %q for a job started from nothing", got)
	}
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
}

func TestDeployingUntilStartDelay(t *testing.T) {
	// An hour: the test sees the deploying state however slow the machine.
	f := setup(t, flinksim.Options{StartDelay: time.Hour})
	f.create(t, "slow", nil, map[string]any{})
	obj := f.waitStatus(t, "slow", map[string]string{
		"lifecycleState": "CREATED", "jobManagerDeploymentStatus": "DEPLOYING",
		"jobStatus.state": "CREATED", "jobStatus.startTime": "",
	})
	if id, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "jobId"); !jobIDPattern.MatchString(id) {
		t.Errorf("job id %q while deploying, want 32 hex digits", id)
	}
	if _, ok := f.sim.Running(ns, "slow"); ok {
		t.Errorf("Running before StartDelay passed")
	}
	judge(t, obj, v1alpha1.HealthUnhealthy, health.PhasePending)
}

func TestRestoredJob(t *testing.T) {
	f := setup(t, flinksim.Options{})
	const fixed = "0123456789abcdef0123456789abcdef"
	const savepoint = "s3://bucket/savepoints/savepoint-0123-456789abcdef"
	f.create(t, "fixed-id", map[string]string{flinksim.JobIDLabel: fixed}, map[string]any{})
	f.create(t, "restored", nil, map[string]any{"initialSavepointPath": savepoint, "upgradeMode": "savepoint"})

	if id := f.waitRunning(t, "fixed-id"); id != fixed {
		t.Errorf("job id %q, want the label's %q", id, fixed)
	}
	f.waitRunning(t, "restored")
	f.waitStatus(t, "restored", map[string]string{"jobStatus.savepointInfo.lastSavepoint.location": savepoint})
	if got := f.sim.RestoredFrom(ns, "restored"); got != savepoint {
		t.Errorf("RestoredFrom = %q, want %q", got, savepoint)
	}
}

func TestFaults(t *testing.T) {
	f := setup(t, flinksim.Options{})
	f.create(t, "faulty", nil, map[string]any{})
	id := f.waitRunning(t, "faulty")

	f.sim.Fail(ns, "faulty", flinksim.Reconciling)
	obj := f.waitStatus(t, "faulty", map[string]string{
		"jobStatus.state": "RECONCILING", "lifecycleState": "DEPLOYED",
		"jobManagerDeploymentStatus": "DEPLOYING", "error": "",
	})
	judge(t, obj, v1alpha1.HealthUnhealthy, health.PhasePending)
	f.sim.Recover(ns, "faulty")
	obj = f.waitStatus(t, "faulty", map[string]string{"jobStatus.state": "RUNNING", "jobStatus.jobId": id})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)

	f.sim.Fail(ns, "faulty", flinksim.ImagePullBackOff)
	obj = f.waitStatus(t, "faulty", map[string]string{"jobStatus.state": "RECONCILING", "jobManagerDeploymentStatus": "ERROR"})
	if e, _, _ := unstructured.NestedString(obj.Object, "status", "error"); !strings.Contains(e, "ImagePullBackOff") || !strings.Contains(e, "DeploymentFailedException") {
		t.Errorf("status.error %q, want the operator's DeploymentFailedException for ImagePullBackOff", e)
	}
	if r := judge(t, obj, v1alpha1.HealthUnknown, health.PhasePending); !r.UserError {
		t.Errorf("ImagePullBackOff not judged a user error: %+v", r)
	}
	f.sim.Recover(ns, "faulty")
	f.waitStatus(t, "faulty", map[string]string{"jobStatus.state": "RUNNING", "error": ""})

	f.sim.Fail(ns, "faulty", flinksim.FailedJob)
	obj = f.waitStatus(t, "faulty", map[string]string{"jobStatus.state": "FAILED"})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseFailed)
	f.sim.Recover(ns, "faulty")
	if got := f.waitRunning(t, "faulty"); got != id {
		t.Errorf("job id %q after recovering, want %q", got, id)
	}
}

func TestSuspendResume(t *testing.T) {
	f := setup(t, flinksim.Options{})
	f.create(t, "pausable", nil, map[string]any{"state": "running"})
	id := f.waitRunning(t, "pausable")

	setState := func(state string) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"job":{"state":%q}}}`, state)
		if _, err := f.client.Patch(t.Context(), "pausable", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setState("suspended")
	obj := f.waitStatus(t, "pausable", map[string]string{
		"jobStatus.state": "SUSPENDED", "lifecycleState": "SUSPENDED", "jobManagerDeploymentStatus": "MISSING",
	})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhasePending)
	sandboxtest.Eventually(t, time.Minute, "Running false while suspended", func(context.Context) error {
		if _, ok := f.sim.Running(ns, "pausable"); ok {
			return fmt.Errorf("still running")
		}
		return nil
	})

	setState("running")
	obj = f.waitStatus(t, "pausable", map[string]string{
		"jobStatus.state": "RUNNING", "jobStatus.jobId": id, "lifecycleState": "STABLE", "jobManagerDeploymentStatus": "READY",
	})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
}

func TestStartWithoutCRD(t *testing.T) {
	c := env.Dedicated(t, false)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	sim, err := flinksim.Start(ctx, c.Name(), c.RESTConfig(), flinksim.Options{})
	if err == nil {
		sim.Wait()
		t.Fatal("Start succeeded on a cluster without the FlinkDeployment CRD")
	}
	if !strings.Contains(err.Error(), "is the CRD installed?") {
		t.Errorf("error %q does not point at the missing CRD", err)
	}
}
