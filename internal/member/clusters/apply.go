package clusters

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/purser-io/purser/api/v1alpha1"
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

// UpdateFieldManager names purser's updates in place of running objects
// (a PUT of a running runnable) in their managedFields: apart from the
// create's and from OperateFieldManager, so that a suspend, which applies
// only the suspend field, never drops what an update applied (a manager's
// apply removes the fields it owned and no longer names).
const UpdateFieldManager = "purser-update"

// ApplyObject applies obj, the whole object as purser builds it from a
// changed template, over the object of its kind and name by server-side
// apply, forcing ownership of the fields it names (the create owned them
// until now) and returning the object as the API server stored it. uid
// binds the apply to that very object, as in ApplySpec; an apply never
// creates one.
func (c *ObjectClient) ApplyObject(ctx context.Context, obj *unstructured.Unstructured, uid string) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	ri, namespaced, err := c.resource(gvk, obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	if !namespaced {
		obj.SetNamespace("")
	}
	obj.SetUID(types.UID(uid))
	out, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: UpdateFieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: apply %s %s/%s: %w", c.name, gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return out, nil
}

// OlderAttemptError says that the name is taken by the runnable's own
// object of an earlier attempt (one that ended: a rerun creates the next
// attempt under the same name). It is the caller's to remove it, with
// Remove and that attempt's number, before the create is tried again.
type OlderAttemptError struct {
	Kind, Namespace, Name, Cluster string
	Attempt                        int
}

func (e *OlderAttemptError) Error() string {
	return fmt.Sprintf("%s %s/%s on cluster %s is the copy of attempt %d; it must go before the next attempt is created",
		e.Kind, e.Namespace, e.Name, e.Cluster, e.Attempt)
}

// olderAttempt reports existing, the runnable's own object, as an
// *OlderAttemptError when it belongs to another attempt than obj.
func olderAttempt(existing, obj *unstructured.Unstructured, cluster string) error {
	had, want := existing.GetLabels()[v1alpha1.LabelAttempt], obj.GetLabels()[v1alpha1.LabelAttempt]
	n, err := strconv.Atoi(had)
	if err != nil || want == "" || had == want {
		return nil
	}
	return &OlderAttemptError{Kind: existing.GetKind(), Namespace: existing.GetNamespace(), Name: existing.GetName(), Cluster: cluster, Attempt: n}
}
