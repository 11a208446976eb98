package tenancy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
)

// gizmo is an object of a custom kind purser has no driver for: its
// controller, whatever it is, could run any pod for it, and purser would
// see none of them.
const gizmo = "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g}\nspec: {podTemplate: {spec: {hostPID: true, containers: [{name: c, image: busybox, securityContext: {privileged: true}}]}}}\n"

var gizmos = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}

// A kind without a driver is refused unless the policy lists it as opaque:
// at the API (422 naming the kind and the policy's list, nothing written),
// and at the submitter for one stored behind the API, on a member cluster
// that serves the kind, with nothing created there.
func testUndrivenKind(t *testing.T, f *farm) {
	ctx := context.Background()
	a := f.refused("a runnable of a kind without a driver", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "gizmo", gizmo))
	})
	for _, want := range []string{"no driver for kind Gizmo.example.com", "namespaces." + f.own + ".kinds.opaque"} {
		if !strings.Contains(string(a.raw), want) {
			t.Errorf("the 422 does not say %q: %s", want, a.raw)
		}
	}
	f.refused("a deployable of a kind without a driver", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/gizmo", deployable(f.own, "gizmo", gizmo))
	})

	// The member cluster serves Gizmos; one stored behind the API is
	// refused by the submitter all the same.
	dyn, err := dynamic.NewForConfig(f.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
			"names":    map[string]any{"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": open}}}},
	}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, "gizmos served by the member cluster", func() error {
		_, err := dyn.Resource(gizmos).Namespace(f.own).List(ctx, metav1.ListOptions{})
		return err
	})
	var tmpl map[string]any
	if err := yamlTo(gizmo, &tmpl); err != nil {
		t.Fatal(err)
	}
	f.storeBehindTheAPI(ctx, "stored-gizmo", v1alpha1.RunnableSpec{Template: tmpl})
	f.refusedByTheSubmitter(ctx, "stored-gizmo", "the stored Gizmo refused by the submitter", "no driver for kind Gizmo.example.com")
	if _, err := dyn.Resource(gizmos).Namespace(f.own).Get(ctx, "g", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Gizmo refused at the writer reached the member cluster (%v)", err)
	}
}
