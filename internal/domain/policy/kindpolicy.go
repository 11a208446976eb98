package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/admission"
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
