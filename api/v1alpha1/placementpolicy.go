package v1alpha1

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kinds of the placement policies: a namespace's, and the farm's.
const (
	KindPlacementPolicy        = "PlacementPolicy"
	KindClusterPlacementPolicy = "ClusterPlacementPolicy"
)

// MaxResourceSelectors bounds a placement policy's selectors.
const MaxResourceSelectors = 32

// PlacementPolicy says what purser makes of the native objects it
// selects when they are written to purser's Kubernetes API (/k8s): a
// FlinkDeployment applied with kubectl becomes a runnable named after it,
// with the policy's placement, failover and priority, the object as its
// template. A PlacementPolicy selects the objects of its own namespace;
// a ClusterPlacementPolicy (admins only) those of every namespace.
type PlacementPolicy struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta          `json:"metadata"`
	Spec     PlacementPolicySpec `json:"spec"`
}

// PlacementPolicySpec is what the policy selects and what it makes of it.
type PlacementPolicySpec struct {
	// ResourceSelectors pick the objects: one that any selector matches
	// is the policy's. At least one: a policy never selects everything.
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`
	// Priority orders the policies that select the same object: the
	// highest wins; then the most specific selector (by name, then by
	// labels, then by kind alone); then a namespace's policy before the
	// farm's; then the first name.
	Priority int32 `json:"priority,omitempty"`
	// Runnable makes each selected object a runnable of this spec, the
	// object as its template (spec.template stays empty here).
	Runnable *RunnableSpec `json:"runnable,omitempty"`
	// Deployable makes each selected object a deployable of this spec
	// instead (kept on every cluster its placement selects, rolled out
	// as its rollout says), the object as its template. Exactly one of
	// runnable and deployable.
	Deployable *DeployableSpec `json:"deployable,omitempty"`
}

// ResourceSelector picks objects by kind, and by name or labels.
type ResourceSelector struct {
	// APIVersion and Kind of the objects, as they are written
	// (flink.apache.org/v1beta1, FlinkDeployment).
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name, when set, picks only the object of that name.
	Name string `json:"name,omitempty"`
	// LabelSelector, when set, picks only the objects whose labels match.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Specificity is how closely s names an object: 2 by name, 1 by labels,
// 0 by kind alone.
func (s ResourceSelector) Specificity() int {
	switch {
	case s.Name != "":
		return 2
	case s.LabelSelector != nil:
		return 1
	}
	return 0
}

// ValidatePlacementPolicy checks p, of kind kind (PlacementPolicy or
// ClusterPlacementPolicy), at now.
func ValidatePlacementPolicy(p *PlacementPolicy, kind string, now time.Time) FieldErrors {
	var v validator
	v.typeMeta(p.TypeMeta, kind)
	v.objectMeta(p.Metadata, metaRules{kind: kind, namespaced: kind == KindPlacementPolicy, nameIsLabel: true})
	sels := p.Spec.ResourceSelectors
	switch {
	case len(sels) == 0:
		v.add("spec.resourceSelectors", "must name at least one kind of object (apiVersion and kind)")
	case len(sels) > MaxResourceSelectors:
		v.add("spec.resourceSelectors", "has %d selectors; at most %d", len(sels), MaxResourceSelectors)
	}
	for i, s := range sels {
		field := fmt.Sprintf("spec.resourceSelectors[%d]", i)
		gv, err := schema.ParseGroupVersion(s.APIVersion)
		switch {
		case s.APIVersion == "":
			v.add(field+".apiVersion", "is required, e.g. flink.apache.org/v1beta1")
		case err != nil || gv.Version == "":
			v.add(field+".apiVersion", "%s is not a group/version", quote(s.APIVersion))
		case gv.Group == Group():
			v.add(field+".apiVersion", "purser's own kinds are written as themselves, not placed by a policy")
		}
		if s.Kind == "" {
			v.add(field+".kind", "is required, e.g. FlinkDeployment")
		} else if errs := validation.IsDNS1035Label(strings.ToLower(s.Kind)); len(errs) > 0 {
			v.add(field+".kind", "%s is not a kind's name", quote(s.Kind))
		}
		if s.Name != "" {
			if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
				v.add(field+".name", "%s is not an object's name: %s", quote(s.Name), errs[0])
			}
		}
		if s.Name != "" && s.LabelSelector != nil {
			v.add(field+".labelSelector", "must be unset with name: a name picks one object already")
		}
		if s.LabelSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(s.LabelSelector); err != nil {
				v.add(field+".labelSelector", "%v", err)
			}
		}
	}
	rs, ds := p.Spec.Runnable, p.Spec.Deployable
	switch {
	case rs == nil && ds == nil:
		v.add("spec.runnable", "is required, or spec.deployable: what each selected object becomes (a runnable's placement, failover and priority, or a deployable's placement, overrides and rollout)")
		return v.errs
	case rs != nil && ds != nil:
		v.add("spec.deployable", "must be unset with spec.runnable: an object becomes one or the other")
		return v.errs
	case rs != nil && len(rs.Template) > 0:
		v.add("spec.runnable.template", "must be empty: each runnable's template is the object written")
	case ds != nil && len(ds.Template) > 0:
		v.add("spec.deployable.template", "must be empty: each deployable's template is the object written")
	}
	if len(sels) == 0 || sels[0].APIVersion == "" || sels[0].Kind == "" {
		return v.errs
	}
	stand := map[string]any{"apiVersion": sels[0].APIVersion, "kind": sels[0].Kind, "metadata": map[string]any{"name": "policy-check"}}
	ns := cmpOr(p.Metadata.Namespace, "default")
	if ds != nil {
		// The rest of the spec as the deployable of an object of the
		// first selector's kind.
		d := &Deployable{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindDeployable},
			Metadata: ObjectMeta{Name: "policy-check", Namespace: ns}, Spec: *ds}
		d.Spec.Template = stand
		for _, e := range ValidateDeployable(d) {
			if strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "spec.template") {
				v.errs = append(v.errs, FieldError{Field: "spec.deployable." + strings.TrimPrefix(e.Field, "spec."), Message: e.Message})
			}
		}
		return v.errs
	}
	// The rest of the spec as the runnable of an object of the first
	// selector's kind: the object itself is checked when it is written.
	r := &Runnable{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindRunnable},
		Metadata: ObjectMeta{Name: "policy-check", Namespace: ns}, Spec: *rs}
	r.Spec.Template = stand
	for _, e := range ValidateRunnable(r, now) {
		if !strings.HasPrefix(e.Field, "spec.") || strings.HasPrefix(e.Field, "spec.template") {
			continue
		}
		v.errs = append(v.errs, FieldError{Field: "spec.runnable." + strings.TrimPrefix(e.Field, "spec."), Message: e.Message})
	}
	return v.errs
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Group is the group of purser's own kinds (purser.io).
func Group() string { g, _, _ := strings.Cut(GroupVersion, "/"); return g }

// DecodePlacementPolicy decodes a PlacementPolicy or a
// ClusterPlacementPolicy (kind) strictly, as the other kinds.
func DecodePlacementPolicy(kind string) func(data []byte, contentType string) (*PlacementPolicy, error) {
	return func(data []byte, contentType string) (*PlacementPolicy, error) {
		obj, err := decode(data, contentType, kind)
		if err != nil {
			return nil, err
		}
		return obj.(*PlacementPolicy), nil
	}
}
