package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// authorizeKind checks that u may put the template on member clusters
// from namespace ns: scope is part of authorization. The kind's scope is
// what the member clusters' discovery reported (cluster_kinds, from the
// agents) merged with the kinds every kube-apiserver serves; a kind no
// cluster has reported yet is decided again by the submitter or the
// syncer with the discovery of the cluster they act on. The answer is 403
// naming the kind and the rule that refused it.
func (s *Server) authorizeKind(ctx context.Context, u policy.User, ns string, tmpl map[string]any) error {
	return s.authorizeKindAt(ctx, u, ns, tmpl, "spec.template")
}

// authorizeKindAt is authorizeKind of an object at path in the runnable
// or deployable: its template, or an object the template embeds.
func (s *Server) authorizeKindAt(ctx context.Context, u policy.User, ns string, tmpl map[string]any, path string) error {
	gk, ok := templateGroupKind(tmpl)
	if !ok {
		return nil // validation has already said what is wrong
	}
	var reported []bool
	if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		reported, err = tx.Kinds().Scopes(ctx, gk.Group, gk.Kind)
		return err
	}); err != nil {
		return err
	}
	objNS := ""
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		objNS, _ = md["namespace"].(string)
	}
	d := s.policy().AuthorizeKind(u, policy.Target{Kind: gk, Scope: policy.ResolveScope(gk, reported), Namespace: ns, ObjectNamespace: objNS})
	if d.Allowed {
		return nil
	}
	return &APIError{
		Code: http.StatusForbidden, Reason: "Forbidden",
		Message: fmt.Sprintf("user %q may not put %s on member clusters from namespace %s: %s", u.Name, policy.KindName(gk), ns, d.Reason),
		Details: []v1alpha1.FieldError{{Field: path + ".kind", Message: "refused by the policy rule: " + d.Rule}},
	}
}

// admit reviews a template before it is accepted: its kind and scope,
// every object it embeds by the same rules, the pods it describes by the
// namespace's Pod Security level, and what its RoleBindings grant (403
// for a kind the policy refuses, 422 with each violation otherwise). The
// submitter and the syncer review what they write again before they act
// (admitRunnable and admitDeployable add the renderings they foresee).
func (s *Server) admit(ctx context.Context, u policy.User, ns string, tmpl map[string]any, runnable bool) error {
	if err := s.authorizeKind(ctx, u, ns, tmpl); err != nil {
		return err
	}
	review := s.review(ctx, u, ns, runnable)
	return refused(review, "the template", review.Check(tmpl))
}

// review is the admission review of u's work in namespace ns, by the
// policy in force: the rules Written applies, here and at the writers.
func (s *Server) review(ctx context.Context, u policy.User, ns string, runnable bool) admission.Review {
	p := s.policy()
	return admission.Review{
		Checker: s.pods, Level: p.PodSecurityLevel(ns), ClusterRoles: p.BindableClusterRoles(ns), Embedded: p.EmbeddedRules(),
		Namespace: ns, Runnable: runnable, Undriven: policy.Undriven(p, u, ns),
		Kind: func(obj map[string]any, path string) error { return s.authorizeKindAt(ctx, u, ns, obj, path) },
	}
}

// refused turns a review's refusal of what (the template, or a rendering
// of it) into a 422 with each violation; other errors (a 403 of the kind
// rules) are returned as they are.
func refused(review admission.Review, what string, err error) error {
	var refusal *admission.Refusal
	if !errors.As(err, &refusal) {
		return err
	}
	details := make([]v1alpha1.FieldError, len(refusal.Violations))
	for i, v := range refusal.Violations {
		details[i] = v1alpha1.FieldError{Field: v.Path, Message: v.Reason}
	}
	return errInvalid(fmt.Sprintf("%s may not run from namespace %s (Pod Security level %s): %s", what, review.Namespace, review.Level, refusal.Error()), details)
}

// authorizeAuthor checks, when a change is approved, that its author may
// still make it: an approval lets through what was written, so a change
// whose author has since lost the right to write in ns, or to put its
// kind there, is refused rather than approved.
func (s *Server) authorizeAuthor(author policy.User, ns, ref string, admit func(policy.User) error) error {
	if !s.policy().Allowed(author, ns, policy.VerbWrite) {
		return errForbidden("%s was written by %q, who may no longer write in namespace %q; it cannot be approved (reject it, or have someone who may write submit it again)",
			ref, author.Name, ns)
	}
	return admit(author)
}

// templateGroupKind reads a template's group and kind.
func templateGroupKind(tmpl map[string]any) (schema.GroupKind, bool) {
	apiVersion, _ := tmpl["apiVersion"].(string)
	kind, _ := tmpl["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || apiVersion == "" {
		return schema.GroupKind{}, false
	}
	return schema.GroupKind{Group: gv.Group, Kind: kind}, true
}

// authorOf is how the API records who wrote a spec.
func authorOf(u policy.User) *store.Author {
	return &store.Author{Name: u.Name, Groups: u.Groups}
}

// userOf is the author of a stored spec as a user for the policy; specs
// stored before authors were recorded name only the user.
func userOf(a *store.Author, name string) policy.User {
	if a == nil {
		return policy.User{Name: name}
	}
	return policy.User{Name: a.Name, Groups: a.Groups}
}
