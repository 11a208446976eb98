package clusters

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestObjectClientDiscovery: a kind the cluster does not serve is looked
// for again at most once per refresh period, a CRD installed since is
// found once it has passed, a kind whose CRD went is dropped after a
// caller's Rediscover (Serves forgets it too), and EnsureNamespace creates a namespace once.
func TestObjectClientDiscovery(t *testing.T) {
	c := env.Dedicated(t, false)
	kube, err := NewObjectClient(c.Name(), c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	kube.refresh = time.Hour
	gvk := schema.GroupVersionKind{Group: "example.purser.io", Version: "v1", Kind: "Gizmo"}
	if _, err := kube.Mapping(gvk); !meta.IsNoMatchError(err) {
		t.Fatalf("mapping of a kind not installed: %v, want no match", err)
	}

	sandboxtest.InstallCRD(t, kube.Dynamic(), gvk.Group, gvk.Version, gvk.Kind, "gizmos")
	// A client of its own tells when discovery serves the kind, so that
	// what follows is about kube's limit, not about the cluster's pace.
	served := func(want bool) func(context.Context) error {
		return func(context.Context) error {
			fresh, err := NewObjectClient(c.Name(), c.RESTConfig())
			if err != nil {
				return err
			}
			_, err = fresh.Mapping(gvk)
			switch {
			case want && err != nil:
				return err
			case !want && err != nil && !meta.IsNoMatchError(err):
				return fmt.Errorf("still served? %w", err)
			case !want && err == nil:
				return errors.New("still served")
			}
			return nil
		}
	}
	sandboxtest.Eventually(t, wait, "the Gizmo kind served", served(true))
	if _, err := kube.Mapping(gvk); !meta.IsNoMatchError(err) {
		t.Fatalf("discovery asked again within the refresh period: %v", err)
	}
	if kube.Serves(gvk) {
		t.Fatal("Serves says yes before discovery was asked again")
	}
	kube.refresh = 0
	m, err := kube.Mapping(gvk)
	if err != nil {
		t.Fatalf("mapping after the refresh period: %v", err)
	}
	if m.Resource.Resource != "gizmos" || m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("mapping %v scope %s, want namespaced gizmos", m.Resource, m.Scope.Name())
	}
	if !kube.Serves(gvk) {
		t.Fatal("Serves says no once the kind is mapped")
	}

	crds := kube.Dynamic().Resource(sandboxtest.CRDs)
	if err := crds.Delete(t.Context(), "gizmos."+gvk.Group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, wait, "the Gizmo kind gone", served(false))
	kube.refresh = time.Hour
	kube.Rediscover()
	if _, err := kube.Mapping(gvk); err != nil {
		t.Fatalf("the cached mapping was dropped within the refresh period: %v", err)
	}
	kube.refresh = 0
	kube.Rediscover()
	if _, err := kube.Mapping(gvk); !meta.IsNoMatchError(err) {
		t.Fatalf("mapping after Rediscover of a deleted kind: %v, want no match", err)
	}
	if kube.Serves(gvk) {
		t.Fatal("Serves still says yes after the kind went and discovery was asked again")
	}

	for range 2 {
		if err := kube.EnsureNamespace(t.Context(), "gizmo-home"); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := kube.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(t.Context(), "gizmo-home", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace not created: %v", err)
	}
	if got := ns.GetManagedFields(); len(got) == 0 || got[0].Manager != FieldManager {
		t.Fatalf("namespace managed by %v, want %s", got, FieldManager)
	}
}
