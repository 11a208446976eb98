package flinksim

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The CustomResourceDefinitions the operator's Helm chart installs that
// the simulator uses.
const (
	crdName         = "flinkdeployments.flink.apache.org"
	snapshotCRDName = "flinkstatesnapshots.flink.apache.org"
)

// installTimeout bounds the wait for a new CRD to be served. A sandbox
// apiserver serves one within a second or two; a minute leaves room for a
// loaded machine without hiding a CRD that will never be served.
const installTimeout = time.Minute

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the FlinkDeployment CustomResourceDefinition, if it is
// not there yet, and waits until the apiserver serves the resource. The
// schema keeps every field of spec and status: the simulator needs only a
// few of them, and tests may set any field the real operator knows.
func InstallCRD(ctx context.Context, cfg *rest.Config) error {
	def := crd(crdName, "FlinkDeployment", Resource.Resource, "flinkdeployment", "flinkdep")
	// The columns the operator's own CRD declares, which kubectl get
	// prints.
	versions, _, _ := unstructured.NestedSlice(def.Object, "spec", "versions")
	versions[0].(map[string]any)["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Job Status", "type": "string", "jsonPath": ".status.jobStatus.state", "description": "Last observed state of the job."},
		map[string]any{"name": "Lifecycle State", "type": "string", "jsonPath": ".status.lifecycleState",
			"description": "Lifecycle state of the Flink resource (including being rolled back, failed etc.)."},
	}
	if err := unstructured.SetNestedSlice(def.Object, versions, "spec", "versions"); err != nil {
		return err
	}
	return install(ctx, cfg, def, Resource)
}

// InstallSnapshotCRD installs the FlinkStateSnapshot CRD (operator 1.10+),
// for a simulator with Config.StateSnapshots.
func InstallSnapshotCRD(ctx context.Context, cfg *rest.Config) error {
	return install(ctx, cfg, crd(snapshotCRDName, "FlinkStateSnapshot", SnapshotResource.Resource, "flinkstatesnapshot", "flinksnp"), SnapshotResource)
}

func install(ctx context.Context, cfg *rest.Config, def *unstructured.Unstructured, res schema.GroupVersionResource) error {
	crdName := def.GetName()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", crdName, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", crdName, err)
	}
	if _, err := dyn.Resource(crdResource).Create(ctx, def, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crdName, err)
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	var last error
	_ = reconcile.Retry(ctx, reconcile.Backoff(50*time.Millisecond, time.Second), func(ctx context.Context, _ int) error {
		last = served(ctx, dyn, disc, crdName, res)
		return last
	})
	if last != nil {
		return fmt.Errorf("CRD %s not served within %s: %w (last check: %w)", crdName, installTimeout, ctx.Err(), last)
	}
	return nil
}

// served reports why the CRD cannot be used yet: not Established, not in
// discovery, which clients such as REST mappers read, or not answering a
// list of its objects.
func served(ctx context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, crdName string, res schema.GroupVersionResource) error {
	obj, err := dyn.Resource(crdResource).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	established := slices.ContainsFunc(conds, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Established" && m["status"] == "True"
	})
	if !established {
		return fmt.Errorf("not Established yet")
	}
	list, err := disc.ServerResourcesForGroupVersion(res.GroupVersion().String())
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == res.Resource }) {
		return fmt.Errorf("discovery does not list %s yet", res.Resource)
	}
	if _, err := dyn.Resource(res).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("list %s: %w", res.Resource, err)
	}
	return nil
}

// crd is a CustomResourceDefinition the Flink operator's Helm chart
// installs, reduced to its names and an open schema.
func crd(name, kind, plural, singular, short string) *unstructured.Unstructured {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"group": Resource.Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"kind":       kind,
				"listKind":   kind + "List",
				"plural":     plural,
				"singular":   singular,
				"shortNames": []any{short},
			},
			"versions": []any{map[string]any{
				"name":         Resource.Version,
				"served":       true,
				"storage":      true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec":   open,
						"status": open,
					},
				}},
			}},
		},
	}}
}
