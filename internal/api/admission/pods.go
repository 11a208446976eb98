// Package admission decides what a tenant's object may make a member
// cluster run, beyond its kind and scope: the pods it describes, judged by
// the Kubernetes Pod Security Standards with the kube-apiserver's own
// library (k8s.io/pod-security-admission), and the service accounts no
// tenant's pod may name. The API refuses an object that fails here (422,
// with the library's reasons), and the submitter and the syncer ask again
// right before they act, so a policy tightened since the object was
// accepted holds too.
package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodTemplate is one pod an object describes, as the pods it makes will
// be created, and where in the object it was found.
type PodTemplate struct {
	// Path names the place, as a field path of the object
	// ("spec.template.spec", "spec.templates[2]").
	Path     string
	Metadata metav1.ObjectMeta
	Spec     corev1.PodSpec
	// Unjudgeable, when set, says why the pods cannot be judged from the
	// object: something changes them that no spec shows (Argo's
	// podSpecPatch).
	Unjudgeable string
}

// PodTemplates finds every pod template of obj: a Pod's spec; the
// spec.template of workload kinds (Job, Deployment, StatefulSet,
// DaemonSet, ReplicaSet, ReplicationController, and any kind shaped like
// them); a CronJob's job template; each template of an Argo Workflow,
// WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow, as the
// workflow controller builds its pod (the template's containers, script,
// container set, init containers and sidecars, with the workflow's
// volumes, security context and host network); and a FlinkDeployment's
// pod templates (spec.podTemplate, spec.jobManager.podTemplate,
// spec.taskManager.podTemplate), with the service account the operator
// gives its pods. An error names a place whose content is not a pod spec.
func PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	kind, _, _ := unstructured.NestedString(obj, "kind")
	apiVersion, _, _ := unstructured.NestedString(obj, "apiVersion")
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	switch {
	case group == "" && kind == "Pod":
		return onePod(obj, "", "spec")
	case group == "" && kind == "PodTemplate":
		return onePod(obj, "template", "template.spec")
	case group == "batch" && kind == "CronJob":
		return onePod(obj, "spec.jobTemplate.spec.template", "spec.jobTemplate.spec.template.spec")
	case group == "argoproj.io" && (kind == "Workflow" || kind == "WorkflowTemplate" || kind == "ClusterWorkflowTemplate"):
		return workflowPods(obj, "spec")
	case group == "argoproj.io" && kind == "CronWorkflow":
		return workflowPods(obj, "spec.workflowSpec")
	case group == "flink.apache.org" && kind == "FlinkDeployment":
		return flinkPods(obj)
	}
	// Any other kind with a pod template where workloads keep theirs.
	if _, found, _ := unstructured.NestedMap(obj, "spec", "template", "spec"); found {
		return onePod(obj, "spec.template", "spec.template.spec")
	}
	return nil, nil
}

// onePod reads the pod whose metadata is at metaPath (empty: the
// object's own) and whose spec is at specPath.
func onePod(obj map[string]any, metaPath, specPath string) ([]PodTemplate, error) {
	raw, found, err := unstructured.NestedMap(obj, fields(specPath)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", specPath, err)
	}
	if !found {
		return nil, nil
	}
	p := PodTemplate{Path: specPath}
	if err := convert(raw, &p.Spec); err != nil {
		return nil, fmt.Errorf("%s: not a pod spec: %w", specPath, err)
	}
	metaFields := []string{"metadata"}
	if metaPath != "" {
		metaFields = append(fields(metaPath), "metadata")
	}
	if m, ok, _ := unstructured.NestedMap(obj, metaFields...); ok {
		if err := convert(m, &p.Metadata); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(metaFields, "."), err)
		}
	}
	return []PodTemplate{p}, nil
}

func fields(path string) []string { return strings.Split(path, ".") }

func convert(in map[string]any, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(in, out)
}
