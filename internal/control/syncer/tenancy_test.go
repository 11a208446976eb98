package syncer

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// platformAdmins is a policy whose only admins are the group platform.
func platformAdmins(t testing.TB) *policy.Policy {
	p, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"group:platform"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reloadable is a policy that a test replaces, as a reloaded policy file
// replaces the one a component started with.
type reloadable struct{ p atomic.Pointer[policy.Policy] }

func (r *reloadable) AuthorizeKind(u policy.User, t policy.Target) policy.KindDecision {
	return r.p.Load().AuthorizeKind(u, t)
}

func (r *reloadable) PodSecurityLevel(ns string) admission.Level {
	return r.p.Load().PodSecurityLevel(ns)
}

func (r *reloadable) BindableClusterRoles(ns string) []string {
	return r.p.Load().BindableClusterRoles(ns)
}

func (r *reloadable) EmbeddedRules() []admission.EmbeddedRule { return r.p.Load().EmbeddedRules() }

func (r *reloadable) OpaqueKind(u policy.User, ns string, gk schema.GroupKind) bool {
	return r.p.Load().OpaqueKind(u, ns, gk)
}

// TestPolicyDecidesBeforeApply: the syncer asks the policy again before it
// applies, with the scope the cluster's discovery gives the kind and the
// author recorded with the deployable. A tenant's cluster-scoped object
// stored behind the API's back never reaches a cluster; an admin's does;
// and a kind the policy denies after it was applied is removed.
func TestPolicyDecidesBeforeApply(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	pol := &reloadable{}
	pol.p.Store(platformAdmins(t))
	f.start(syncerOpts{policy: pol})
	all := names(f.clusters...)
	ctx := context.Background()
	tenant := &store.Author{Name: "alice", Groups: []string{"team-a"}}
	roleName := "purser-tenancy-" + f.ns
	clusterRole := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": roleName},
		"rules":    []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}},
	}
	refused := f.putAs(tenant, "escalate", clusterRole, v1alpha1.Placement{})
	waitError := func(rec *store.Deployable, want string) {
		t.Helper()
		sandboxtest.Eventually(t, wait, rec.Name+" refused on every cluster", func(ctx context.Context) error {
			sts, err := f.statuses(ctx, rec.UID)
			if err != nil {
				return err
			}
			for _, c := range all {
				if st := sts[c]; st == nil || st.State != string(v1alpha1.StateError) || !strings.Contains(st.Message, want) {
					return fmt.Errorf("%s: %+v", c, st)
				}
			}
			return nil
		})
	}
	waitError(refused, "ClusterRole.rbac.authorization.k8s.io is cluster-scoped")
	for _, c := range all {
		if _, err := f.kube[c].RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a tenant's ClusterRole reached %s (%v)", c, err)
		}
	}

	// The same object by an admin (through a group) is applied.
	admin := f.putAs(&store.Author{Name: "ops", Groups: []string{"platform"}}, "escalate", clusterRole, v1alpha1.Placement{})
	f.waitSynced(admin, all...)
	t.Cleanup(func() {
		for _, c := range all {
			_ = f.kube[c].RbacV1().ClusterRoles().Delete(context.Background(), roleName, metav1.DeleteOptions{})
		}
	})

	// A tenant's ConfigMap is applied; then the policy denies ConfigMaps
	// in the namespace, and the copy goes.
	cm := f.putAs(tenant, "settings", configMapTemplate(map[string]any{"k": "v"}), v1alpha1.Placement{})
	f.waitSynced(cm, all...)
	denied, err := policy.NewPolicy(policy.PolicyFile{
		Admins:     []string{"group:platform"},
		Namespaces: map[string]policy.NamespacePolicy{f.ns: {Kinds: policy.KindRules{Deny: []string{"ConfigMap"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pol.p.Store(denied)
	// Touch the deployable so that the syncer looks at it now rather than
	// at its next resync (the policy's reload would do as much).
	cm = f.putAs(tenant, "settings", configMapTemplate(map[string]any{"k": "w"}), v1alpha1.Placement{})
	waitError(cm, "namespaces."+f.ns+".kinds.deny")
	for _, c := range all {
		f.waitConfigMapData(c, "settings", "k", "")
	}
	// The admin's ClusterRole stays: the denial is of ConfigMaps only.
	for _, c := range all {
		if _, err := f.kube[c].RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); err != nil {
			t.Fatalf("the admin's ClusterRole left %s: %v", c, err)
		}
	}

	// A spec as an older version stored it, without its author: it is not
	// applied, but the copy an admin's change made is not removed from
	// every cluster either.
	old := f.putAs(nil, "escalate", clusterRole, v1alpha1.Placement{})
	waitError(old, "written before purser recorded authors")
	for _, c := range all {
		if _, err := f.kube[c].RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); err != nil {
			t.Fatalf("the ClusterRole of a spec without author was removed from %s: %v", c, err)
		}
	}
}
