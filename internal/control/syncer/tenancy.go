package syncer

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/api/auth"
)

// forbidden makes again, from the stored deployable and the scope the
// cluster's discovery gives its kind, the decision the API made when it
// accepted the change: whether its author may put the kind on member
// clusters. The policy may have changed since, the API may not have known
// the scope, and a row may have been written behind its back; the hub's
// identity on the cluster would apply whatever it is given. It returns
// why not, or "".
//
// A spec written before purser recorded authors names none, and is asked
// about as nobody's: a cluster-scoped kind is then not applied, but the
// copy on the cluster, made by an admin's change under an older version,
// is left as it is rather than removed from every cluster at the upgrade.
// Writing it again through the API records its author.
func (s *Syncer) forbidden(d *deployable, namespaced bool, scopeOf func(schema.GroupVersionKind) auth.Scope) string {
	scope := auth.ScopeCluster
	if namespaced {
		scope = auth.ScopeNamespaced
	}
	// A namespaced object lands in the deployable's namespace whatever the
	// template says (deployable.object).
	dec := s.policy.AuthorizeKind(d.author, auth.Target{Kind: d.gvk.GroupKind(), Scope: scope, Namespace: d.rec.Namespace, ObjectNamespace: d.rec.Namespace})
	if dec.Allowed {
		// What it embeds and the pods it describes, by the policy as it
		// is now, each kind in the scope this cluster serves it.
		err := auth.NewReview(s.policy, s.pods, d.author, d.rec.Namespace, scopeOf, false).Check(d.template)
		if err == nil {
			return ""
		}
		dec.Reason = err.Error()
	}
	if !d.authored {
		return fmt.Sprintf("refused by the policy: written before purser recorded authors, and %s; any copy on the cluster is left as it is: apply the deployable again through the API to have it checked for its author",
			dec.Reason)
	}
	return fmt.Sprintf("refused by the policy: %s may not put this %s on member clusters: %s; purser's copy, if any, was removed",
		d.author.Name, auth.KindName(d.gvk.GroupKind()), dec.Reason)
}
