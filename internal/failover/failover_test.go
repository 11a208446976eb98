package failover_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
)

// flinkRunnable is the seed's FlinkDeployment: it fails over when its job
// stays unhealthy, keeps its job id, and restores from the checkpoint
// derived from that id.
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
      job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: 2, upgradeMode: savepoint}
  placement:
    clusterAffinity: {clusterNames: [%s]}
  failover:
    consistency: AtMostOne
    application:
      tolerationSeconds: 3
      purgeMode: Directly
      statePreservation:
        rules:
        - {aliasLabelName: flink.apache.org/job-id, jsonPath: "{.jobStatus.jobId}"}
    mutations:
    - when: "'flink.apache.org/job-id' in preserved"
      path: spec.job.initialSavepointPath
      value: "'s3://checkpoints/' + preserved['flink.apache.org/job-id']"
`

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

func TestFlinkFailsOverWithItsJobID(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	f.submit(strings.Replace(flinkRunnable, "%s", "a, b", 1))

	r := running(f, "wordcount")
	first := r.Status.Cluster
	objs := f.objects(first, flinkGVR)
	if len(objs) != 1 {
		t.Fatalf("%d FlinkDeployments on %s, want 1", len(objs), first)
	}
	jobID, _, _ := unstructured.NestedString(objs[0].Object, "status", "jobStatus", "jobId")
	if len(jobID) != 32 {
		t.Fatalf("job id %q", jobID)
	}

	// The job turns RECONCILING: after tolerationSeconds it moves.
	f.sims[first].Fail(f.ns, "wordcount", flinksim.Reconciling)
	start := time.Now()
	r = f.waitFor("wordcount", "running elsewhere", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == other(first) && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
	t.Logf("failed over from %s to %s in %s", first, r.Status.Cluster, time.Since(start).Round(time.Millisecond))
	if time.Since(start) < toleration*time.Second {
		t.Errorf("moved after %s, before tolerationSeconds %d", time.Since(start), toleration)
	}
	if got := r.Status.Preserved["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("preserved job id %q, want %q", got, jobID)
	}
	second := r.Status.Cluster
	if n := len(f.objects(first, flinkGVR)); n != 0 {
		t.Errorf("%d FlinkDeployments left on %s", n, first)
	}
	moved := f.objects(second, flinkGVR)
	if len(moved) != 1 {
		t.Fatalf("%d FlinkDeployments on %s, want 1", len(moved), second)
	}
	if got := moved[0].GetLabels()["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("label flink.apache.org/job-id = %q, want %q", got, jobID)
	}
	want := "s3://checkpoints/" + jobID
	if got, _, _ := unstructured.NestedString(moved[0].Object, "spec", "job", "initialSavepointPath"); got != want {
		t.Errorf("initialSavepointPath = %q, want %q", got, want)
	}
	if got := f.sims[second].RestoredFrom(f.ns, "wordcount"); got != want {
		t.Errorf("the job on %s restored from %q, want %q", second, got, want)
	}
	if n := len(r.Status.Attempts); n != 2 || r.Status.Attempts[0].Result != "Evicted" ||
		r.Status.Attempts[0].Reason != "ApplicationUnhealthy" || r.Status.Attempts[0].Cleanup != "Done" {
		t.Errorf("attempts: %+v", r.Status.Attempts)
	}

	// A second failover, back to the first cluster, keeps the same id.
	f.sims[first].Recover(f.ns, "wordcount")
	f.sims[second].Fail(f.ns, "wordcount", flinksim.Reconciling)
	r = f.waitFor("wordcount", "back on "+first, func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == first && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
	if got := r.Status.Preserved["flink.apache.org/job-id"]; got != jobID {
		t.Errorf("after the second failover the preserved job id is %q, want %q", got, jobID)
	}
	back := f.objects(first, flinkGVR)
	if len(back) != 1 || back[0].GetLabels()["flink.apache.org/job-id"] != jobID {
		t.Errorf("objects on %s after the second failover: %v", first, back)
	}
	if id, ok := f.sims[first].Running(f.ns, "wordcount"); !ok || id != jobID {
		t.Errorf("job on %s: id %q running %v, want %q", first, id, ok, jobID)
	}
	if n := len(f.objects(second, flinkGVR)); n != 0 {
		t.Errorf("%d FlinkDeployments left on %s", n, second)
	}
	h := f.history("wordcount")
	for _, a := range []string{"place", "submit", "evict", "purge"} {
		if !slices.Contains(h, a) {
			t.Errorf("history %v has no %q", h, a)
		}
	}
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
