package submitter

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// ReasonForbiddenByPolicy ends an attempt whose object the policy does
// not allow.
const ReasonForbiddenByPolicy = "ForbiddenByPolicy"

// authorize makes again, from the stored runnable and the discovery of the
// cluster it is about to be created on, the decision the API made when it
// accepted the runnable: whether its author may put the object's kind, in
// the scope this cluster serves it, on member clusters (a refusal:
// ForbiddenByPolicy); and then admits obj, the object exactly as it is
// about to be written (its failover mutations, restore point and purser's
// labels applied), by the one admission of what is written
// (admission.Review.Written; a refusal: AdmissionDenied, naming the
// mutation to blame). The policy may have changed since, the API may not
// have known the kind's scope nor the values an attempt carries, and a row
// may have been written behind the API's back; the hub's identity on the
// cluster would create whatever it is given. A refusal is a permanent
// failure (the attempt ends, the runnable Failed, both audited).
//
// blame renders the object again with only the mutations named (none for
// an empty list), and returns the mutations it applied: called only on a
// refusal, to find the one to blame.
func (s *Submitter) authorize(ctx context.Context, row *store.Cluster, rec *store.Runnable, doc *runnableDoc, gvk schema.GroupVersionKind,
	obj *unstructured.Unstructured, blame func(only []int) (*unstructured.Unstructured, []int, error)) error {
	cc, err := s.clients.Get(row)
	if err != nil {
		return err
	}
	namespaced, err := cc.Namespaced(gvk)
	if err != nil {
		return err
	}
	scope := policy.ScopeCluster
	if namespaced {
		scope = policy.ScopeNamespaced
	}
	author := policy.User{Name: rec.Submitter}
	if doc.Author != nil {
		author = policy.User{Name: doc.Author.Name, Groups: doc.Author.Groups}
	}
	// The object lands in the runnable's namespace whatever the template
	// says (object), so that is the namespace decided on.
	d := s.policy.AuthorizeKind(author, policy.Target{Kind: gvk.GroupKind(), Scope: scope, Namespace: rec.Namespace, ObjectNamespace: rec.Namespace})
	if !d.Allowed {
		return &failure{
			err:       fmt.Errorf("the policy does not let %s create %s on %s: %s", author.Name, policy.KindName(gvk.GroupKind()), row.Name, d.Reason),
			permanent: true, reason: ReasonForbiddenByPolicy,
		}
	}
	// What it embeds and the pods it describes, by the policy as it is
	// now, each kind in the scope this cluster serves it.
	review := policy.NewReview(s.policy, s.pods, author, rec.Namespace, func(gvk schema.GroupVersionKind) policy.Scope {
		namespaced, err := cc.Namespaced(gvk)
		switch {
		case err != nil:
			return policy.ScopeUnknown
		case namespaced:
			return policy.ScopeNamespaced
		}
		return policy.ScopeCluster
	}, true)
	err = review.Written(obj.Object, "")
	if err == nil {
		return nil
	}
	if cause := mutationToBlame(review, blame); cause != "" {
		err = review.Written(obj.Object, cause)
	}
	return &failure{
		err:       fmt.Errorf("the policy does not let %s run this on %s: %w", author.Name, row.Name, err),
		permanent: true, reason: admission.ReasonDenied,
	}
}

// mutationToBlame names what makes the refused object differ from one the
// review admits: "" when the template itself (with purser's labels) is
// refused, the first mutation that alone makes it refused, or all of them
// together.
func mutationToBlame(review admission.Review, blame func(only []int) (*unstructured.Unstructured, []int, error)) string {
	if blame == nil {
		return ""
	}
	base, _, err := blame([]int{})
	if err != nil || review.Written(base.Object, "") != nil {
		return ""
	}
	_, applied, err := blame(nil)
	if err != nil || len(applied) == 0 {
		return ""
	}
	for _, i := range applied {
		one, _, err := blame([]int{i})
		if err == nil && review.Written(one.Object, "") != nil {
			return fmt.Sprintf("spec.failover.mutations[%d]", i)
		}
	}
	return "spec.failover.mutations together"
}
