// Package submission is the one way a runnable is created: what it must
// pass (defaults, validation, the policy's write right and priority
// classes, admission of its template and of what its failover mutations
// would make of it, approval) and the transaction that stores it with its
// audit entry and its message to the submitters. The API's POST of a
// runnable and the scheduler's ticks both call it, so that a runnable a
// schedule creates is judged exactly as one a person submits: by the
// policy in force when it is created, with the rights of its author.
//
// Its refusals are v1alpha1.Status errors (403, 409, 422 naming the
// field), which the API answers as they are and the scheduler writes into
// its schedule's status.
package submission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Gate judges work by one policy, read once for the decision: the policy
// file is reloaded when it changes, so a Gate is made per decision and
// never kept.
type Gate struct {
	Policy *policy.Policy
	// Store is read for the scopes member clusters reported of a kind,
	// and the registered clusters' labels (a deployable's overrides).
	Store store.Transactor
	// Pods judges the pods of every template.
	Pods *admission.Checker
	// Renderings is what a runnable's failover mutations would make of
	// its template for a later attempt (attempt.Renderings, a writer's
	// knowledge the domain layer may not import).
	Renderings func(*v1alpha1.RunnableSpec) []v1alpha1.Rendering
	Now        func() time.Time
	// Scopes, when set, answers what Store would of the scopes reported
	// of a kind (ScopesOnce: a gate that decides a page of ticks reads
	// them once).
	Scopes func(ctx context.Context, group, kind string) ([]bool, error)
}

// ScopesOnce reads each kind's reported scopes from st once, for a gate
// that makes many decisions in a moment (a page of a schedule's ticks):
// what the clusters report of a kind changes over minutes, not within one
// pass.
func ScopesOnce(st store.Transactor) func(ctx context.Context, group, kind string) ([]bool, error) {
	var mu sync.Mutex
	seen := map[[2]string][]bool{}
	return func(ctx context.Context, group, kind string) ([]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if out, ok := seen[[2]string{group, kind}]; ok {
			return out, nil
		}
		out, err := readScopes(ctx, st, group, kind)
		if err == nil {
			seen[[2]string{group, kind}] = out
		}
		return out, err
	}
}

func readScopes(ctx context.Context, st store.Transactor, group, kind string) ([]bool, error) {
	var reported []bool
	err := st.Read(ctx, func(tx *store.Tx) error {
		var err error
		reported, err = tx.Kinds().Scopes(ctx, group, kind)
		return err
	})
	return reported, err
}

func (g *Gate) now() time.Time {
	if g.Now == nil {
		return time.Now()
	}
	return g.Now()
}

// Errors of the API's shape.
func forbidden(format string, args ...any) *v1alpha1.Status {
	return &v1alpha1.Status{Code: http.StatusForbidden, Reason: v1alpha1.ReasonForbidden, Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409 naming what conflicts.
func Conflict(format string, args ...any) *v1alpha1.Status {
	return &v1alpha1.Status{Code: http.StatusConflict, Reason: v1alpha1.ReasonConflict, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a 422 with each field's problem.
func Invalid(message string, details []v1alpha1.FieldError) *v1alpha1.Status {
	return &v1alpha1.Status{Code: http.StatusUnprocessableEntity, Reason: v1alpha1.ReasonInvalid, Message: message, Details: details}
}

// DefaultPriority gives a runnable of ns without spec.priority the
// namespace's default class, where the policy names one. It is written
// into the stored spec, as the retention default is, so that the spec
// says what the queue orders it by, and a later change of the policy's
// default does not reorder work already accepted.
func (g *Gate) DefaultPriority(ns string, spec *v1alpha1.RunnableSpec) {
	if spec.Priority != nil {
		return
	}
	if c := g.Policy.DefaultPriorityClass(ns); c != "" {
		p := intstr.FromString(c)
		spec.Priority = &p
	}
}

// AuthorizePriority refuses, with 422 naming the classes ns may use, a
// spec.priority u may not give: the queue is the farm's, so a tenant's
// choice is bounded to the classes the policy allows its namespace, and
// an integer is for the farm's admins (policy.Policy.AuthorizePriority).
// what names the spec's author when it is not the caller (an approval).
func (g *Gate) AuthorizePriority(u policy.User, ns string, spec *v1alpha1.RunnableSpec, what string) error {
	r := g.Policy.AuthorizePriority(u, ns, spec.Priority)
	if r == nil {
		return nil
	}
	msg := fmt.Sprintf("user %q may not give a runnable of namespace %s the priority %s: %s", u.Name, ns, spec.Priority.String(), r.Reason)
	if what != "" {
		msg = what + ": " + msg
	}
	return Invalid(msg, []v1alpha1.FieldError{{Field: "spec.priority", Message: r.Reason}})
}

// AuthorizeKind checks that u may put the object tmpl, at path in the
// runnable or deployable (its template, or an object the template
// embeds), on member clusters from namespace ns: scope is part of
// authorization. The kind's scope is what the member clusters' discovery
// reported (cluster_kinds, from the agents) merged with the kinds every
// kube-apiserver serves; a kind no cluster has reported yet is decided
// again by the submitter or the syncer with the discovery of the cluster
// they act on. The answer is 403 naming the kind and the rule that
// refused it.
func (g *Gate) AuthorizeKind(ctx context.Context, u policy.User, ns string, tmpl map[string]any, path string) error {
	gk, ok := TemplateGroupKind(tmpl)
	if !ok {
		return nil // validation has already said what is wrong
	}
	scopes := g.Scopes
	if scopes == nil {
		scopes = func(ctx context.Context, group, kind string) ([]bool, error) {
			return readScopes(ctx, g.Store, group, kind)
		}
	}
	reported, err := scopes(ctx, gk.Group, gk.Kind)
	if err != nil {
		return err
	}
	objNS := ""
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		objNS, _ = md["namespace"].(string)
	}
	d := g.Policy.AuthorizeKind(u, policy.Target{Kind: gk, Scope: policy.ResolveScope(gk, reported), Namespace: ns, ObjectNamespace: objNS})
	if d.Allowed {
		return nil
	}
	return &v1alpha1.Status{
		Code: http.StatusForbidden, Reason: v1alpha1.ReasonForbidden,
		Message: fmt.Sprintf("user %q may not put %s on member clusters from namespace %s: %s", u.Name, policy.KindName(gk), ns, d.Reason),
		Details: []v1alpha1.FieldError{{Field: path + ".kind", Message: "refused by the policy rule: " + d.Rule}},
	}
}

// Admit reviews a template before it is accepted: its kind and scope,
// every object it embeds by the same rules, the pods it describes by the
// namespace's Pod Security level, and what its RoleBindings grant (403
// for a kind the policy refuses, 422 with each violation otherwise). The
// submitter and the syncer review what they write again before they act
// (AdmitRunnable and the API's admission of a deployable add the
// renderings they foresee).
func (g *Gate) Admit(ctx context.Context, u policy.User, ns string, tmpl map[string]any, runnable bool) error {
	if err := g.AuthorizeKind(ctx, u, ns, tmpl, "spec.template"); err != nil {
		return err
	}
	review := g.Review(ctx, u, ns, runnable)
	return Refused(review, "the template", review.Check(tmpl))
}

// Review is the admission review of u's work in namespace ns, by the
// policy in force: the rules Written applies, here and at the writers.
func (g *Gate) Review(ctx context.Context, u policy.User, ns string, runnable bool) admission.Review {
	p := g.Policy
	return admission.Review{
		Checker: g.Pods, Level: p.PodSecurityLevel(ns), ClusterRoles: p.BindableClusterRoles(ns), Embedded: p.EmbeddedRules(),
		Namespace: ns, Runnable: runnable, Undriven: policy.Undriven(p, u, ns),
		Kind: func(obj map[string]any, path string) error { return g.AuthorizeKind(ctx, u, ns, obj, path) },
	}
}

// Refused turns a review's refusal of what (the template, or a rendering
// of it) into a 422 with each violation; other errors (a 403 of the kind
// rules) are returned as they are.
func Refused(review admission.Review, what string, err error) error {
	var refusal *admission.Refusal
	if !errors.As(err, &refusal) {
		return err
	}
	details := make([]v1alpha1.FieldError, len(refusal.Violations))
	for i, v := range refusal.Violations {
		details[i] = v1alpha1.FieldError{Field: v.Path, Message: v.Reason}
	}
	return Invalid(fmt.Sprintf("%s may not run from namespace %s (Pod Security level %s): %s", what, review.Namespace, review.Level, refusal.Error()), details)
}

// AdmitRunnable reviews a runnable's template (Admit) and what its
// failover mutations would make of it for a later attempt, each alone
// and all together (Renderings), with the one admission of what is
// written (admission.Review.Written) that the submitter calls before
// each create: a 422 naming the mutation, rather than an attempt that
// fails later with AdmissionDenied.
func (g *Gate) AdmitRunnable(ctx context.Context, u policy.User, ns string, spec *v1alpha1.RunnableSpec) error {
	if err := g.Admit(ctx, u, ns, spec.Template, true); err != nil {
		return err
	}
	var rs []v1alpha1.Rendering
	if g.Renderings != nil {
		rs = g.Renderings(spec)
	}
	return g.AdmitRenderings(ctx, u, ns, true, rs)
}

// AdmitRenderings reviews each rendering as its writer will (Written),
// and answers the first refusal with a 422 (403 for a kind the policy
// refuses) naming its cause.
func (g *Gate) AdmitRenderings(ctx context.Context, u policy.User, ns string, runnable bool, rs []v1alpha1.Rendering) error {
	if len(rs) == 0 {
		return nil
	}
	review := g.Review(ctx, u, ns, runnable)
	for _, r := range rs {
		err := review.Written(r.Object, r.Cause)
		if err == nil {
			continue
		}
		var denied *admission.Denied
		if !errors.As(err, &denied) {
			return err
		}
		var apiErr *v1alpha1.Status
		if errors.As(denied.Err, &apiErr) {
			// A kind the policy refuses, which the rendering brought in.
			out := *apiErr
			out.Message = fmt.Sprintf("as %s renders the template: %s", r.Cause, apiErr.Message)
			return &out
		}
		var refusal *admission.Refusal
		if errors.As(denied.Err, &refusal) {
			err := Refused(review, "the template as "+r.Cause+" renders it", refusal)
			var out *v1alpha1.Status
			if errors.As(err, &out) {
				out.Details = append([]v1alpha1.FieldError{{Field: r.Cause, Message: "renders an object that may not run: " + refusal.Error()}}, out.Details...)
			}
			return err
		}
		return &v1alpha1.Status{Code: http.StatusUnprocessableEntity, Reason: v1alpha1.ReasonInvalid, Message: denied.Error(),
			Details: []v1alpha1.FieldError{{Field: r.Cause, Message: denied.Err.Error()}}}
	}
	return nil
}

// TemplateGroupKind reads a template's group and kind.
func TemplateGroupKind(tmpl map[string]any) (schema.GroupKind, bool) {
	apiVersion, _ := tmpl["apiVersion"].(string)
	kind, _ := tmpl["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || apiVersion == "" {
		return schema.GroupKind{}, false
	}
	return schema.GroupKind{Group: gv.Group, Kind: kind}, true
}
