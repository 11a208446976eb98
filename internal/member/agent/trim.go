package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/hub/stream"
)

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Trim is the informers' transform: it runs before an object enters the
// cache, so the agent never holds what it must not publish, and memory per
// object shrinks. managedFields and the last-applied annotation are
// bookkeeping of the writers (and the annotation of a Secret holds its
// data in clear); a Secret (stream.IsSecret) keeps its metadata and a hash
// of its data (stream.DataHashField); a Node loses the list of its images;
// a CustomResourceDefinition its versions' schemas and its conversion.
// Trim may see an object it already trimmed, and leaves it unchanged.
func Trim(obj any) (any, error) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		inner, err := Trim(tomb.Obj)
		if err != nil {
			return nil, err
		}
		tomb.Obj = inner
		return tomb, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	if ann := u.GetAnnotations(); ann != nil {
		if _, ok := ann[lastApplied]; ok {
			delete(ann, lastApplied)
			u.SetAnnotations(ann)
		}
	}
	if stream.IsSecret(u.GetAPIVersion(), u.GetKind()) {
		data, hasData := u.Object["data"]
		if _, hashed := u.Object[stream.DataHashField]; hasData || !hashed {
			// encoding/json sorts map keys, so equal data hash equally.
			b, err := json.Marshal(data)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			u.Object[stream.DataHashField] = hex.EncodeToString(sum[:])
		}
		delete(u.Object, "data")
		delete(u.Object, "stringData")
	}
	if u.GetAPIVersion() == "apiextensions.k8s.io/v1" && u.GetKind() == "CustomResourceDefinition" {
		// A version's schema is most of a CRD (hundreds of kilobytes for
		// Argo's and Flink's); what is read of it is its names, scope and
		// columns.
		if versions, ok, _ := unstructured.NestedSlice(u.Object, "spec", "versions"); ok {
			for i := range versions {
				if v, ok := versions[i].(map[string]any); ok {
					delete(v, "schema")
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
		}
		unstructured.RemoveNestedField(u.Object, "spec", "conversion")
	}
	if u.GetAPIVersion() == "v1" && u.GetKind() == "Node" {
		// The images a node holds are the bulk of its status, and nothing
		// in purser reads them.
		unstructured.RemoveNestedField(u.Object, "status", "images")
	}
	return u, nil
}
