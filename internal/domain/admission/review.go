package admission

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/kinds"
)

// Review checks one template, and every object it embeds, against a
// namespace's rules: the same review the API makes before it accepts a
// runnable or a deployable, and the submitter and the syncer make again
// right before they act on a member cluster, with the policy as it is
// then.
type Review struct {
	Checker *Checker
	// Level, ClusterRoles and Embedded are the policy's for the namespace.
	Level        Level
	ClusterRoles []string
	Embedded     []EmbeddedRule
	// Namespace is the purser object's.
	Namespace string
	// Kind authorizes one object by the policy's kind, scope and
	// namespace rules: the template itself (path "spec.template") and each
	// object it embeds. The caller resolves a kind's scope as it can (the
	// API from what the agents reported, the submitter and the syncer
	// from their cluster's discovery); its error is returned as it is.
	Kind func(obj map[string]any, path string) error
	// Undriven, when set, refuses a kind purser has no driver for (and no
	// kube-apiserver serves built in) unless the policy lets it through:
	// what its controller would run cannot be judged. For the template and
	// each object it embeds.
	Undriven func(gk schema.GroupKind) error
	// Runnable: the template is a runnable's, which is stored, shown and
	// created again on failover as written, so no Secret may be anywhere
	// in it. A deployable's own Secret is sealed; one inside it is not.
	Runnable bool
}

// Refusal is what a review refuses: every object of the template that
// may not run, with its place.
type Refusal struct {
	Violations []Violation
}

func (r *Refusal) Error() string { return Summary(r.Violations) }

// maxDepth bounds how deep objects inside objects are followed (a List
// in a workflow's resource manifest is two).
const maxDepth = 4

// Check reviews tmpl: nil when everything in it may run, else the Kind
// error of the first object refused by kind, or a *Refusal.
func (r Review) Check(tmpl map[string]any) error {
	var out []Violation
	if err := r.check(tmpl, "spec.template", 0, &out); err != nil {
		return err
	}
	if len(out) > 0 {
		return &Refusal{Violations: out}
	}
	return nil
}

func (r Review) check(obj map[string]any, path string, depth int, out *[]Violation) error {
	if depth > 0 {
		if err := r.Kind(obj, path); err != nil {
			return err
		}
	}
	kind, _, _ := unstructured.NestedString(obj, "kind")
	apiVersion, _, _ := unstructured.NestedString(obj, "apiVersion")
	// A list's own kind is no object anyone creates: nested (depth > 0),
	// kubectl reads any object with items as a list and creates only its
	// items, which are reviewed below; at the top, a *List with items is
	// refused below. Any other object, whatever its kind is named (a
	// custom GizmoList without items is a Gizmo of sorts), is reviewed by
	// its kind.
	isList := kinds.IsList(obj)
	listOnly := isList && (depth > 0 || strings.HasSuffix(kind, "List"))
	if r.Undriven != nil && !listOnly {
		if err := r.Undriven(kinds.GroupKindOf(obj)); err != nil {
			*out = append(*out, Violation{Path: path, Reason: err.Error()})
		}
	}
	if isSecret(apiVersion, kind) && (r.Runnable || depth > 0) {
		*out = append(*out, Violation{Path: path, Reason: "a Secret here would be stored, shown and audited as written; declare it as a Deployable of its own, whose values purser seals and never returns"})
	}
	if isList && strings.HasSuffix(kind, "List") && depth == 0 {
		// No cluster serves a List: its items are what would be created,
		// and purser creates one object per runnable or deployable.
		*out = append(*out, Violation{Path: path, Reason: fmt.Sprintf("a %s is not an object a cluster stores; declare each of its items as its own (purser apply -f unpacks Lists)", kind)})
	}
	pods, err := r.Checker.Check(r.Level, obj)
	if err != nil {
		*out = append(*out, Violation{Path: path, Reason: err.Error()})
	}
	for _, v := range pods {
		*out = append(*out, Violation{Path: path + "." + v.Path, Reason: v.Reason})
	}
	if err := CheckRBAC(obj, r.Namespace, r.ClusterRoles); err != nil {
		*out = append(*out, Violation{Path: path, Reason: err.Error()})
	}
	if depth >= maxDepth {
		return nil
	}
	embedded, err := EmbeddedObjects(obj, r.Embedded)
	if err == nil && isList && depth > 0 && !strings.HasSuffix(kind, "List") {
		// Inside a manifest, kubectl creates the items of any object with
		// items (a ConfigMap carrying Pods), not the object: they are
		// judged as a List's are.
		var items []Embedded
		items, err = kinds.Items(obj)
		embedded = append(embedded, items...)
	}
	if err != nil {
		*out = append(*out, Violation{Path: path, Reason: err.Error()})
		return nil
	}
	for _, e := range embedded {
		if e.Namespace != "" && e.Namespace != r.Namespace {
			// kubectl's --namespace wins over what the object says, so
			// the object's own namespace rule does not see it.
			*out = append(*out, Violation{Path: path + "." + e.Path, Reason: fmt.Sprintf(
				"%s would make the action run in namespace %q, not %q; a workflow acts in its own namespace", e.NamespaceFrom, e.Namespace, r.Namespace)})
			continue
		}
		if e.Object == nil {
			continue
		}
		if err := r.check(e.Object, path+"."+e.Path, depth+1, out); err != nil {
			return err
		}
	}
	return nil
}

func isSecret(apiVersion, kind string) bool { return apiVersion == "v1" && kind == "Secret" }

// NamespaceLabels are the labels a namespace purser creates on a member
// cluster carries, so that the cluster's own Pod Security admission
// enforces the level purser checks.
func NamespaceLabels(level Level) map[string]string {
	return map[string]string{
		"pod-security.kubernetes.io/enforce":         string(level),
		"pod-security.kubernetes.io/enforce-version": "latest",
	}
}
