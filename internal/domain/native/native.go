// Package native decides what purser makes of a native object (a
// FlinkDeployment, a Job: anything not of purser's own kinds) written to
// its Kubernetes API: which placement policy selects it, and the runnable
// it becomes. It is pure; the API reads the policies and writes the
// runnable through the same handlers as the REST API.
package native

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Policy is a placement policy as the selection weighs it: a namespace's
// (Namespace set) or the farm's (Namespace "").
type Policy struct {
	Namespace, Name string
	Spec            v1alpha1.PlacementPolicySpec
}

// Ref names p as the API does: PlacementPolicy ns/name or
// ClusterPlacementPolicy name.
func (p *Policy) Ref() string {
	if p.Namespace == "" {
		return v1alpha1.KindClusterPlacementPolicy + " " + p.Name
	}
	return v1alpha1.KindPlacementPolicy + " " + p.Namespace + "/" + p.Name
}

// Object is what the selection reads of a native object.
type Object struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
	Labels          map[string]string
}

// Select returns the policy that places o among policies (those of o's
// namespace and the farm's; others are ignored), and the specificity of
// the selector that matched it; nil when none selects it.
//
// The order: the highest spec.priority; then the most specific matching
// selector (by name, then by labels, then by kind alone); then a
// namespace's policy before the farm's; then the first by name.
func Select(policies []Policy, o Object) (*Policy, int) {
	var best *Policy
	bestSpec := -1
	for i := range policies {
		p := &policies[i]
		if p.Namespace != "" && p.Namespace != o.Namespace {
			continue
		}
		spec := matches(p.Spec.ResourceSelectors, o)
		if spec < 0 {
			continue
		}
		if best == nil || before(p, spec, best, bestSpec) {
			best, bestSpec = p, spec
		}
	}
	return best, bestSpec
}

func before(p *Policy, spec int, q *Policy, qSpec int) bool {
	if c := cmp.Compare(p.Spec.Priority, q.Spec.Priority); c != 0 {
		return c > 0
	}
	if spec != qSpec {
		return spec > qSpec
	}
	if (p.Namespace != "") != (q.Namespace != "") {
		return p.Namespace != ""
	}
	return p.Name < q.Name
}

// matches is the highest specificity among the selectors that match o, or
// -1 when none does.
func matches(sels []v1alpha1.ResourceSelector, o Object) int {
	best := -1
	for _, s := range sels {
		if s.APIVersion != o.GVK.GroupVersion().String() || s.Kind != o.GVK.Kind {
			continue
		}
		if s.Name != "" && s.Name != o.Name {
			continue
		}
		if s.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
			if err != nil || !sel.Matches(labels.Set(o.Labels)) {
				continue
			}
		}
		best = max(best, s.Specificity())
	}
	return best
}

// Unselected says why no policy selects o, naming what is missing, for
// the refusal of its write.
func Unselected(policies []Policy, o Object) string {
	kind := o.GVK.Kind + " (" + o.GVK.GroupVersion().String() + ")"
	var sameKind []string
	for i := range policies {
		p := &policies[i]
		if p.Namespace != "" && p.Namespace != o.Namespace {
			continue
		}
		for _, s := range p.Spec.ResourceSelectors {
			if s.APIVersion == o.GVK.GroupVersion().String() && s.Kind == o.GVK.Kind {
				sameKind = append(sameKind, p.Ref())
				break
			}
		}
	}
	if len(sameKind) == 0 {
		return fmt.Sprintf("no placement policy of namespace %s, nor a cluster placement policy, selects a %s: create a PlacementPolicy in %s whose spec.resourceSelectors name apiVersion %s and kind %s",
			o.Namespace, kind, o.Namespace, o.GVK.GroupVersion().String(), o.GVK.Kind)
	}
	slices.Sort(sameKind)
	return fmt.Sprintf("no placement policy selects %s %s/%s: %s select %s objects, but by another name or labels",
		o.GVK.Kind, o.Namespace, o.Name, strings.Join(sameKind, ", "), kind)
}

// RunnableOf is the runnable o becomes under p: p's runnable spec with
// template, the object as written less what is not the user's to give
// (its status, and its metadata's server fields), named and namespaced
// as o.
func RunnableOf(p *Policy, template map[string]any) *v1alpha1.Runnable {
	spec := *p.Spec.Runnable
	spec.Template = Template(template)
	md, _ := template["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	return &v1alpha1.Runnable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindRunnable},
		Metadata: v1alpha1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{AnnotationPolicy: p.Ref()}},
		Spec:     spec,
	}
}

// DeployableOf is the deployable o becomes under p (whose
// spec.deployable is set): p's deployable spec with template, the object
// as written less what is not the user's to give, named and namespaced
// as o.
func DeployableOf(p *Policy, template map[string]any) *v1alpha1.Deployable {
	spec := *p.Spec.Deployable
	spec.Template = Template(template)
	md, _ := template["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	return &v1alpha1.Deployable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindDeployable},
		Metadata: v1alpha1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{AnnotationPolicy: p.Ref()}},
		Spec:     spec,
	}
}

// AnnotationPolicy names, on a runnable or deployable made from a native
// object, the policy that placed it.
const AnnotationPolicy = "purser.io/placement-policy"

// ViewAnnotations are the annotations purser adds to a native object it
// reads back (its runnable, phase, attempt, cluster, policy, the copy's
// own version): purser's view, not the user's object, so a write that
// sends them back (a patch of the object as read, kubectl edit) does not
// make them part of the template.
var ViewAnnotations = []string{"purser.io/runnable", "purser.io/deployable", "purser.io/phase", "purser.io/attempt",
	"purser.io/generation", "purser.io/cluster", "purser.io/cluster-resource-version", AnnotationPolicy}

// serverFields are the metadata fields a kube-apiserver sets, which a
// template does not carry.
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink", "namespace"}

// Template is obj as a runnable's template: without status, and without
// the metadata a server sets (nor the namespace, which is the runnable's).
func Template(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if !slices.Contains(serverFields, k) {
				m[k] = v
			}
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			kept := make(map[string]any, len(ann))
			for k, v := range ann {
				if !slices.Contains(ViewAnnotations, k) {
					kept[k] = v
				}
			}
			if len(kept) > 0 {
				m["annotations"] = kept
			} else {
				delete(m, "annotations")
			}
		}
		out["metadata"] = m
	}
	return out
}
