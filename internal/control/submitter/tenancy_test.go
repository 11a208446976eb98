package submitter_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/sandbox"
)

// TestPolicyDecidesBeforeCreate: runnables stored without the API's
// check (behind its back, or before a rule) are checked again right
// before the create, with the scope the cluster's discovery gives: a
// tenant's ClusterRoleBinding to cluster-admin and a Namespace named
// after another team's fail, audited, and reach no cluster; an admin's
// Namespace is created.
func TestPolicyDecidesBeforeCreate(t *testing.T) {
	f, cs := startWithPlatformAdmins(t)
	tenant := &store.Author{Name: "alice", Groups: []string{"team-a"}}
	suffix := f.ns
	crbName, otherNS, adminNS := "tenant-admin-"+suffix, "team-b-"+suffix, "ops-"+suffix
	f.submit("escalate", runnableSpec{author: tenant, template: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": crbName},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}},
	}})
	f.submit("takeover", runnableSpec{author: tenant, template: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": otherNS},
	}})
	for _, name := range []string{"escalate", "takeover"} {
		_, msg, attempts := f.waitPhase(name, v1alpha1.PhaseFailed)
		if n := len(attempts); n != 1 || attempts[0].Reason != submitter.ReasonForbiddenByPolicy || !strings.Contains(msg, "cluster-scoped") {
			t.Fatalf("%s: %s; attempts %+v", name, msg, attempts)
		}
		if got := actions(f.audit(name)); !strings.Contains(strings.Join(got, " "), "submitter:fail") {
			t.Errorf("%s: the refusal is not audited: %v", name, got)
		}
	}
	crbs := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	for _, c := range cs {
		if _, err := f.dyn[c.Name()].Resource(crbs).Get(context.Background(), crbName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the tenant's ClusterRoleBinding reached %s (%v)", c.Name(), err)
		}
		if _, err := f.dyn[c.Name()].Resource(namespaces).Get(context.Background(), otherNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the tenant's Namespace reached %s (%v)", c.Name(), err)
		}
	}

	f.submit("ops", runnableSpec{author: &store.Author{Name: "ops", Groups: []string{"platform"}}, template: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": adminNS},
	}})
	rec, _, _ := f.waitPhase("ops", v1alpha1.PhaseSubmitted)
	t.Cleanup(func() {
		_ = f.dyn[rec.Cluster].Resource(namespaces).Delete(context.Background(), adminNS, metav1.DeleteOptions{})
	})
	if _, err := f.dyn[rec.Cluster].Resource(namespaces).Get(context.Background(), adminNS, metav1.GetOptions{}); err != nil {
		t.Fatalf("the admin's Namespace is not on %s: %v", rec.Cluster, err)
	}
}

// startWithPlatformAdmins starts a submitter on the shared clusters whose
// policy's only admins are the group platform: the tests of what a spec
// stored behind the API may make a cluster run, where every author but
// that group is a tenant.
func startWithPlatformAdmins(t *testing.T) (*fixture, []*sandbox.Cluster) {
	t.Helper()
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"group:platform"}})
	if err != nil {
		t.Fatal(err)
	}
	f.start(submitter.Config{Policy: pol})
	return f, cs
}
