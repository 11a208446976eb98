package clusters

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OperateFieldManager names purser's operations on running objects
// (suspend, resume) in their managedFields, apart from the create's
// FieldManager, so that a cluster's history tells the two apart.
const OperateFieldManager = "purser-operate"

// ApplySpec sets the fields of spec on the object of that kind and name by
// server-side apply, forcing ownership of those fields only (the create
// owned them until now). uid makes the apply an update of that very
// object: the API server refuses it with a conflict on another object of
// the same name (apiserver's patcher checks metadata.uid against the
// stored object), and an apply never creates one.
func (c *ObjectClient) ApplySpec(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, uid string, spec map[string]any) error {
	ri, namespaced, err := c.resource(gvk, namespace)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetGroupVersionKind(gvk)
	obj.SetName(name)
	if namespaced {
		obj.SetNamespace(namespace)
	}
	if uid != "" {
		obj.Object["metadata"].(map[string]any)["uid"] = uid
	}
	force := true
	if _, err := ri.Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: OperateFieldManager, Force: force}); err != nil {
		return fmt.Errorf("cluster %s: apply spec of %s %s/%s: %w", c.name, gvk.Kind, namespace, name, err)
	}
	return nil
}
