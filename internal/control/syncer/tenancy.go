package syncer

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
)

// forbidden makes again, from the stored deployable and the scope the
// cluster's discovery gives its kind, the decision the API made when it
// accepted the change: whether its author may put the kind on member
// clusters. The policy may have changed since, the API may not have known
// the scope, and a row may have been written behind its back; the hub's
// identity on the cluster would apply whatever it is given. It returns
// why not, or "". What the object embeds and the pods it describes are
// judged by admit, on the object as this cluster would get it.
//
// A spec written before purser recorded authors names none, and is asked
// about as nobody's: a cluster-scoped kind is then not applied, but the
// copy on the cluster, made by an admin's change under an older version,
// is left as it is rather than removed from every cluster at the upgrade.
// Writing it again through the API records its author.
func (s *Syncer) forbidden(d *deployable, namespaced bool) string {
	scope := policy.ScopeCluster
	if namespaced {
		scope = policy.ScopeNamespaced
	}
	// A namespaced object lands in the deployable's namespace whatever the
	// template says (deployable.object).
	dec := s.policy.AuthorizeKind(d.author, policy.Target{Kind: d.gvk.GroupKind(), Scope: scope, Namespace: d.rec.Namespace, ObjectNamespace: d.rec.Namespace})
	if dec.Allowed {
		return ""
	}
	return s.refusal(d, "", dec.Reason)
}

// refusal says why d is not applied: by the policy (reason ""), or by
// the admission of the object as written (admission.ReasonDenied).
func (s *Syncer) refusal(d *deployable, reason, why string) string {
	by := "the policy"
	if reason == admission.ReasonDenied {
		by = "admission"
	}
	if !d.authored {
		return fmt.Sprintf("refused by %s: written before purser recorded authors, and %s; any copy on the cluster is left as it is: apply the deployable again through the API to have it checked for its author",
			by, why)
	}
	return fmt.Sprintf("refused by %s: %s may not put this %s on member clusters: %s; purser's copy, if any, was removed",
		by, d.author.Name, policy.KindName(d.gvk.GroupKind()), why)
}

// admit is the one admission of what is written
// (admission.Review.Written), on obj as this cluster is about to get it:
// the template with the cluster's overrides applied and purser's marks,
// by the policy as it is now, each kind it embeds in the scope this
// cluster serves it. It returns why not, naming the override to blame,
// or "".
func (s *Syncer) admit(d *deployable, obj map[string]any, which []int, scopeOf func(schema.GroupVersionKind) policy.Scope) string {
	review := policy.NewReview(s.policy, s.pods, d.author, d.rec.Namespace, scopeOf, false)
	err := review.Written(obj, "")
	if err == nil {
		return ""
	}
	if cause := overrideToBlame(review, d, which); cause != "" {
		err = review.Written(obj, cause)
	}
	return s.refusal(d, admission.ReasonDenied, err.Error())
}

// overrideToBlame names what makes the refused object differ from one the
// review admits: "" when the template itself is refused, the first
// override that alone makes it refused, or the set this cluster selects.
// The clear overrides are enough to tell: only a Secret's are sealed, and
// its values are not what admission judges.
func overrideToBlame(review admission.Review, d *deployable, which []int) string {
	if len(which) == 0 || review.Written(d.template, "") != nil {
		return ""
	}
	for _, i := range which {
		one, err := v1alpha1.ApplyOverrides(d.template, d.overrides, []int{i})
		if err == nil && review.Written(one, "") != nil {
			return fmt.Sprintf("spec.overrides[%d]", i)
		}
	}
	var b strings.Builder
	for n, i := range which {
		if n > 0 {
			b.WriteString(" with ")
		}
		fmt.Fprintf(&b, "spec.overrides[%d]", i)
	}
	return b.String()
}
