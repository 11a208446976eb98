package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The stages that ship in the kwok module, relative to its kustomize/stage/.
// Nodes become Ready and keep a lease; pods are created, run their init
// containers, become ready, complete when a Job owns them, and go away when
// deleted.
var kwokStageFiles = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/general/pod-create.yaml",
	"pod/general/pod-init-container-running.yaml",
	"pod/general/pod-init-container-completed.yaml",
	"pod/general/pod-ready.yaml",
	"pod/general/pod-complete.yaml",
	"pod/general/pod-delete.yaml",
}

const ownerKindKey = ".metadata.ownerReferences.[].kind"

// kwokStagesFile is the file, in the kwok module's cache folder, of the stages.
const kwokStagesFile = "kwok-stages.yaml"

// writeKwokStages writes one kwok configuration file holding the stages
// above plus a copy of pod-complete that selects pods owned by an Argo
// Workflow, so that workflow steps complete as a Job's pods do.
func writeKwokStages(ctx context.Context, srcDir, cacheDir string) error {
	dir, err := moduleDir(ctx, srcDir, "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	var docs []string
	for _, f := range kwokStageFiles {
		data, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", f))
		if err != nil {
			return fmt.Errorf("kwok stages: %w", err)
		}
		docs = append(docs, strings.TrimSpace(string(data)))
		if strings.HasSuffix(f, "/pod-complete.yaml") {
			wf, err := retargetStage(data, "pod-complete-workflow", "Workflow")
			if err != nil {
				return fmt.Errorf("kwok stages: %s: %w", f, err)
			}
			docs = append(docs, strings.TrimSpace(string(wf)))
		}
	}
	// Each document ends with a newline before the next separator: kwok's
	// decoder needs it.
	return os.WriteFile(filepath.Join(cacheDir, kwokStagesFile), []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

// retargetStage renames a stage and makes it select pods owned by another kind.
func retargetStage(data []byte, name, ownerKind string) ([]byte, error) {
	var stage map[string]any
	if err := yaml.Unmarshal(data, &stage); err != nil {
		return nil, err
	}
	meta, _ := stage["metadata"].(map[string]any)
	spec, _ := stage["spec"].(map[string]any)
	selector, _ := spec["selector"].(map[string]any)
	exprs, _ := selector["matchExpressions"].([]any)
	if meta == nil || exprs == nil {
		return nil, fmt.Errorf("unexpected stage layout")
	}
	meta["name"] = name
	found := false
	for _, e := range exprs {
		expr, _ := e.(map[string]any)
		if expr["key"] == ownerKindKey {
			expr["values"] = []any{ownerKind}
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("no selector on %s", ownerKindKey)
	}
	return yaml.Marshal(stage)
}

// nodeName is the name of the i-th (0-based) kwok node of a cluster.
func nodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i+1) }

// ensureNodes creates the cluster's kwok nodes if they are missing. kwok
// manages only nodes that carry its annotation.
func ensureNodes(ctx context.Context, client kubernetes.Interface, n int) error {
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: nodeName(i),
				Annotations: map[string]string{
					"kwok.x-k8s.io/node":           "fake",
					"node.alpha.kubernetes.io/ttl": "0",
				},
				Labels: map[string]string{
					"type":                   "kwok",
					"kubernetes.io/hostname": nodeName(i),
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"kubernetes.io/role":     "agent",
				},
			},
			Status: corev1.NodeStatus{
				Capacity:    nodeResources(),
				Allocatable: nodeResources(),
			},
		}
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// nodesReady reports an error until every kwok node is Ready.
func nodesReady(ctx context.Context, client kubernetes.Interface, n int) error {
	for i := range n {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready yet", node.Name)
		}
	}
	return nil
}
