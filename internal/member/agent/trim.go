package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unique"

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
// a CustomResourceDefinition its versions' schemas and its conversion; a
// Pod (tracked when its cluster asks) what trimPod does not keep.
// It also makes the cached objects share their repeated strings (intern).
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
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		// In place: a copy of the annotations (GetAnnotations,
		// SetAnnotations) would keep an empty map in every object that had
		// only this one.
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, lastApplied)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
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
	if u.GetAPIVersion() == "v1" && u.GetKind() == "Pod" {
		trimPod(u)
	}
	intern(u.Object)
	return u, nil
}

// intern makes the cached objects share one copy of the strings they
// repeat: every map key (field names, label keys, data keys), and the
// values that are the same in many objects (apiVersion, kind, the
// namespace, label values). The JSON decoder allocates each string of each
// object anew; at 100,000 objects the copies were a tenth of the agent's
// heap. Values that are mostly unique (names, uids, data) are left alone:
// a canonical copy costs more than it saves when nothing shares it.
func intern(obj map[string]any) {
	internKeys(obj)
	internValue(obj, "apiVersion")
	internValue(obj, "kind")
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	internValue(md, "namespace")
	if labels, ok := md["labels"].(map[string]any); ok {
		for k := range labels {
			internValue(labels, k)
		}
	}
}

// internKeys replaces the keys of m and of the maps within it by their
// canonical copies. Assigning to a key that is present replaces the key
// stored with it, so the maps neither grow nor move.
func internKeys(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			internKeys(x)
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					internKeys(em)
				}
			}
		}
		m[unique.Make(k).Value()] = v
	}
}

func internValue(m map[string]any, key string) {
	if s, ok := m[key].(string); ok {
		m[key] = unique.Make(s).Value()
	}
}

// trimPod keeps of a Pod what is read of it: its metadata (owner
// references: a runnable's attempt → its Job → its Pods), the node and its
// containers' names and images, and the status that `kubectl get pods`
// prints (phase, reason, conditions, each container's ready, restartCount
// and state). The rest of its spec goes: it is most of a pod, and its
// environment may hold what the inventory must not.
func trimPod(u *unstructured.Unstructured) {
	keepFields := func(m map[string]any, fields ...string) map[string]any {
		out := map[string]any{}
		for _, f := range fields {
			if v, ok := m[f]; ok {
				out[f] = v
			}
		}
		return out
	}
	keepEach := func(v any, fields ...string) any {
		list, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, 0, len(list))
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				out = append(out, keepFields(m, fields...))
			}
		}
		return out
	}
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		kept := keepFields(spec, "nodeName", "restartPolicy")
		for _, f := range []string{"containers", "initContainers"} {
			if v, ok := spec[f]; ok {
				kept[f] = keepEach(v, "name", "image", "restartPolicy")
			}
		}
		u.Object["spec"] = kept
	}
	if status, ok := u.Object["status"].(map[string]any); ok {
		kept := keepFields(status, "phase", "reason", "message", "conditions", "podIP", "hostIP", "startTime", "nominatedNodeName")
		for _, f := range []string{"containerStatuses", "initContainerStatuses"} {
			if v, ok := status[f]; ok {
				kept[f] = keepEach(v, "name", "ready", "started", "restartCount", "state", "lastState")
			}
		}
		u.Object["status"] = kept
	}
}
