package submitter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/fields"
)

type runnableDoc = store.Document[v1alpha1.RunnableSpec]

// decode reads a runnable's stored spec and its template's kind.
func decode(rec *store.Runnable) (*runnableDoc, schema.GroupVersionKind, error) {
	var doc runnableDoc
	// Numbers stay json.Number, so that the template reaches the cluster
	// digit for digit (float64 would round integers above 2^53).
	dec := json.NewDecoder(bytes.NewReader(rec.Spec))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("stored spec does not decode: %w", err)
	}
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || apiVersion == "" {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("template has no valid apiVersion and kind")
	}
	return &doc, gv.WithKind(kind), nil
}

// object builds what is created on the cluster: the template, named after
// its own metadata.name or else the runnable, in the runnable's namespace,
// with purser's labels. Metadata is rebuilt from the template's name,
// labels and annotations only, so that nothing else a user put there (uid,
// resourceVersion, ownerReferences) reaches the cluster; and of those,
// none of purser's own domain: purser's agents and syncer read them
// (whose object it is, a deployable's copy, fenced), so only purser sets
// them.
func object(rec *store.Runnable, doc *runnableDoc, gvk schema.GroupVersionKind, number int) *unstructured.Unstructured {
	tmpl := doc.Spec.Template
	// A deep copy: the failover mutations set nested fields of the
	// object, which must not reach the decoded spec (the next rendering
	// of the same attempt starts from it).
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(tmpl)}
	name := v1alpha1.ObjectName(tmpl, rec.Name)
	var labels, annotations map[string]string
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		labels = withoutPurserKeys(fields.StringMap(md["labels"]))
		annotations = withoutPurserKeys(fields.StringMap(md["annotations"]))
	}
	obj.Object["metadata"] = map[string]any{}
	obj.SetGroupVersionKind(gvk)
	obj.SetName(name)
	obj.SetNamespace(rec.Namespace)
	if labels == nil {
		labels = map[string]string{}
	}
	if len(validation.IsValidLabelValue(rec.Name)) == 0 {
		labels[v1alpha1.LabelRunnable] = rec.Name
	}
	labels[v1alpha1.LabelRunnableNamespace] = rec.Namespace
	labels[v1alpha1.LabelRunnableUID] = rec.UID
	labels[v1alpha1.LabelAttempt] = strconv.Itoa(number)
	obj.SetLabels(labels)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.AnnotationRunnable] = rec.Namespace + "/" + rec.Name
	obj.SetAnnotations(annotations)
	delete(obj.Object, "status")
	return obj
}

// withoutPurserKeys is m without the keys of purser's domain
// (purser.io/..., and its subdomains').
func withoutPurserKeys(m map[string]string) map[string]string {
	for k := range m {
		if prefix, _, ok := strings.Cut(k, "/"); ok && (prefix == v1alpha1.Group() || strings.HasSuffix(prefix, "."+v1alpha1.Group())) {
			delete(m, k)
		}
	}
	return m
}

func ref(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// blamer renders an attempt's object again with only some of the
// runnable's mutations (nil: all of them, an empty list: none), for
// authorize to name the one its admission refuses; build makes the
// object before any mutation, as the create or the update does.
func blamer(build func() *unstructured.Unstructured, spec *v1alpha1.RunnableSpec, kept map[string]string, restorePath string) func(only []int) (*unstructured.Unstructured, []int, error) {
	return func(only []int) (*unstructured.Unstructured, []int, error) {
		if only == nil && spec.Failover != nil {
			only = make([]int, len(spec.Failover.Mutations))
			for i := range only {
				only[i] = i
			}
		}
		obj := build()
		applied, err := attempt.PrepareOnly(obj, spec, kept, restorePath, only)
		return obj, applied, err
	}
}
