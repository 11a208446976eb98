package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// flinkRunnable is a FlinkDeployment that checkpoints every 200 ms to the
// farm's S3 storage and fails over when its job stays unhealthy, restoring
// the next attempt from the exact restore point carried (restorePath).
const flinkRunnable = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: wordcount}
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
      job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: 2, upgradeMode: savepoint}
  placement:
    clusterAffinity: {clusterNames: [%s]}
  failover:
    consistency: AtMostOne
    application:
      tolerationSeconds: 3
      initialTolerationSeconds: 6
      purgeMode: Directly
      statePreservation:
        restorePoint: Required
        rules:
        - {aliasLabelName: flink.apache.org/job-id, jsonPath: "{.jobStatus.jobId}"}
    mutations:
    - when: "restorePath != ''"
      path: spec.job.initialSavepointPath
      value: restorePath
`

// initialToleration is flinkRunnable's initialTolerationSeconds.
const initialToleration = 6

// running waits until the runnable runs Healthy on some cluster and
// returns that cluster.
func running(f *farm, name string) *v1alpha1.Runnable {
	return f.waitFor(name, "Running and Healthy", func(r *v1alpha1.Runnable) bool {
		return r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
}

func other(cluster string) string {
	if cluster == "a" {
		return "b"
	}
	return "a"
}

// TestFlinkFailoverCarriesOnlyProvenState is the scenario on two
// sandbox clusters: the job on the first reports restore point P1 (its
// newest completed checkpoint in S3), after a suspend and a savepoint
// upgrade that end nothing; it turns unhealthy and moves to the second
// cluster restoring P1; there it reports a new job id but never becomes
// healthy, so after its initial toleration it moves again and restores
// P1, not the new job's empty state.
func TestFlinkFailoverCarriesOnlyProvenState(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	f.submit(strings.Replace(flinkRunnable, "%s", "a, b", 1))

	r := running(f, "wordcount")
	first, second := r.Status.Cluster, other(r.Status.Cluster)
	fd := f.dyn[first].Resource(flinkGVR).Namespace(f.ns)
	patch := func(p string) {
		t.Helper()
		if _, err := fd.Patch(t.Context(), "wordcount", types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stillOpen := func(what string) {
		t.Helper()
		if r := f.runnable("wordcount"); r.Status.Phase.Terminal() || len(r.Status.Attempts) != 1 {
			t.Fatalf("after %s: phase %s, %d attempts (%s)", what, r.Status.Phase, len(r.Status.Attempts), r.Status.Message)
		}
	}

	// A suspend on the way: FINISHED with lifecycle SUSPENDED ends nothing.
	patch(`{"spec":{"job":{"state":"suspended"}}}`)
	f.waitFor("wordcount", "seen suspended", func(r *v1alpha1.Runnable) bool {
		return r.Status.Health == v1alpha1.HealthHealthy && resultField(r, "lifecycleState") == "SUSPENDED"
	})
	stillOpen("a suspend")
	patch(`{"spec":{"job":{"state":"running"}}}`)
	running(f, "wordcount")
	// A savepoint upgrade on the way: its FINISHED, UPGRADING, MISSING
	// between two passes ends nothing either.
	deploys := len(f.sims[first].Deploys(f.ns, "wordcount"))
	patch(`{"spec":{"job":{"parallelism":3}}}`)
	f.waitFor("wordcount", "upgraded and running", func(r *v1alpha1.Runnable) bool {
		return len(f.sims[first].Deploys(f.ns, "wordcount")) > deploys && r.Status.Health == v1alpha1.HealthHealthy &&
			resultField(r, "jobStatus", "state") == "RUNNING" && resultField(r, "lifecycleState") == "STABLE"
	})
	stillOpen("a savepoint upgrade")
	jobID, ok := f.sims[first].Running(f.ns, "wordcount")
	if !ok {
		t.Fatal("not running after the upgrade")
	}
	waitCheckpoint(t, f, jobID)

	// The job turns unhealthy, and the next attempt must not start until
	// it has gone; on the second cluster it will never run.
	f.sims[second].Fail(f.ns, "wordcount", flinksim.Reconciling)
	f.sims[first].Fail(f.ns, "wordcount", flinksim.Reconciling)
	start := time.Now()
	r = f.waitFor("wordcount", "attempt 2 on "+second, func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 2 && r.Status.Cluster == second && r.Status.Phase != v1alpha1.PhaseQueued
	})
	if time.Since(start) < toleration*time.Second {
		t.Errorf("moved after %s, before tolerationSeconds %d", time.Since(start), toleration)
	}
	p1 := r.Status.RestorePoint
	if p1 == nil || p1.JobID != jobID || !strings.HasPrefix(p1.Path, "s3://flink/checkpoints/"+jobID+"/chk-") || p1.Attempt != 1 {
		t.Fatalf("restore point after the first failover: %+v, want a completed checkpoint of %s", p1, jobID)
	}
	if got := r.Status.Preserved["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("preserved job id %q, want %q", got, jobID)
	}
	if got := r.Status.Attempts[1].CarriedIn[attempt.RestorePathKey]; got != p1.Path {
		t.Errorf("attempt 2 carried in %v, want restorePath %s", r.Status.Attempts[1].CarriedIn, p1.Path)
	}
	var secondJob string
	sandboxtest.Eventually(t, time.Minute, "the copy on "+second+" restored from P1", func(context.Context) error {
		d := f.sims[second].Deploys(f.ns, "wordcount")
		if len(d) == 0 {
			return fmt.Errorf("not deployed")
		}
		if d[0].RestoredFrom != p1.Path {
			return fmt.Errorf("restored from %q", d[0].RestoredFrom)
		}
		secondJob = d[0].JobID
		return nil
	})
	if secondJob == jobID {
		t.Fatalf("the restored job kept id %s; the operator gives a savepoint restore a new one", jobID)
	}

	// The first cluster recovers; the copy on the second never runs: its
	// initial toleration, not the running one, decides when it moves.
	f.sims[first].Recover(f.ns, "wordcount")
	r = f.waitFor("wordcount", "back on "+first+" and running", func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 3 && r.Status.Cluster == first && r.Status.Phase == v1alpha1.PhaseRunning &&
			r.Status.Health == v1alpha1.HealthHealthy
	})
	a2 := r.Status.Attempts[1]
	if a2.EndedAt.Sub(*a2.StartedAt) < initialToleration*time.Second {
		t.Errorf("attempt 2 evicted %s after it started, before its initialTolerationSeconds %d", a2.EndedAt.Sub(*a2.StartedAt), initialToleration)
	}
	if a2.Reported["flink.apache.org/job-id"] != secondJob || !strings.Contains(a2.Note, "never ran Healthy") {
		t.Errorf("attempt 2 reported %v, note %q: want its job id %s reported and not carried", a2.Reported, a2.Note, secondJob)
	}
	if got := r.Status.Preserved["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("after the second failover the preserved job id is %q, want the proven %q", got, jobID)
	}
	if r.Status.RestorePoint == nil || r.Status.RestorePoint.Path != p1.Path {
		t.Errorf("after the second failover the restore point is %+v, want P1 %s", r.Status.RestorePoint, p1.Path)
	}
	if got := r.Status.Attempts[2].CarriedIn[attempt.RestorePathKey]; got != p1.Path {
		t.Errorf("attempt 3 carried in %v, want restorePath %s", r.Status.Attempts[2].CarriedIn, p1.Path)
	}
	if got := f.sims[first].RestoredFrom(f.ns, "wordcount"); got != p1.Path {
		t.Errorf("the job back on %s restored from %q, want P1 %s", first, got, p1.Path)
	}
	if n := len(f.objects(second, flinkGVR)); n != 0 {
		t.Errorf("%d FlinkDeployments left on %s", n, second)
	}

	// The audit log names each failover's reason, source, target and
	// restore point.
	summaries := f.historySummaries("wordcount")
	for _, want := range []string{
		"failover of attempt 1 from " + first + " (ApplicationUnhealthy) to " + second + " as attempt 2, carrying",
		"failover of attempt 2 from " + second + " (ApplicationUnhealthy) to " + first + " as attempt 3, carrying",
		"restorePath=" + p1.Path,
	} {
		if !slices.ContainsFunc(summaries, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no history entry says %q:\n%s", want, strings.Join(summaries, "\n"))
		}
	}
}

// waitCheckpoint waits until the job has a completed checkpoint in S3.
func waitCheckpoint(t *testing.T, f *farm, jobID string) {
	t.Helper()
	sandboxtest.Eventually(t, time.Minute, "a completed checkpoint of "+jobID, func(ctx context.Context) error {
		_, err := f.checkpoints.Latest(ctx, "s3://flink/checkpoints", jobID)
		return err
	})
}

// resultField reads a string of the runnable's last observed status.
func resultField(r *v1alpha1.Runnable, path ...string) string {
	s, _, _ := unstructured.NestedString(r.Status.Result, path...)
	return s
}

// A user error (the image cannot be pulled) makes the object Unknown,
// not Unhealthy: another cluster would not help, so it stays.
func TestUserErrorDoesNotFailOver(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	f.submit(strings.Replace(flinkRunnable, "%s", "a, b", 1))
	r := running(f, "wordcount")
	at := r.Status.Cluster
	f.sims[at].Fail(f.ns, "wordcount", flinksim.ImagePullBackOff)
	f.waitFor("wordcount", "Unknown", func(r *v1alpha1.Runnable) bool { return r.Status.Health == v1alpha1.HealthUnknown })
	// Past the toleration an Unhealthy runnable would move: a pass begun
	// then has decided.
	f.passedAfter(time.Now().Add(2 * toleration * time.Second))
	r = f.runnable("wordcount")
	if r.Status.Cluster != at || len(r.Status.Attempts) != 1 {
		t.Errorf("a user error moved the runnable: cluster %s, attempts %+v", r.Status.Cluster, r.Status.Attempts)
	}
}

// With nowhere else to go, nothing is deleted and the message says why.
func TestNoEligibleTargetKeepsTheRunnable(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	f.submit(strings.Replace(flinkRunnable, "%s", "a", 1))
	running(f, "wordcount")
	f.sims["a"].Fail(f.ns, "wordcount", flinksim.Reconciling)
	r := f.waitFor("wordcount", "explaining", func(r *v1alpha1.Runnable) bool {
		return strings.Contains(r.Status.Message, "no other cluster is eligible")
	})
	t.Logf("message: %s", r.Status.Message)
	if r.Status.Cluster != "a" || len(r.Status.Attempts) != 1 || r.Status.Attempts[0].EndedAt != nil {
		t.Errorf("runnable moved or ended: %+v", r.Status)
	}
	if n := len(f.objects("a", flinkGVR)); n != 1 {
		t.Errorf("%d FlinkDeployments on a, want the one still there", n)
	}
	// Recovering before any target appears ends the waiting.
	f.sims["a"].Recover(f.ns, "wordcount")
	running(f, "wordcount")
}

// On an operator 1.10+ with the FlinkStateSnapshot CRD, savepoints are
// FlinkStateSnapshot objects: the agent tracks them, and the restore point
// carried is their status.path.
func TestFlinkRestoresFromStateSnapshot(t *testing.T) {
	cs := env.Clusters(t)
	p := testPeriods
	p.stateSnapshots = true
	f := newFarmWith(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}}, p)
	t.Cleanup(func() {
		for _, c := range []string{"a", "b"} {
			_ = f.dyn[c].Resource(flinksim.SnapshotResource).Namespace(f.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	// Savepoints every 300 ms, no checkpoint directory: the snapshots are
	// the only restore points.
	spec := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	spec = strings.Replace(spec, "        state.checkpoints.dir: s3://flink/checkpoints\n", "        kubernetes.operator.periodic.savepoint.interval: 300ms\n", 1)
	f.submit(spec)
	r := running(f, "wordcount")
	first := r.Status.Cluster
	jobID, _ := f.sims[first].Running(f.ns, "wordcount")
	sandboxtest.Eventually(t, time.Minute, "a FlinkStateSnapshot in the inventory", func(ctx context.Context) error {
		var out struct {
			Items []any `json:"items"`
		}
		f.do(http.MethodGet, "/api/v1/inventory?cluster="+first+"&kind=FlinkStateSnapshot&namespace="+f.ns+"&labelSelector=job-reference.name%3Dwordcount", nil, &out)
		if len(out.Items) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	f.sims[first].Fail(f.ns, "wordcount", flinksim.Reconciling)
	r = f.waitFor("wordcount", "running on "+other(first), func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == other(first) && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
	rp := r.Status.RestorePoint
	if rp == nil || !strings.HasPrefix(rp.Source, "FlinkStateSnapshot ") || !strings.HasPrefix(rp.Path, "s3://flink/savepoints/savepoint-"+jobID[:6]+"-") {
		t.Fatalf("restore point %+v, want a FlinkStateSnapshot's status.path of job %s", rp, jobID)
	}
	if got := f.sims[other(first)].RestoredFrom(f.ns, "wordcount"); got != rp.Path {
		t.Errorf("restored from %q, want %q", got, rp.Path)
	}
}

// An AtMostOne job whose restore point is Required does not move without
// one: it stays, and its message says what is missing and what to do.
func TestRequiredRestorePointWaits(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	// No checkpoint directory and no savepoints: nothing to restore from.
	spec := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	spec = strings.Replace(spec, "        state.checkpoints.dir: s3://flink/checkpoints\n", "", 1)
	f.submit(spec)
	r := running(f, "wordcount")
	at := r.Status.Cluster
	f.sims[at].Fail(f.ns, "wordcount", flinksim.Reconciling)
	r = f.waitFor("wordcount", "waiting for a restore point", func(r *v1alpha1.Runnable) bool {
		return strings.Contains(r.Status.Message, "no proven restore point is known")
	})
	t.Logf("message: %s", r.Status.Message)
	if strings.ContainsAny(r.Status.Message, "\n\r") {
		t.Errorf("message %q is not one line", r.Status.Message)
	}
	for _, want := range []string{"the operator reports no savepoint; no completed FlinkStateSnapshot; the template configures no checkpoint directory", "restorePoint is Required", "IfAvailable"} {
		if !strings.Contains(r.Status.Message, want) {
			t.Errorf("message %q does not say %q", r.Status.Message, want)
		}
	}
	if r.Status.Cluster != at || len(r.Status.Attempts) != 1 || r.Status.Attempts[0].EndedAt != nil {
		t.Errorf("moved without a restore point: %+v", r.Status)
	}
	if n := len(f.objects(at, flinkGVR)); n != 1 {
		t.Errorf("%d FlinkDeployments on %s, want the one still there", n, at)
	}
}
