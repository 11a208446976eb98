package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ArgoNamespace is where the sandbox runs the Argo Workflows controller; it
// watches workflows in every namespace.
const ArgoNamespace = "argo"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// startArgo installs the Argo CRDs, waits until they are served, and runs
// the real workflow-controller against the cluster. Pods of workflow steps
// are completed by kwok's Workflow-owned pod stage; a short task-result
// timeout lets the controller accept them without the executor's reports.
func (c *Cluster) startArgo(ctx context.Context, client kubernetes.Interface) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	names, err := applyCRDs(ctx, dyn, c.cfg.Binaries.ArgoCRDs())
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, 60*time.Second, "Argo CRDs Established", func(ctx context.Context) error {
		return crdsEstablished(ctx, dyn, names)
	}, c.processes(binAPIServer)...); err != nil {
		return err
	}
	if err := ensureNamespace(ctx, client, ArgoNamespace); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: ArgoNamespace},
		// Metrics servers would bind the same fixed port in every cluster.
		Data: map[string]string{"config": "metricsConfig:\n  enabled: false\ntelemetryConfig:\n  enabled: false\n"},
	}
	if _, err := client.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create argo configmap: %w", err)
	}
	args := []string{"--kubeconfig", c.KubeconfigPath(), "--namespace", ArgoNamespace,
		"--executor-image", executorImage, "--loglevel", "info"}
	env := []string{"LEADER_ELECTION_DISABLE=true", "TASK_RESULT_TIMEOUT_DURATION=2s"}
	return c.start(binWorkflowController, args, env)
}

// applyCRDs creates every CRD manifest in dir and returns their names.
func applyCRDs(ctx context.Context, dyn dynamic.Interface, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("CRDs: none in %s", dir)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crd := &unstructured.Unstructured{Object: obj}
		if crd.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	return names, nil
}

func crdsEstablished(ctx context.Context, dyn dynamic.Interface, names []string) error {
	var waiting []string
	for _, name := range names {
		crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if !established {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("not established yet: %s", strings.Join(waiting, ", "))
	}
	return nil
}
