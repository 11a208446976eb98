// Package kinds is what purser knows about each kind of object it places
// on a member cluster, one driver per kind: its group and kind, the pods
// it makes as the cluster (or the operator that owns the kind) will build
// them, and the objects nested in it that the cluster will create too.
// Admission judges what a driver returns; it never reads a kind's fields
// itself, so a kind is taught to purser here and in one place.
//
// It is knowledge, not a loop: pure functions over decoded objects, low
// in the layering so that admission, placement and the control loops can
// all import it; what the Flink operator does with its
// kind is internal/flink's knowledge, which the FlinkDeployment's driver
// imports. Besides its pods and nested objects, a driver says what it
// can of its kind's demand, suspend, fence, update in place, planned move
// and failure class (capabilities.go); a loop asks the registry and never
// names a kind (TestNoSwitchOnKindOutsideDrivers).
// Health stays a table of its own (internal/member/health) since its
// rules go by apiVersion and configured CEL rules override them.
package kinds

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/platform/fields"
)

// PodTemplate is one pod an object describes, as the pods it makes will
// be created, and where in the object it was found.
type PodTemplate struct {
	// Path names the place, as a field path of the object
	// ("spec.template.spec", "spec.templates[2]").
	Path     string
	Metadata metav1.ObjectMeta
	Spec     corev1.PodSpec
	// Unjudgeable, when set, says why the pods cannot be judged from the
	// object: something changes them that no spec shows (an Argo
	// podSpecPatch with parameters the controller fills in at run time).
	Unjudgeable string
}

// Nested is an object that another object makes its cluster create: an
// item of a List, or a document of the manifest of an Argo resource
// template.
type Nested struct {
	// Path is where it is in the outer object.
	Path   string
	Object map[string]any
	// InString: the object is written as text (a YAML or JSON manifest),
	// which no field of the outer object can seal.
	InString bool
	// Namespace, when set, is where the outer object's controller will
	// create it whatever the object says (kubectl's --namespace of an
	// Argo resource template), and NamespaceFrom names the flag.
	Namespace, NamespaceFrom string
}

// Driver is what purser knows about one kind.
type Driver interface {
	// GroupKind is the kind the driver knows.
	GroupKind() schema.GroupKind
	// Knows says in a few words what the driver reads, for docs/kinds.md.
	Knows() string
	// PodTemplates are the pods obj makes, as the cluster will run them.
	// An error names a place whose content cannot be read as a pod.
	PodTemplates(obj map[string]any) ([]PodTemplate, error)
	// Nested are the objects obj makes its cluster create. An error says
	// why one cannot be judged, which refuses obj.
	Nested(obj map[string]any) ([]Nested, error)
}

// Registry holds the drivers, one per kind.
type Registry struct {
	drivers map[schema.GroupKind]Driver
}

// NewRegistry returns a registry of drivers; two drivers of one kind is
// a programming error.
func NewRegistry(drivers ...Driver) *Registry {
	r := &Registry{drivers: map[schema.GroupKind]Driver{}}
	for _, d := range drivers {
		if _, dup := r.drivers[d.GroupKind()]; dup {
			panic(fmt.Sprintf("kinds: two drivers for %s", d.GroupKind()))
		}
		r.drivers[d.GroupKind()] = d
	}
	return r
}

// Default is the registry of every kind purser knows. It is built once
// and never changes, so that every caller (placement for each submission
// among them) shares it.
func Default() *Registry { return defaultRegistry() }

var defaultRegistry = sync.OnceValue(func() *Registry {
	var ds []Driver
	ds = append(ds, workloadDrivers()...)
	ds = append(ds, argoDrivers()...)
	ds = append(ds, flinkDeployment{})
	return NewRegistry(ds...)
})

// Driver returns the driver of gk.
func (r *Registry) Driver(gk schema.GroupKind) (Driver, bool) {
	d, ok := r.drivers[gk]
	return d, ok
}

// Has reports whether gk has a driver.
func (r *Registry) Has(gk schema.GroupKind) bool {
	_, ok := r.drivers[gk]
	return ok
}

// Kinds lists the kinds with a driver, sorted by group then kind.
func (r *Registry) Kinds() []schema.GroupKind {
	out := make([]schema.GroupKind, 0, len(r.drivers))
	for gk := range r.drivers {
		out = append(out, gk)
	}
	slices.SortFunc(out, func(a, b schema.GroupKind) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}

// GroupKindOf reads obj's group and kind.
func GroupKindOf(obj map[string]any) schema.GroupKind {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = ""
	}
	return schema.GroupKind{Group: group, Kind: kind}
}

// PodTemplates are the pods obj makes: its driver's, or, for a kind
// without one, the pod template where workloads keep theirs
// (spec.template.spec), if it has one.
func (r *Registry) PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	if d, ok := r.drivers[GroupKindOf(obj)]; ok {
		return d.PodTemplates(obj)
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			if _, ok := tmpl["spec"].(map[string]any); ok {
				return onePod(obj, []string{"spec", "template"})
			}
		}
	}
	return nil, nil
}

// Nested are the objects obj makes its cluster create: its driver's, and
// for any kind named *List, its items (Items: kubectl reads any object
// with items as a list, which the review follows inside manifests).
func (r *Registry) Nested(obj map[string]any) ([]Nested, error) {
	var out []Nested
	gk := GroupKindOf(obj)
	if strings.HasSuffix(gk.Kind, "List") {
		items, err := Items(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	if d, ok := r.drivers[gk]; ok {
		more, err := d.Nested(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// IsList reports whether kubectl (which runs Argo's resource templates)
// reads obj as a list: apimachinery's unstructured decoding takes any
// object with an items field for one, whatever its kind, and kubectl
// then creates the items, not the object.
func IsList(obj map[string]any) bool {
	_, ok := obj["items"]
	return ok
}

// Items are the items of a list, each an object or a manifest.
func Items(obj map[string]any) ([]Nested, error) {
	items, _ := obj["items"].([]any)
	var out []Nested
	for i, it := range items {
		n, err := NestedAt(fmt.Sprintf("items[%d]", i), it)
		if err != nil {
			return nil, err
		}
		out = append(out, n...)
	}
	return out, nil
}

// NestedAt reads what a field holds: an object, or a manifest as text
// (every document of it).
func NestedAt(path string, v any) ([]Nested, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return []Nested{{Path: path, Object: x}}, nil
	case string:
		return manifestDocuments(path, x)
	default:
		return nil, fmt.Errorf("%s: neither an object nor a manifest", path)
	}
}

// onePod reads the pod template at path of obj (its metadata and spec);
// an empty path is obj itself, a Pod.
func onePod(obj map[string]any, path []string) ([]PodTemplate, error) {
	at := obj
	for _, f := range path {
		m, ok := at[f].(map[string]any)
		if !ok {
			return nil, nil
		}
		at = m
	}
	rawSpec, ok := at["spec"].(map[string]any)
	if !ok {
		return nil, nil
	}
	specPath := strings.Join(append(slices.Clone(path), "spec"), ".")
	p := PodTemplate{Path: specPath}
	if err := convert(rawSpec, &p.Spec); err != nil {
		return nil, fmt.Errorf("%s: not a pod spec: %w", specPath, err)
	}
	if m, ok := at["metadata"].(map[string]any); ok {
		if err := convert(m, &p.Metadata); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(append(slices.Clone(path), "metadata"), "."), err)
		}
	}
	return []PodTemplate{p}, nil
}

func convert(in map[string]any, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(in, out)
}

// podDriver is a kind whose one pod template is at a fixed path.
type podDriver struct {
	gk    schema.GroupKind
	path  []string // where the template (metadata and spec) is; empty: the object is a Pod
	knows string
}

func (d podDriver) GroupKind() schema.GroupKind { return d.gk }
func (d podDriver) Knows() string               { return d.knows }
func (d podDriver) PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	return onePod(obj, d.path)
}
func (podDriver) Nested(map[string]any) ([]Nested, error) { return nil, nil }

// Group and kind constants of the built-in workload kinds.
var (
	Pod                   = schema.GroupKind{Kind: "Pod"}
	PodTemplateKind       = schema.GroupKind{Kind: "PodTemplate"}
	ReplicationController = schema.GroupKind{Kind: "ReplicationController"}
	Job                   = schema.GroupKind{Group: "batch", Kind: "Job"}
	CronJob               = schema.GroupKind{Group: "batch", Kind: "CronJob"}
	Deployment            = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	StatefulSet           = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	DaemonSet             = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	ReplicaSet            = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
)

func workloadDrivers() []Driver {
	tmpl := []string{"spec", "template"}
	const knows = "spec.template"
	replicas := counted{"pods (replicas)", "spec.replicas pods (1 by default)", func(obj map[string]any) int64 {
		n, ok := fields.Int(obj, "spec", "replicas")
		if !ok {
			n = 1
		}
		return n
	}}
	return []Driver{
		countedDriver{podDriver{Pod, nil, "the object's own spec"},
			counted{"pod", "one pod", func(map[string]any) int64 { return 1 }}},
		podDriver{PodTemplateKind, []string{"template"}, "template"},
		podDriver{ReplicationController, tmpl, knows},
		jobDriver{countedDriver{podDriver{Job, tmpl, knows},
			counted{"pods (parallelism)", "spec.parallelism pods (1 by default), at most spec.completions", func(obj map[string]any) int64 {
				return jobPods(obj, "spec")
			}}}},
		countedDriver{podDriver{CronJob, []string{"spec", "jobTemplate", "spec", "template"}, "spec.jobTemplate.spec.template"},
			counted{"pods (parallelism)", "its jobTemplate's, as a Job's", func(obj map[string]any) int64 {
				return jobPods(obj, "spec", "jobTemplate", "spec")
			}}},
		countedDriver{podDriver{Deployment, tmpl, knows}, replicas},
		countedDriver{podDriver{StatefulSet, tmpl, knows}, replicas},
		podDriver{DaemonSet, tmpl, knows},
		countedDriver{podDriver{ReplicaSet, tmpl, knows}, replicas},
	}
}
