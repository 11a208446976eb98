package submitter_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/hub/store"
)

// TestAdmissionOfTheObjectAsWritten: a runnable stored behind the API,
// whose template passes and whose failover mutation makes the object
// run in the host's PID namespace, is refused by the submitter's
// admission of the object as it is about to be created: the attempt
// fails with AdmissionDenied naming the mutation and the rule, audited,
// and nothing reaches the cluster. The same template without it runs.
func TestAdmissionOfTheObjectAsWritten(t *testing.T) {
	f, cs := startWithPlatformAdmins(t)
	tenant := &store.Author{Name: "alice", Groups: []string{"team-a"}}
	job := func(name string) map[string]any {
		return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "busybox"}}}}}}
	}
	hostPID := &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{
		{When: "true", Path: "spec.backoffLimit", Value: "1"},
		{When: "restorePath == ''", Path: "spec.template.spec.hostPID", Value: "true"},
	}}
	uid := f.submit("mutated", runnableSpec{author: tenant, template: job("mutated"), failover: hostPID})
	_, msg, attempts := f.waitPhase("mutated", v1alpha1.PhaseFailed)
	if n := len(attempts); n != 1 || attempts[0].Reason != admission.ReasonDenied ||
		!strings.Contains(attempts[0].Message, "as spec.failover.mutations[1] renders it") || !strings.Contains(attempts[0].Message, "host namespaces (hostPID=true)") {
		t.Fatalf("%s; attempts %+v", msg, attempts)
	}
	if got := actions(f.audit("mutated")); !strings.Contains(strings.Join(got, " "), "submitter:fail") {
		t.Errorf("the refusal is not audited: %v", got)
	}
	jobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	for _, c := range cs {
		if objs := f.objects(c.Name(), jobs, uid); len(objs) != 0 {
			t.Errorf("the refused Job reached %s: %v", c.Name(), objs[0].GetName())
		}
		if _, err := f.dyn[c.Name()].Resource(jobs).Namespace(f.ns).Get(context.Background(), "mutated", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Job named mutated is on %s (%v)", c.Name(), err)
		}
	}

	f.submit("plain", runnableSpec{author: tenant, template: job("plain"), failover: &v1alpha1.Failover{Mutations: hostPID.Mutations[:1]}})
	rec, _, _ := f.waitPhase("plain", v1alpha1.PhaseSubmitted)
	if objs := f.objects(rec.Cluster, jobs, rec.UID); len(objs) != 1 {
		t.Fatalf("the plain Job is not on %s: %d objects", rec.Cluster, len(objs))
	}
}
