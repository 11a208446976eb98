package rollout

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Drift lists the field paths where two versions of an object differ (the
// one on a cluster and what an apply would make of it), leaving out what
// the server keeps for itself (resourceVersion, managedFields, generation,
// timestamps, uid, status) and purser's own marks, whose change alone is
// no drift. Only paths are returned, never values: a Secret's are never
// shown.
func Drift(cur, would map[string]any) []string {
	var out []string
	diff("", strip(cur), strip(would), &out)
	sort.Strings(out)
	return out
}

func strip(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	c := (&unstructured.Unstructured{Object: obj}).DeepCopy()
	for _, f := range []string{"resourceVersion", "managedFields", "generation", "creationTimestamp", "uid"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	for _, k := range []string{v1alpha1.AnnotationDeployable, v1alpha1.AnnotationGeneration, v1alpha1.AnnotationSpecHash} {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations", k)
	}
	unstructured.RemoveNestedField(c.Object, "metadata", "labels", v1alpha1.LabelDeployable)
	for _, f := range []string{"labels", "annotations"} {
		if m, ok, _ := unstructured.NestedMap(c.Object, "metadata", f); ok && len(m) == 0 {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
	}
	delete(c.Object, "status")
	return c.Object
}

func diff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diff(p, am[k], bm[k], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		if path == "" {
			path = "."
		}
		*out = append(*out, path)
	}
}
