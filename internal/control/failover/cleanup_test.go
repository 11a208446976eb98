package failover_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/sandbox"
)

// A create whose answer was lost may have landed on a cluster the
// submitter then gave up on (attempt ended ClusterUnreachable, cleanup
// Pending). When that cluster answers, the controller removes exactly that
// copy: not an object of a later attempt, not a foreign object.
func TestLeftoverOfAnUnreachableAttemptIsRemoved(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	ctx := context.Background()

	// What the lost create left on b (there before the controller can
	// look for it), and what must survive: the same name in another
	// namespace belonging to attempt 2, and a foreign object of that name
	// elsewhere.
	uid := "11111111-2222-3333-4444-" + randomHex(6)
	leftover := configMap(f.ns, "report", uid, "1")
	later := configMap(f.ns+"-later", "report", uid, "2")
	foreign := configMap(f.ns+"-foreign", "report", "", "")
	for _, obj := range []*unstructured.Unstructured{leftover, later, foreign} {
		createWithNamespace(t, cs[1], obj)
	}

	// The runnable as the submitter leaves it: attempt 1 on b given up,
	// attempt 2 running on a.
	spec, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
	}}})
	now := time.Now()
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		rec := &store.Runnable{Namespace: f.ns, Name: "report", UID: uid, Generation: 1, Spec: spec, SpecHash: "h",
			Phase: string(v1alpha1.PhaseRunning), Cluster: "a", Submitter: "alice"}
		if err := tx.Runnables().Create(ctx, rec); err != nil {
			return err
		}
		if err := tx.Attempts().Put(ctx, &store.Attempt{RunnableUID: uid, Number: 1, Cluster: "b", StartedAt: now, EndedAt: &now,
			Result: "Failed", Reason: "ClusterUnreachable", Cleanup: store.CleanupPending}); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, &store.Attempt{RunnableUID: uid, Number: 2, Cluster: "a", StartedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}

	f.waitFor("report", "cleaned up", func(r *v1alpha1.Runnable) bool {
		return len(r.Status.Attempts) == 2 && r.Status.Attempts[0].Cleanup == store.CleanupDone
	})
	cms := f.dyn["b"].Resource(configMapsGVR)
	if _, err := cms.Namespace(f.ns).Get(ctx, "report", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the leftover of attempt 1 is still on b: %v", err)
	}
	for _, obj := range []*unstructured.Unstructured{later, foreign} {
		if _, err := cms.Namespace(obj.GetNamespace()).Get(ctx, "report", metav1.GetOptions{}); err != nil {
			t.Errorf("%s/report was touched: %v", obj.GetNamespace(), err)
		}
	}
	if h := f.history("report"); len(h) == 0 || h[len(h)-1] != "purge" {
		t.Errorf("history %v does not end with purge", h)
	}
}

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func configMap(namespace, name, runnableUID, attempt string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
	obj.SetNamespace(namespace)
	obj.SetName(name)
	if runnableUID != "" {
		obj.SetLabels(map[string]string{v1alpha1.LabelRunnableUID: runnableUID, v1alpha1.LabelAttempt: attempt})
	}
	return obj
}

func createWithNamespace(t *testing.T, c *sandbox.Cluster, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	cs, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName(obj.GetNamespace())
	nsClient := cs.Resource(namespacesGVR)
	if _, err := nsClient.Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsClient.Delete(context.Background(), obj.GetNamespace(), metav1.DeleteOptions{}) })
	if _, err := cs.Resource(configMapsGVR).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
