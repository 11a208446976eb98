package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/kinds"
)

// KindPolicy is what whoever acts on a member cluster (the submitter, the
// syncer) asks again right before it acts: whether a user may put a kind
// of some scope there from a namespace, and what the namespace's objects
// may run (its Pod Security level, the ClusterRoles its RoleBindings may
// grant, where kinds keep the objects they create). *Policy answers it,
// and so does internal/api/auth's Identities, which follows the policy
// file as it is reloaded.
type KindPolicy interface {
	AuthorizeKind(u User, t Target) KindDecision
	OpaqueKind(u User, ns string, gk schema.GroupKind) bool
	PodSecurityLevel(ns string) admission.Level
	BindableClusterRoles(ns string) []string
	EmbeddedRules() []admission.EmbeddedRule
}

var _ KindPolicy = (*Policy)(nil)

// KindPolicyOrEmpty is p, or for nil the policy with no admins and no
// rules, which allows namespaced kinds in their own namespace only: a
// component given no policy still never creates cluster-scoped objects.
func KindPolicyOrEmpty(p KindPolicy) KindPolicy {
	if p != nil {
		return p
	}
	empty, _ := NewPolicy(PolicyFile{}) // an empty file has nothing to refuse
	return empty
}

// NewReview is the admission review of a runnable's or a deployable's
// template by its author, from namespace ns, as whoever acts on a member
// cluster makes it again: scope says how that cluster serves a kind (its
// discovery), for the template and every object it embeds.
func NewReview(p KindPolicy, pods *admission.Checker, author User, ns string, scope func(schema.GroupVersionKind) Scope, runnable bool) admission.Review {
	return admission.Review{
		Checker: pods, Level: p.PodSecurityLevel(ns), ClusterRoles: p.BindableClusterRoles(ns), Embedded: p.EmbeddedRules(),
		Namespace: ns, Runnable: runnable,
		Undriven: Undriven(p, author, ns),
		Kind: func(obj map[string]any, path string) error {
			u := unstructured.Unstructured{Object: obj}
			gvk := u.GroupVersionKind()
			objNS := u.GetNamespace()
			if objNS == "" {
				objNS = ns
			}
			d := p.AuthorizeKind(author, Target{Kind: gvk.GroupKind(), Scope: scope(gvk), Namespace: ns, ObjectNamespace: objNS})
			if d.Allowed {
				return nil
			}
			return fmt.Errorf("%s: %s may not put %s in namespace %s from %s: %s", path, author.Name, KindName(gvk.GroupKind()), objNS, ns, d.Reason)
		},
	}
}

// Undriven is the review's rule for kinds without a driver, for author's
// objects from namespace ns: a kind some driver knows, or one every
// kube-apiserver serves built in (those that make pods all have drivers),
// passes; any other (a custom resource whose controller may run pods
// purser cannot see) only where the policy lists it in kinds.opaque.
func Undriven(p KindPolicy, author User, ns string) func(schema.GroupKind) error {
	return func(gk schema.GroupKind) error {
		if kinds.Default().Has(gk) || BuiltinScope(gk) != ScopeUnknown || p.OpaqueKind(author, ns, gk) {
			return nil
		}
		return fmt.Errorf("purser has no driver for kind %s: it cannot see the pods its controller would make, so it judges none of them; "+
			"an admin may list it in the policy's namespaces.%s.kinds.opaque to place it unjudged", KindName(gk), ns)
	}
}
