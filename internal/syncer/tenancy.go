package syncer

import (
	"fmt"

	"github.com/purser-io/purser/internal/auth"
)

// KindPolicy decides whether a user may put a kind of some scope on
// member clusters from a namespace: *auth.Policy, or something that
// follows a policy file as it is reloaded.
type KindPolicy interface {
	AuthorizeKind(u auth.User, t auth.Target) auth.KindDecision
}

// policyOrEmpty is p, or for nil the policy with no admins and no rules.
func policyOrEmpty(p KindPolicy) KindPolicy {
	if p != nil {
		return p
	}
	empty, _ := auth.NewPolicy(auth.PolicyFile{})
	return empty
}

// forbidden makes again, from the stored deployable and the scope the
// cluster's discovery gives its kind, the decision the API made when it
// accepted the change: whether its author may put the kind on member
// clusters. The policy may have changed since, the API may not have known
// the scope, and a row may have been written behind its back; the hub's
// identity on the cluster would apply whatever it is given. It returns
// why not, or "".
func (s *Syncer) forbidden(d *deployable, namespaced bool) string {
	scope := auth.ScopeCluster
	if namespaced {
		scope = auth.ScopeNamespaced
	}
	// A namespaced object lands in the deployable's namespace whatever the
	// template says (deployable.object).
	dec := s.policy.AuthorizeKind(d.author, auth.Target{Kind: d.gvk.GroupKind(), Scope: scope, Namespace: d.rec.Namespace, ObjectNamespace: d.rec.Namespace})
	if dec.Allowed {
		return ""
	}
	return fmt.Sprintf("refused by the policy: %s may not put %s on member clusters: %s; purser's copy, if any, was removed",
		d.author.Name, auth.KindName(d.gvk.GroupKind()), dec.Reason)
}
