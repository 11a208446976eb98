package failover_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A running FlinkDeployment gets a new parallelism as `purser apply -f`
// sends it (a PUT of the runnable): the object on its cluster changes in
// place (same uid, new spec.job.parallelism, purser's labels kept), the
// simulated operator upgrades it by its upgradeMode savepoint (stops the
// job with a savepoint and restores the new one from it), and the
// runnable stays Running on attempt 1 with the failover controller
// running all along; the history names who changed it. A later attempt
// (a failover) is created from the new spec, and an update of a suspended
// job keeps it suspended until it is resumed. A PUT with a stale
// resourceVersion is 409 and changes nothing, here or on the cluster, and
// a running Job's change is refused with the rerun advice.
func TestUpdateInPlace(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	manifest := strings.Replace(flinkRunnable, "%s", "a, b", 1)
	f.submit(manifest)
	r := running(f, "wordcount")
	first := r.Status.Cluster
	fd := f.dyn[first].Resource(flinkGVR).Namespace(f.ns)
	get := func() *unstructured.Unstructured {
		t.Helper()
		obj, err := fd.Get(f.ctx, "wordcount", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	before := get()
	oldJob, ok := f.sims[first].Running(f.ns, "wordcount")
	if !ok {
		t.Fatal("the simulator runs no job")
	}
	deploys := len(f.sims[first].Deploys(f.ns, "wordcount"))

	// Stale: the resourceVersion before the last change. The simulator
	// writes the object's status all the time, so its spec's count,
	// metadata.generation, is what must not move.
	changed := strings.Replace(strings.Replace(manifest, "parallelism: 2", "parallelism: 3", 1),
		"metadata: {name: wordcount}", "metadata: {name: wordcount, namespace: "+f.ns+"}", 1)
	status := f.put(changed, r.Metadata.ResourceVersion, -1)
	if status.Code != http.StatusConflict || !strings.Contains(status.Message, "read it again and resend the change") {
		t.Fatalf("stale PUT: %d %q", status.Code, status.Message)
	}
	if now := f.runnable("wordcount"); now.Metadata.Generation != 1 || now.Status.Update != nil {
		t.Fatalf("after the stale PUT the runnable is at generation %d, status.update %+v", now.Metadata.Generation, now.Status.Update)
	}
	if obj := get(); obj.GetGeneration() != before.GetGeneration() || parallelism(obj) != 2 {
		t.Fatalf("after the stale PUT the object is at generation %d (was %d), parallelism %d", obj.GetGeneration(), before.GetGeneration(), parallelism(obj))
	}

	// What `purser apply -f` does with the changed manifest.
	start := time.Now()
	applied, err := f.api.Apply(f.ctx, v1alpha1.KindRunnable, f.ns, "wordcount", []byte(changed), "application/yaml")
	if err != nil || applied.Verb != client.VerbConfigured {
		t.Fatalf("apply: %v %v", applied, err)
	}
	r = f.waitFor("wordcount", "the update applied on "+first, func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 1 && r.Status.Attempts[0].Generation == 2
	})
	if !slices.ContainsFunc(f.historySummaries("wordcount"), func(s string) bool {
		return strings.HasPrefix(s, "applied generation 2 of the spec to FlinkDeployment "+f.ns+"/wordcount on "+first+" in place (attempt 1;") &&
			strings.Contains(s, "by its upgradeMode savepoint, as admin asked")
	}) {
		t.Fatalf("no entry says the update was applied: %q", f.historySummaries("wordcount"))
	}
	if r.Metadata.Generation != 2 || r.Status.Update == nil || r.Status.Update.By != "admin" || r.Status.Update.Error != "" {
		t.Fatalf("after the update: generation %d, status.update %+v", r.Metadata.Generation, r.Status.Update)
	}
	t.Logf("the update reached the object on %s %s after the apply", first, time.Since(start).Round(time.Millisecond))
	obj := get()
	if obj.GetUID() != before.GetUID() || parallelism(obj) != 3 || obj.GetGeneration() <= before.GetGeneration() {
		t.Fatalf("the object on %s: uid %s (was %s), parallelism %d, generation %d (was %d)",
			first, obj.GetUID(), before.GetUID(), parallelism(obj), obj.GetGeneration(), before.GetGeneration())
	}
	if l := obj.GetLabels(); l[v1alpha1.LabelRunnableUID] != r.Metadata.UID || l[v1alpha1.LabelAttempt] != "1" || l[v1alpha1.LabelConsistency] != "AtMostOne" {
		t.Fatalf("purser's labels on the updated object: %v", l)
	}
	if !slices.ContainsFunc(obj.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == clusters.UpdateFieldManager && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Fatalf("no server-side apply by %s in the object's managedFields", clusters.UpdateFieldManager)
	}

	// The operator's savepoint upgrade: the job stopped with a savepoint
	// and the new one restored from it, and nothing failed over.
	r = f.waitFor("wordcount", "upgraded and running", func(r *v1alpha1.Runnable) bool {
		return len(f.sims[first].Deploys(f.ns, "wordcount")) > deploys && r.Status.Health == v1alpha1.HealthHealthy &&
			resultField(r, "jobStatus", "state") == "RUNNING" && resultField(r, "lifecycleState") == "STABLE"
	})
	t.Logf("the job upgraded and running again %s after the apply", time.Since(start).Round(time.Millisecond))
	upgrade := f.sims[first].Deploys(f.ns, "wordcount")[deploys]
	if !strings.HasPrefix(upgrade.RestoredFrom, "s3://flink/savepoints/savepoint-"+oldJob[:6]+"-") {
		t.Fatalf("the upgraded job restored from %q, not from a savepoint of job %s", upgrade.RestoredFrom, oldJob)
	}
	if r.Status.Phase != v1alpha1.PhaseRunning || len(r.Status.Attempts) != 1 || r.Status.Cluster != first {
		t.Fatalf("after the upgrade: phase %s on %s, %d attempts (%s)", r.Status.Phase, r.Status.Cluster, len(r.Status.Attempts), r.Status.Message)
	}
	entries := f.entries("wordcount")
	if !slices.Contains(entries, "admin:update") || !slices.Contains(entries, "submitter:apply-update") ||
		slices.Index(entries, "admin:update") > slices.Index(entries, "submitter:apply-update") {
		t.Fatalf("history %v: no update by admin followed by its application", entries)
	}

	// A failover: the next attempt is made from the new spec.
	waitCheckpoint(t, f, upgrade.JobID)
	f.sims[first].Fail(f.ns, "wordcount", flinksim.Reconciling)
	second := other(first)
	r = f.waitFor("wordcount", "attempt 2 on "+second, func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 2 && r.Status.Cluster == second && r.Status.Attempts[1].UID != ""
	})
	if r.Status.Attempts[1].Generation != 2 {
		t.Fatalf("attempt 2 carries generation %d", r.Status.Attempts[1].Generation)
	}
	moved, err := f.dyn[second].Resource(flinkGVR).Namespace(f.ns).Get(f.ctx, "wordcount", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if parallelism(moved) != 3 {
		t.Fatalf("attempt 2's object has parallelism %d, not the updated 3", parallelism(moved))
	}

	// Suspended, an update keeps the job suspended; resumed, the job runs
	// with it (the suspend's field manager applies only spec.job.state,
	// and drops nothing the update applied).
	running(f, "wordcount")
	f.do(http.MethodPost, "/api/v1/runnables/"+f.ns+"/wordcount/suspend", nil, nil)
	f.waitFor("wordcount", "suspended on "+second, func(r *v1alpha1.Runnable) bool {
		return r.Status.Phase == v1alpha1.PhaseSuspended && r.Status.Suspension != nil && r.Status.Suspension.Applied
	})
	four := strings.Replace(changed, "parallelism: 3", "parallelism: 4", 1)
	if applied, err := f.api.Apply(f.ctx, v1alpha1.KindRunnable, f.ns, "wordcount", []byte(four), "application/yaml"); err != nil || applied.Verb != client.VerbConfigured {
		t.Fatalf("apply while suspended: %v %v", applied, err)
	}
	f.waitFor("wordcount", "the update applied while suspended", func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 2 && r.Status.Attempts[1].Generation == 3 && r.Status.Phase == v1alpha1.PhaseSuspended
	})
	sd := f.dyn[second].Resource(flinkGVR).Namespace(f.ns)
	if obj, err := sd.Get(f.ctx, "wordcount", metav1.GetOptions{}); err != nil || parallelism(obj) != 4 || jobState(obj) != "suspended" {
		t.Fatalf("the suspended object after the update: parallelism %d, job state %q (%v)", parallelism(obj), jobState(obj), err)
	}
	f.do(http.MethodPost, "/api/v1/runnables/"+f.ns+"/wordcount/resume", nil, nil)
	running(f, "wordcount")
	if obj, err := sd.Get(f.ctx, "wordcount", metav1.GetOptions{}); err != nil || parallelism(obj) != 4 || jobState(obj) != "running" {
		t.Fatalf("the resumed object: parallelism %d, job state %q (%v)", parallelism(obj), jobState(obj), err)
	}

	// A running Job: its pod template cannot change, and a stale PUT is
	// refused before that.
	f.submit(fmt.Sprintf(jobRunnable, "nightly", "AtLeastOne"))
	j := f.waitFor("nightly", "Running", func(r *v1alpha1.Runnable) bool { return r.Status.Phase == v1alpha1.PhaseRunning })
	jobs := f.dyn[j.Status.Cluster].Resource(jobsGVR).Namespace(f.ns)
	var job *unstructured.Unstructured
	sandboxtest.Eventually(t, wait, "the Job's pod ready", func(ctx context.Context) error {
		var err error
		if job, err = jobs.Get(ctx, "nightly", metav1.GetOptions{}); err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(job.Object, "status", "ready"); n != 1 {
			return fmt.Errorf("%d pods ready", n)
		}
		return nil
	})
	jobChanged := strings.Replace(fmt.Sprintf(jobRunnable, "nightly", "AtLeastOne"), "image: busybox", "image: busybox:1.37", 1)
	jobChanged = strings.Replace(jobChanged, "metadata: {name: nightly}", "metadata: {name: nightly, namespace: "+f.ns+"}", 1)
	// Against the resourceVersion just read (read again should the
	// ingester have written meanwhile).
	sandboxtest.Eventually(t, wait, "a PUT of the running Job refused for its pod template", func(context.Context) error {
		j = f.runnable("nightly")
		status = f.put(jobChanged, j.Metadata.ResourceVersion, 0)
		if status.Code != http.StatusConflict || !strings.Contains(status.Message, "a Job's pod template is immutable on its cluster") ||
			!strings.Contains(status.Message, "rerun it (POST .../rerun)") {
			return fmt.Errorf("PUT of a running Job: %d %q", status.Code, status.Message)
		}
		return nil
	})
	status = f.put(jobChanged, j.Metadata.ResourceVersion, -1)
	if status.Code != http.StatusConflict || !strings.Contains(status.Message, "read it again") {
		t.Fatalf("stale PUT of a running Job: %d %q", status.Code, status.Message)
	}
	if now := f.runnable("nightly"); now.Metadata.ResourceVersion != j.Metadata.ResourceVersion || now.Metadata.Generation != 1 {
		t.Fatalf("after the refused PUTs the runnable is at resourceVersion %s (was %s), generation %d",
			now.Metadata.ResourceVersion, j.Metadata.ResourceVersion, now.Metadata.Generation)
	}
	after, err := jobs.Get(f.ctx, "nightly", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != job.GetResourceVersion() {
		t.Fatalf("the Job on its cluster moved from resourceVersion %s to %s", job.GetResourceVersion(), after.GetResourceVersion())
	}
}

// put sends manifest as PUT of its runnable at resourceVersion rv plus
// delta, and returns the API's answer (Code 200 when it took it).
func (f *farm) put(manifest, rv string, delta int) v1alpha1.Status {
	f.t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		f.t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(rv, &n); err != nil {
		f.t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	meta["resourceVersion"] = fmt.Sprint(n + delta)
	data, err := yaml.Marshal(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		f.t.Fatal(err)
	}
	code, err := f.api.Do(f.ctx, http.MethodPut, "/api/v1/runnables/"+f.ns+"/"+meta["name"].(string), nil, js, "application/json", nil)
	if st := (*v1alpha1.Status)(nil); errors.As(err, &st) {
		return *st
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return v1alpha1.Status{Code: code}
}

// entries returns the runnable's audit entries as actor:action, oldest
// first.
func (f *farm) entries(name string) []string {
	f.t.Helper()
	var out struct {
		Items []struct {
			Actor  string `json:"actor"`
			Action string `json:"action"`
		} `json:"items"`
	}
	f.do(http.MethodGet, "/api/v1/history?namespace="+f.ns+"&name="+name, nil, &out)
	var s []string
	for _, e := range out.Items {
		s = append(s, e.Actor+":"+e.Action)
	}
	return s
}

func parallelism(obj *unstructured.Unstructured) int64 {
	if obj == nil {
		return 0
	}
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "job", "parallelism")
	return n
}

func jobState(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(obj.Object, "spec", "job", "state")
	return s
}
