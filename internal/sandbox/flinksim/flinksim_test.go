package flinksim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const ns = "flinksim"

var jobIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// fixture is one simulator on the shared cluster, stopped when the test
// ends so that the next test's simulator is the only one writing status.
type fixture struct {
	sim    *flinksim.Simulator
	client dynamic.ResourceInterface
}

func setup(t *testing.T, opts flinksim.Config) *fixture {
	t.Helper()
	return setupOn(t, env.Clusters(t)[0], opts)
}

// setupOn is setup on cluster c.
func setupOn(t *testing.T, c *sandbox.Cluster, opts flinksim.Config) *fixture {
	t.Helper()
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
	if opts.ReconcileInterval == 0 {
		// A running deployment shows a new checkpoint, and takes a
		// periodic savepoint, only at the operator's passes: every 60 s
		// by default, too slow for a test.
		opts.ReconcileInterval = 100 * time.Millisecond
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

// create creates a FlinkDeployment, deleted when the test ends; job nil
// is a session cluster.
func (f *fixture) create(t *testing.T, name string, conf map[string]any, job map[string]any) {
	t.Helper()
	spec := map[string]any{"image": "flink:1.20", "flinkVersion": "v1_20"}
	if job != nil {
		spec["job"] = job
	}
	if conf != nil {
		spec["flinkConfiguration"] = conf
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flink.apache.org/v1beta1",
		"kind":       "FlinkDeployment",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
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
		if !fieldsMatch(o.Object, want) {
			return fmt.Errorf("status %v", o.Object["status"])
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

// patch merges a JSON patch into the spec of name.
func (f *fixture) patch(t *testing.T, name, patch string) {
	t.Helper()
	if _, err := f.client.Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// history records every status name is written with from now on, so that
// a test sees the states between two passes, however short.
type history struct {
	mu       sync.Mutex
	statuses []map[string]any
}

func (f *fixture) watch(t *testing.T, name string) *history {
	t.Helper()
	cur, err := f.client.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.client.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	h := &history{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			o := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": map[string]any{"name": name},
				"spec": u.Object["spec"], "status": st}
			h.mu.Lock()
			h.statuses = append(h.statuses, o)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return h
}

// saw reports whether some recorded status had every wanted field.
func (h *history) saw(want map[string]string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.statuses {
		if fieldsMatch(o, want) {
			return true
		}
	}
	return false
}

// verdicts is the interpreter's verdict on every recorded status.
func (h *history) verdicts(t *testing.T) []health.Result {
	in, _ := health.New(nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]health.Result, len(h.statuses))
	for i, o := range h.statuses {
		out[i] = in.Interpret(o)
	}
	return out
}

// neverEnded checks that no recorded status would end a runnable.
func (h *history) neverEnded(t *testing.T) {
	t.Helper()
	for i, r := range h.verdicts(t) {
		if r.Phase == health.PhaseSucceeded || r.Phase == health.PhaseFailed {
			t.Errorf("status %d judged %s %s (%s): it would end the runnable", i, r.Health, r.Phase, r.Message)
		}
	}
}

func fieldsMatch(o map[string]any, want map[string]string) bool {
	for path, v := range want {
		got, _, _ := unstructured.NestedString(o, append([]string{"status"}, strings.Split(path, ".")...)...)
		if got != v {
			return false
		}
	}
	return true
}

func (f *fixture) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	o, err := f.client.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func reconciledJobState(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	last, _, _ := unstructured.NestedString(o.Object, "status", "reconciliationStatus", "lastReconciledSpec")
	var w struct {
		Spec struct {
			Job struct {
				State string `json:"state"`
			} `json:"job"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(last), &w); err != nil {
		t.Fatalf("lastReconciledSpec %q: %v", last, err)
	}
	return w.Spec.Job.State
}

func TestNewDeploymentRuns(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.create(t, "fresh", nil, map[string]any{"jarURI": "local:///opt/flink/job.jar"})
	id := f.waitRunning(t, "fresh")
	if !jobIDPattern.MatchString(id) {
		t.Errorf("job id %q, want 32 hex digits", id)
	}
	obj := f.waitStatus(t, "fresh", map[string]string{
		"lifecycleState": "STABLE", "jobManagerDeploymentStatus": "READY", "reconciliationStatus.state": "DEPLOYED",
		"jobStatus.state": "RUNNING", "jobStatus.jobId": id, "error": "",
	})
	if g, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); g != obj.GetGeneration() {
		t.Errorf("observedGeneration %d, generation %d", g, obj.GetGeneration())
	}
	if s := reconciledJobState(t, obj); s != "running" {
		t.Errorf("reconciled job state %q", s)
	}
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
	f := setup(t, flinksim.Config{StartDelay: time.Hour})
	f.create(t, "slow", nil, map[string]any{})
	obj := f.waitStatus(t, "slow", map[string]string{
		"lifecycleState": "DEPLOYED", "jobManagerDeploymentStatus": "DEPLOYING",
		"jobStatus.state": "RECONCILING", "jobStatus.startTime": "",
	})
	if id, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "jobId"); !jobIDPattern.MatchString(id) {
		t.Errorf("job id %q while deploying, want 32 hex digits (setJobIdIfNecessary assigns it before submitting)", id)
	}
	if _, ok := f.sim.Running(ns, "slow"); ok {
		t.Errorf("Running before StartDelay passed")
	}
	judge(t, obj, v1alpha1.HealthUnhealthy, health.PhasePending)
}

// The initial savepoint is restored at the first deployment only; later
// deployments restore from the savepoint the operator took.
func TestRestoreFromInitialSavepointOnlyAtFirstDeploy(t *testing.T) {
	f := setup(t, flinksim.Config{})
	const initial = "s3://bucket/savepoints/savepoint-0123ab-456789abcdef"
	f.create(t, "restored", map[string]any{"state.savepoints.dir": "s3://sp"},
		map[string]any{"initialSavepointPath": initial, "upgradeMode": "savepoint", "parallelism": int64(1)})
	first := f.waitRunning(t, "restored")
	f.waitStatus(t, "restored", map[string]string{"jobStatus.upgradeSavepointPath": initial, "lifecycleState": "STABLE"})
	if got := f.sim.RestoredFrom(ns, "restored"); got != initial {
		t.Errorf("RestoredFrom = %q, want %q", got, initial)
	}
	// A new initialSavepointPath alone changes nothing (DiffType.IGNORE).
	f.patch(t, "restored", `{"spec":{"job":{"initialSavepointPath":"s3://elsewhere/savepoint-x"}}}`)
	f.waitStatus(t, "restored", map[string]string{"jobStatus.state": "RUNNING"})
	if n := len(f.sim.Deploys(ns, "restored")); n != 1 {
		t.Errorf("%d deployments after changing initialSavepointPath, want 1", n)
	}
	// A savepoint upgrade: a new job id, restored from the upgrade savepoint.
	h := f.watch(t, "restored")
	f.patch(t, "restored", `{"spec":{"job":{"parallelism":2}}}`)
	sandboxtest.Eventually(t, time.Minute, "redeployed", func(context.Context) error {
		if n := len(f.sim.Deploys(ns, "restored")); n != 2 {
			return fmt.Errorf("%d deployments", n)
		}
		return nil
	})
	second := f.waitRunning(t, "restored")
	obj := f.waitStatus(t, "restored", map[string]string{"lifecycleState": "STABLE", "jobStatus.jobId": second})
	d := f.sim.Deploys(ns, "restored")[1]
	sp, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "savepointInfo", "lastSavepoint", "location")
	if second == first || d.RestoredFrom != sp || !strings.HasPrefix(sp, "s3://sp/savepoint-"+first[:6]+"-") {
		t.Errorf("after the upgrade: job %s (was %s) restored from %q, last savepoint %q", second, first, d.RestoredFrom, sp)
	}
	if typ, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "savepointInfo", "lastSavepoint", "triggerType"); typ != "UPGRADE" {
		t.Errorf("savepoint trigger type %q, want UPGRADE", typ)
	}
	// The state between the two passes of the upgrade was stored, and no
	// status on the way would have ended a runnable.
	if !h.saw(map[string]string{"jobStatus.state": "FINISHED", "lifecycleState": "UPGRADING", "jobManagerDeploymentStatus": "MISSING"}) {
		t.Errorf("never saw FINISHED, UPGRADING, MISSING between the passes of the upgrade")
	}
	h.neverEnded(t)
}

func TestSuspendResume(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.create(t, "pausable", nil, map[string]any{"state": "running", "upgradeMode": "savepoint"})
	id := f.waitRunning(t, "pausable")
	f.waitStatus(t, "pausable", map[string]string{"lifecycleState": "STABLE"})
	h := f.watch(t, "pausable")

	f.patch(t, "pausable", `{"spec":{"job":{"state":"suspended"}}}`)
	// AbstractFlinkService.cancelJob writes FINISHED: the operator never
	// writes SUSPENDED as a FlinkDeployment's job state.
	obj := f.waitStatus(t, "pausable", map[string]string{
		"jobStatus.state": "FINISHED", "lifecycleState": "SUSPENDED", "jobManagerDeploymentStatus": "MISSING",
	})
	if s := reconciledJobState(t, obj); s != "suspended" {
		t.Errorf("reconciled job state %q, want suspended", s)
	}
	sp, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "savepointInfo", "lastSavepoint", "location")
	if sp == "" {
		t.Fatalf("no savepoint recorded by the suspend: %v", obj.Object["status"])
	}
	judge(t, obj, v1alpha1.HealthHealthy, health.PhasePending)

	f.patch(t, "pausable", `{"spec":{"job":{"state":"running"}}}`)
	resumed := f.waitRunning(t, "pausable")
	obj = f.waitStatus(t, "pausable", map[string]string{"lifecycleState": "STABLE", "jobStatus.jobId": resumed})
	if resumed == id {
		t.Errorf("the resumed job kept id %s; a savepoint restore rotates it (setJobIdIfNecessary)", id)
	}
	if got := f.sim.RestoredFrom(ns, "pausable"); got != sp {
		t.Errorf("resumed from %q, want the suspend's savepoint %q", got, sp)
	}
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
	h.neverEnded(t)
}

// A cancel from the Flink UI while the spec says running: the operator
// marks it suspended and redeploys it (JobStatusObserver.updateJobStatus,
// markSuspended).
func TestCancelFromUIIsRedeployed(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.create(t, "cancelled", map[string]any{"state.savepoints.dir": "s3://sp", "kubernetes.operator.periodic.savepoint.interval": "100ms"},
		map[string]any{"upgradeMode": "savepoint"})
	id := f.waitRunning(t, "cancelled")
	obj := f.waitStatus(t, "cancelled", map[string]string{"lifecycleState": "STABLE", "jobStatus.savepointInfo.lastSavepoint.triggerType": "PERIODIC"})
	h := f.watch(t, "cancelled")
	f.sim.CancelFromUI(ns, "cancelled")
	sandboxtest.Eventually(t, time.Minute, "redeployed", func(context.Context) error {
		if n := len(f.sim.Deploys(ns, "cancelled")); n != 2 {
			return fmt.Errorf("%d deployments", n)
		}
		return nil
	})
	again := f.waitRunning(t, "cancelled")
	if again == id {
		t.Errorf("redeployed with the same job id")
	}
	if !h.saw(map[string]string{"jobStatus.state": "CANCELED", "lifecycleState": "SUSPENDED"}) {
		t.Errorf("never saw CANCELED with lifecycle SUSPENDED")
	}
	// The upgrade mode is inherited from the last reconciled spec
	// (reconcileSpecChange), and the first deployment records the mode it
	// used, stateless without an initial savepoint
	// (updateStatusBeforeFirstDeployment): the operator starts it afresh.
	if got := f.sim.RestoredFrom(ns, "cancelled"); got != "" {
		t.Errorf("redeployed from %q, want a fresh start (status %v)", got, obj.Object["status"])
	}
	h.neverEnded(t)
}

func TestJobManagerLoss(t *testing.T) {
	f := setup(t, flinksim.Config{})
	// With HA the operator recovers the JobManager, the same job from its
	// latest checkpoint (shouldRecoverDeployment, resubmitJob).
	f.create(t, "ha", map[string]any{"high-availability.type": "kubernetes", "execution.checkpointing.interval": "50ms",
		"state.checkpoints.dir": "s3://chk"}, map[string]any{"upgradeMode": "last-state"})
	id := f.waitRunning(t, "ha")
	f.waitStatus(t, "ha", map[string]string{"lifecycleState": "STABLE", "jobStatus.checkpointInfo.lastCheckpoint.triggerType": "PERIODIC"})
	h := f.watch(t, "ha")
	f.sim.LoseJobManager(ns, "ha")
	sandboxtest.Eventually(t, time.Minute, "recovered", func(context.Context) error {
		if n := len(f.sim.Deploys(ns, "ha")); n != 2 {
			return fmt.Errorf("%d deployments", n)
		}
		return nil
	})
	if got := f.waitRunning(t, "ha"); got != id {
		t.Errorf("recovered job id %s, want %s (last-state keeps it)", got, id)
	}
	if got := f.sim.RestoredFrom(ns, "ha"); !strings.HasPrefix(got, "s3://chk/"+id+"/chk-") {
		t.Errorf("recovered from %q, want a checkpoint of %s", got, id)
	}
	if !h.saw(map[string]string{"jobManagerDeploymentStatus": "MISSING", "jobStatus.state": "RECONCILING"}) {
		t.Errorf("never saw the JobManager MISSING")
	}
	h.neverEnded(t)

	// Without HA it stays lost: Unhealthy, a case for failover.
	f.create(t, "no-ha", nil, map[string]any{"upgradeMode": "savepoint"})
	f.waitRunning(t, "no-ha")
	f.waitStatus(t, "no-ha", map[string]string{"lifecycleState": "STABLE"})
	f.sim.LoseJobManager(ns, "no-ha")
	obj := f.waitStatus(t, "no-ha", map[string]string{"jobManagerDeploymentStatus": "MISSING", "jobStatus.state": "RECONCILING"})
	judge(t, obj, v1alpha1.HealthUnhealthy, health.PhasePending)
	if n := len(f.sim.Deploys(ns, "no-ha")); n != 1 {
		t.Errorf("%d deployments without HA, want the first only", n)
	}
}

// Savepoints reported the two ways operators do: in savepointInfo, and
// as FlinkStateSnapshot objects (1.10+ with the CRD).
func TestSavepointsReported(t *testing.T) {
	c := env.Clusters(t)[0]
	if err := flinksim.InstallSnapshotCRD(t.Context(), c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	f := setup(t, flinksim.Config{StateSnapshots: true})
	f.create(t, "snapshots", map[string]any{"state.savepoints.dir": "s3://sp", "kubernetes.operator.periodic.savepoint.interval": "100ms"},
		map[string]any{"upgradeMode": "savepoint"})
	id := f.waitRunning(t, "snapshots")
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	snaps := dyn.Resource(flinksim.SnapshotResource).Namespace(ns)
	sandboxtest.Eventually(t, time.Minute, "a FlinkStateSnapshot", func(ctx context.Context) error {
		list, err := snaps.List(ctx, metav1.ListOptions{LabelSelector: "job-reference.name=snapshots"})
		if err != nil {
			return err
		}
		for _, s := range list.Items {
			path, _, _ := unstructured.NestedString(s.Object, "status", "path")
			state, _, _ := unstructured.NestedString(s.Object, "status", "state")
			ref, _, _ := unstructured.NestedString(s.Object, "spec", "jobReference", "name")
			if state == "COMPLETED" && ref == "snapshots" && strings.HasPrefix(path, "s3://sp/savepoint-"+id[:6]+"-") {
				return nil
			}
		}
		return fmt.Errorf("%d snapshots, none completed for the job", len(list.Items))
	})
	t.Cleanup(func() {
		_ = snaps.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	obj := f.get(t, "snapshots")
	if loc, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "savepointInfo", "lastSavepoint", "location"); loc != "" {
		t.Errorf("savepointInfo.lastSavepoint %q beside FlinkStateSnapshots: the operator records one or the other", loc)
	}
}

func TestSessionCluster(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.create(t, "session", nil, nil)
	obj := f.waitStatus(t, "session", map[string]string{"jobManagerDeploymentStatus": "READY", "lifecycleState": "STABLE"})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
	h := f.watch(t, "session")
	f.patch(t, "session", `{"spec":{"image":"flink:1.20.1"}}`)
	sandboxtest.Eventually(t, time.Minute, "redeployed", func(ctx context.Context) error {
		o, err := f.client.Get(ctx, "session", metav1.GetOptions{})
		if err != nil {
			return err
		}
		seen, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		if seen != o.GetGeneration() || !fieldsMatch(o.Object, map[string]string{"jobManagerDeploymentStatus": "READY", "lifecycleState": "STABLE"}) {
			return fmt.Errorf("not ready again: generation %d, observed %d, %v", o.GetGeneration(), seen, o.Object["status"])
		}
		return nil
	})
	if !h.saw(map[string]string{"jobStatus.state": "FINISHED", "jobManagerDeploymentStatus": "MISSING", "lifecycleState": "UPGRADING"}) {
		t.Errorf("never saw the cluster deleted for the spec change")
	}
	h.neverEnded(t)
	obj = f.get(t, "session")
	if st, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "state"); st != "FINISHED" {
		t.Errorf("job state %q: the operator leaves FINISHED on a session cluster", st)
	}
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
}

// Operators before 1.4 write no lifecycleState and status.error as text.
func TestLegacyStatus(t *testing.T) {
	f := setup(t, flinksim.Config{LegacyStatus: true})
	f.create(t, "old", nil, map[string]any{"upgradeMode": "savepoint"})
	f.waitRunning(t, "old")
	obj := f.waitStatus(t, "old", map[string]string{"lifecycleState": "", "jobManagerDeploymentStatus": "READY"})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
	f.create(t, "old-session", nil, nil)
	obj = f.waitStatus(t, "old-session", map[string]string{"lifecycleState": "", "jobManagerDeploymentStatus": "READY"})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseRunning)
	f.sim.Fail(ns, "old", flinksim.ImagePullBackOff)
	obj = f.waitStatus(t, "old", map[string]string{"jobManagerDeploymentStatus": "ERROR"})
	if e, _, _ := unstructured.NestedString(obj.Object, "status", "error"); strings.HasPrefix(e, "{") {
		t.Errorf("status.error %q is JSON on an operator before 1.3", e)
	}
	if r := judge(t, obj, v1alpha1.HealthUnknown, health.PhasePending); !r.UserError {
		t.Errorf("not a user error: %+v", r)
	}
}

func TestFaults(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.create(t, "faulty", nil, map[string]any{})
	id := f.waitRunning(t, "faulty")
	f.waitStatus(t, "faulty", map[string]string{"lifecycleState": "STABLE"})

	f.sim.Fail(ns, "faulty", flinksim.Reconciling)
	obj := f.waitStatus(t, "faulty", map[string]string{
		"jobStatus.state": "RECONCILING", "jobManagerDeploymentStatus": "DEPLOYING", "error": "",
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
	obj = f.waitStatus(t, "faulty", map[string]string{"jobStatus.state": "FAILED", "lifecycleState": "FAILED"})
	judge(t, obj, v1alpha1.HealthHealthy, health.PhaseFailed)
	f.sim.Recover(ns, "faulty")
	if got := f.waitRunning(t, "faulty"); got != id {
		t.Errorf("job id %q after recovering, want %q", got, id)
	}

	// A new job under a JobManager that cannot run gets its id and never
	// starts.
	f.sim.Fail(ns, "stuck", flinksim.Reconciling)
	f.create(t, "stuck", nil, map[string]any{})
	obj = f.waitStatus(t, "stuck", map[string]string{"jobStatus.state": "RECONCILING", "jobManagerDeploymentStatus": "DEPLOYING", "lifecycleState": "DEPLOYED"})
	if id, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "jobId"); !jobIDPattern.MatchString(id) {
		t.Errorf("job id %q", id)
	}
	judge(t, obj, v1alpha1.HealthUnhealthy, health.PhasePending)
}

func TestStartWithoutCRD(t *testing.T) {
	c := env.Dedicated(t, false)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	sim, err := flinksim.Start(ctx, c.Name(), c.RESTConfig(), flinksim.Config{})
	if err == nil {
		sim.Wait()
		t.Fatal("Start succeeded on a cluster without the FlinkDeployment CRD")
	}
	if !strings.Contains(err.Error(), "is the CRD installed?") {
		t.Errorf("error %q does not point at the missing CRD", err)
	}
}

// Flink completes checkpoints on its own, while the operator looks only at
// its passes (every kubernetes.operator.reconcile.interval for a running
// deployment, or when the spec changes), and its own status writes cause
// none: between passes the status stays as it was, and a last-state
// upgrade at the next pass restores the newest checkpoint Flink completed.
func TestCheckpointsBetweenPasses(t *testing.T) {
	var mu sync.Mutex
	var written []string
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(written)
	}
	f := setup(t, flinksim.Config{ReconcileInterval: time.Hour, Checkpoints: func(_ context.Context, path string) error {
		mu.Lock()
		written = append(written, path)
		mu.Unlock()
		return nil
	}})
	f.create(t, "chk", map[string]any{"high-availability.type": "kubernetes", "execution.checkpointing.interval": "50ms",
		"state.checkpoints.dir": "s3://chk"}, map[string]any{"upgradeMode": "last-state"})
	id := f.waitRunning(t, "chk")
	f.waitStatus(t, "chk", map[string]string{"lifecycleState": "STABLE"})
	rv := f.get(t, "chk").GetResourceVersion()
	from := count()
	sandboxtest.Eventually(t, time.Minute, "ten more checkpoints written", func(context.Context) error {
		if n := count(); n < from+10 {
			return fmt.Errorf("%d written", n)
		}
		return nil
	})
	if got := f.get(t, "chk").GetResourceVersion(); got != rv {
		t.Errorf("the status was written between passes (resourceVersion %s, then %s)", rv, got)
	}
	mu.Lock()
	if want := "s3://chk/" + id + "/chk-1"; written[0] != want {
		t.Errorf("first checkpoint at %s, want %s", written[0], want)
	}
	mu.Unlock()
	// A spec change causes a pass: the upgrade keeps the job id and starts
	// from the newest checkpoint.
	n := count()
	f.patch(t, "chk", `{"spec":{"job":{"parallelism":2}}}`)
	sandboxtest.Eventually(t, time.Minute, "upgraded", func(context.Context) error {
		if d := f.sim.Deploys(ns, "chk"); len(d) != 2 {
			return fmt.Errorf("%d deployments", len(d))
		}
		return nil
	})
	got := f.sim.RestoredFrom(ns, "chk")
	var at int
	if _, err := fmt.Sscanf(got, "s3://chk/"+id+"/chk-%d", &at); err != nil || at < n {
		t.Errorf("upgraded from %q, want a checkpoint of %s numbered %d or more", got, id, n)
	}
}

// A stop with savepoint that fails (a planned move's, or a user's suspend
// under upgradeMode savepoint): the operator's savepointJobOrError throws
// before anything is deleted, so the job runs on under the last reconciled
// spec and status.error says why; once the fault is gone the suspend
// completes with a savepoint.
func TestSavepointFails(t *testing.T) {
	f := setup(t, flinksim.Config{})
	f.sim.Fail(ns, "stubborn", flinksim.SavepointFails)
	f.create(t, "stubborn", nil, map[string]any{"state": "running", "upgradeMode": "savepoint"})
	id := f.waitRunning(t, "stubborn")
	f.waitStatus(t, "stubborn", map[string]string{"lifecycleState": "STABLE"})

	f.patch(t, "stubborn", `{"spec":{"job":{"state":"suspended"}}}`)
	var obj *unstructured.Unstructured
	sandboxtest.Eventually(t, time.Minute, "the savepoint's failure reported", func(ctx context.Context) error {
		o, err := f.client.Get(ctx, "stubborn", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if e, _, _ := unstructured.NestedString(o.Object, "status", "error"); !strings.Contains(e, "Savepoint Error") {
			return fmt.Errorf("status %v", o.Object["status"])
		}
		obj = o
		return nil
	})
	if e, _, _ := unstructured.NestedString(obj.Object, "status", "error"); !strings.Contains(e, "UpgradeFailureException") || !strings.Contains(e, "SavepointError") {
		t.Errorf("status.error %q, want the operator's UpgradeFailureException with reason SavepointError", e)
	}
	if s := reconciledJobState(t, obj); s != "running" {
		t.Errorf("reconciled job state %q, want the running spec kept", s)
	}
	if got, ok := f.sim.Running(ns, "stubborn"); !ok || got != id {
		t.Errorf("job %q running %v, want %s still running", got, ok, id)
	}
	if sp, _, _ := unstructured.NestedString(obj.Object, "status", "jobStatus", "upgradeSavepointPath"); sp != "" {
		t.Errorf("an upgrade savepoint %q was recorded by a failed stop", sp)
	}

	f.sim.Recover(ns, "stubborn")
	f.waitStatus(t, "stubborn", map[string]string{"jobStatus.state": "FINISHED", "lifecycleState": "SUSPENDED"})
}

// checkpointLog records the checkpoints a simulator wrote, by job id.
type checkpointLog struct {
	mu    sync.Mutex
	byJob map[string]int
}

func (l *checkpointLog) write(_ context.Context, path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byJob == nil {
		l.byJob = map[string]int{}
	}
	parts := strings.Split(path, "/")
	if len(parts) >= 2 {
		l.byJob[parts[len(parts)-2]]++
	}
	return nil
}

func (l *checkpointLog) count(job string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byJob[job]
}

// With Kubernetes HA a checkpoint completes only once the kube-apiserver
// stored its pointer: while it is down, a job with HA completes none and
// one without goes on. What the HA job completed last is what it leaves.
func TestHACheckpointsNeedTheAPIServer(t *testing.T) {
	c := env.Dedicated(t, false)
	var log checkpointLog
	f := setupOn(t, c, flinksim.Config{ReconcileInterval: time.Hour, Checkpoints: log.write})
	f.create(t, "ha", map[string]any{"high-availability.type": "kubernetes", "execution.checkpointing.interval": "50ms",
		"state.checkpoints.dir": "s3://chk"}, map[string]any{"upgradeMode": "savepoint"})
	f.create(t, "plain", map[string]any{"execution.checkpointing.interval": "50ms",
		"state.checkpoints.dir": "s3://chk"}, map[string]any{"upgradeMode": "savepoint"})
	ha, plain := f.waitRunning(t, "ha"), f.waitRunning(t, "plain")
	sandboxtest.Eventually(t, time.Minute, "both checkpointing", func(context.Context) error {
		if log.count(ha) < 3 || log.count(plain) < 3 {
			return fmt.Errorf("%d and %d checkpoints", log.count(ha), log.count(plain))
		}
		return nil
	})
	if f.sim.CheckpointStoreDown() {
		t.Fatal("the checkpoint store is down while the kube-apiserver answers")
	}
	c.StopAPIServer()
	sandboxtest.Eventually(t, time.Minute, "the HA store seen down", func(context.Context) error {
		if !f.sim.CheckpointStoreDown() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	last, written := f.sim.LatestCheckpoint(ns, "ha"), log.count(ha)
	if !strings.HasPrefix(last, "s3://chk/"+ha+"/chk-") {
		t.Fatalf("latest checkpoint of the HA job %q", last)
	}
	from := log.count(plain)
	sandboxtest.Eventually(t, time.Minute, "ten more checkpoints of the job without HA", func(context.Context) error {
		if n := log.count(plain); n < from+10 {
			return fmt.Errorf("%d more", n-from)
		}
		return nil
	})
	if got, n := f.sim.LatestCheckpoint(ns, "ha"), log.count(ha); got != last || n != written {
		t.Errorf("the HA job completed checkpoints without its kube-apiserver: latest %s (was %s), %d written (was %d)", got, last, n, written)
	}
}

// A fault lands between two checkpoint ticks: once FailEach returns, none
// of the failed jobs completes another checkpoint, while others go on.
func TestNoCheckpointAfterFault(t *testing.T) {
	var log checkpointLog
	f := setup(t, flinksim.Config{Checkpoints: log.write})
	conf := map[string]any{"execution.checkpointing.interval": "20ms", "state.checkpoints.dir": "s3://chk"}
	names := []string{"fault-a", "fault-b", "fault-c"}
	for _, name := range append(names, "fault-none") {
		f.create(t, name, conf, map[string]any{"upgradeMode": "savepoint"})
	}
	ids := map[string]string{}
	for _, name := range append(names, "fault-none") {
		ids[name] = f.waitRunning(t, name)
	}
	sandboxtest.Eventually(t, time.Minute, "every job checkpointing", func(context.Context) error {
		for name, id := range ids {
			if log.count(id) < 2 {
				return fmt.Errorf("%s: %d checkpoints", name, log.count(id))
			}
		}
		return nil
	})
	f.sim.FailEach(ns, names, flinksim.Reconciling)
	last, written := map[string]string{}, map[string]int{}
	for _, name := range names {
		last[name], written[name] = f.sim.LatestCheckpoint(ns, name), log.count(ids[name])
	}
	from := log.count(ids["fault-none"])
	sandboxtest.Eventually(t, time.Minute, "ten more checkpoints of the job without a fault", func(context.Context) error {
		if n := log.count(ids["fault-none"]); n < from+10 {
			return fmt.Errorf("%d more", n-from)
		}
		return nil
	})
	for _, name := range names {
		if got, n := f.sim.LatestCheckpoint(ns, name), log.count(ids[name]); got != last[name] || n != written[name] {
			t.Errorf("%s completed checkpoints after its fault: latest %s (was %s), %d written (was %d)", name, got, last[name], n, written[name])
		}
	}
}
