package submitter

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/hub/store"
)

// ReasonForbiddenByPolicy ends an attempt whose object the policy does
// not allow.
const ReasonForbiddenByPolicy = "ForbiddenByPolicy"

// authorize makes again, from the stored runnable and the discovery of the
// cluster it is about to be created on, the decision the API made when it
// accepted the runnable: whether its author may put the object's kind, in
// the scope this cluster serves it, on member clusters. The policy may
// have changed since, the API may not have known the kind's scope, and a
// row may have been written behind the API's back; the hub's identity on
// the cluster would create whatever it is given. A refusal is a permanent
// failure (the attempt ends, the runnable Failed, both audited).
func (s *Submitter) authorize(ctx context.Context, row *store.Cluster, rec *store.Runnable, doc *runnableDoc, gvk schema.GroupVersionKind) error {
	cc, err := s.clients.Get(row)
	if err != nil {
		return err
	}
	namespaced, err := cc.Namespaced(gvk)
	if err != nil {
		return err
	}
	scope := auth.ScopeCluster
	if namespaced {
		scope = auth.ScopeNamespaced
	}
	author := auth.User{Name: rec.Submitter}
	if doc.Author != nil {
		author = auth.User{Name: doc.Author.Name, Groups: doc.Author.Groups}
	}
	// The object lands in the runnable's namespace whatever the template
	// says (object), so that is the namespace decided on.
	d := s.policy.AuthorizeKind(author, auth.Target{Kind: gvk.GroupKind(), Scope: scope, Namespace: rec.Namespace, ObjectNamespace: rec.Namespace})
	if !d.Allowed {
		return &failure{
			err:       fmt.Errorf("the policy does not let %s create %s on %s: %s", author.Name, auth.KindName(gvk.GroupKind()), row.Name, d.Reason),
			permanent: true, reason: ReasonForbiddenByPolicy,
		}
	}
	// What it embeds and the pods it describes, by the policy as it is
	// now, each kind in the scope this cluster serves it.
	review := auth.NewReview(s.policy, s.pods, author, rec.Namespace, func(gvk schema.GroupVersionKind) auth.Scope {
		namespaced, err := cc.Namespaced(gvk)
		switch {
		case err != nil:
			return auth.ScopeUnknown
		case namespaced:
			return auth.ScopeNamespaced
		}
		return auth.ScopeCluster
	}, true)
	if err := review.Check(doc.Spec.Template); err != nil {
		return &failure{
			err:       fmt.Errorf("the policy does not let %s run this on %s: %w", author.Name, row.Name, err),
			permanent: true, reason: ReasonForbiddenByPolicy,
		}
	}
	return nil
}
