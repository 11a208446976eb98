package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// workflowSpec holds the parts of an Argo WorkflowSpec that go into the
// pod of each of its templates (argoproj.io/v1alpha1 WorkflowSpec: the
// workflow controller puts the workflow's volumes, security context, host
// network, service account and pod spec patch into every pod it makes).
type workflowSpec struct {
	Templates          []workflowTemplate         `json:"templates"`
	TemplateDefaults   *workflowTemplate          `json:"templateDefaults"`
	Volumes            []corev1.Volume            `json:"volumes"`
	SecurityContext    *corev1.PodSecurityContext `json:"securityContext"`
	HostNetwork        *bool                      `json:"hostNetwork"`
	ServiceAccountName string                     `json:"serviceAccountName"`
	Executor           *struct {
		ServiceAccountName string `json:"serviceAccountName"`
	} `json:"executor"`
	PodSpecPatch string `json:"podSpecPatch"`
}

// workflowTemplate is one template of a workflow, the parts of it that
// make a pod (argoproj.io/v1alpha1 Template: container, script (a
// container inline with its source), containerSet, initContainers and
// sidecars (containers inline), volumes, securityContext,
// serviceAccountName, podSpecPatch).
type workflowTemplate struct {
	Name         string            `json:"name"`
	Container    *corev1.Container `json:"container"`
	Script       *corev1.Container `json:"script"`
	ContainerSet *struct {
		Containers []corev1.Container `json:"containers"`
	} `json:"containerSet"`
	InitContainers     []corev1.Container         `json:"initContainers"`
	Sidecars           []corev1.Container         `json:"sidecars"`
	Volumes            []corev1.Volume            `json:"volumes"`
	SecurityContext    *corev1.PodSecurityContext `json:"securityContext"`
	ServiceAccountName string                     `json:"serviceAccountName"`
	Executor           *struct {
		ServiceAccountName string `json:"serviceAccountName"`
	} `json:"executor"`
	PodSpecPatch string `json:"podSpecPatch"`
	Metadata     struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// workflowPods builds the pod of each template of the WorkflowSpec at
// specPath that runs containers. Templates that make no pod of their
// own (steps, dag, suspend, resource) have none.
func workflowPods(obj map[string]any, specPath string) ([]PodTemplate, error) {
	raw, found, err := unstructured.NestedMap(obj, fields(specPath)...)
	if err != nil || !found {
		return nil, err
	}
	var spec workflowSpec
	if err := convert(raw, &spec); err != nil {
		return nil, fmt.Errorf("%s: not a workflow spec: %w", specPath, err)
	}
	var pods []PodTemplate
	for i, t := range spec.Templates {
		var containers []corev1.Container
		// The controller names a template's one container "main".
		for _, c := range []*corev1.Container{t.Container, t.Script} {
			if c != nil {
				main := *c
				if main.Name == "" {
					main.Name = "main"
				}
				containers = append(containers, main)
			}
		}
		if t.ContainerSet != nil {
			containers = append(containers, t.ContainerSet.Containers...)
		}
		containers = append(containers, t.Sidecars...)
		if len(containers) == 0 && len(t.InitContainers) == 0 {
			continue
		}
		p := PodTemplate{Path: fmt.Sprintf("%s.templates[%d]", specPath, i)}
		if t.Name != "" {
			p.Path += " (" + t.Name + ")"
		}
		p.Metadata.Labels, p.Metadata.Annotations = t.Metadata.Labels, t.Metadata.Annotations
		p.Spec.Containers = containers
		p.Spec.InitContainers = t.InitContainers
		p.Spec.Volumes = append(append([]corev1.Volume(nil), spec.Volumes...), t.Volumes...)
		p.Spec.SecurityContext = first(t.SecurityContext, spec.SecurityContext, defaults(spec).SecurityContext)
		if spec.HostNetwork != nil {
			p.Spec.HostNetwork = *spec.HostNetwork
		}
		p.Spec.ServiceAccountName = firstString(t.ServiceAccountName, defaults(spec).ServiceAccountName, spec.ServiceAccountName)
		if patch := firstString(t.PodSpecPatch, defaults(spec).PodSpecPatch, spec.PodSpecPatch); patch != "" {
			p.Unjudgeable = "podSpecPatch changes the pod in ways its spec does not show"
		}
		pods = append(pods, p)
		if sa := executorAccount(t, spec); sa != "" {
			// The executor runs in the pod under an account of its own.
			pods = append(pods, PodTemplate{Path: p.Path + ".executor", Spec: corev1.PodSpec{ServiceAccountName: sa}})
		}
	}
	return pods, nil
}

func defaults(spec workflowSpec) workflowTemplate {
	if spec.TemplateDefaults == nil {
		return workflowTemplate{}
	}
	return *spec.TemplateDefaults
}

func executorAccount(t workflowTemplate, spec workflowSpec) string {
	if t.Executor != nil && t.Executor.ServiceAccountName != "" {
		return t.Executor.ServiceAccountName
	}
	if spec.Executor != nil {
		return spec.Executor.ServiceAccountName
	}
	return ""
}

func first[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func firstString(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// flinkPods reads a FlinkDeployment's pods as the operator makes them:
// spec.podTemplate merged with the JobManager's and with the TaskManagers'
// own (flink.apache.org/v1beta1 FlinkDeploymentSpec: podTemplate,
// jobManager.podTemplate, taskManager.podTemplate), the role's template
// winning; spec.serviceAccount is the account of every pod it makes.
func flinkPods(obj map[string]any) ([]PodTemplate, error) {
	common, _, _ := unstructured.NestedMap(obj, "spec", "podTemplate")
	var pods []PodTemplate
	for _, role := range []string{"jobManager", "taskManager"} {
		own, _, _ := unstructured.NestedMap(obj, "spec", role, "podTemplate")
		merged := mergePodTemplates(common, own)
		if merged == nil {
			continue
		}
		found, err := onePod(map[string]any{"pod": merged}, "pod", "pod.spec")
		if err != nil {
			return nil, fmt.Errorf("spec.%s.podTemplate merged with spec.podTemplate: %w", role, err)
		}
		for i := range found {
			found[i].Path = "spec." + role + ".podTemplate (merged with spec.podTemplate)"
		}
		pods = append(pods, found...)
	}
	if account, _, _ := unstructured.NestedString(obj, "spec", "serviceAccount"); account != "" {
		pods = append(pods, PodTemplate{Path: "spec.serviceAccount", Spec: corev1.PodSpec{ServiceAccountName: account}})
	}
	return pods, nil
}

// mergePodTemplates merges from into a copy of to as the operator merges
// pod templates (FlinkUtils.mergePodTemplates): objects field by field,
// lists element by element at the same index (longer lists append), and
// any other value replaced.
func mergePodTemplates(to, from map[string]any) map[string]any {
	switch {
	case from == nil:
		return to
	case to == nil:
		return from
	}
	out := runtime.DeepCopyJSON(to)
	mergeInto(out, from)
	return out
}

func mergeInto(to, from map[string]any) {
	for k, fv := range from {
		tv, ok := to[k]
		if !ok {
			to[k] = runtime.DeepCopyJSONValue(fv)
			continue
		}
		tl, tIsList := tv.([]any)
		fl, fIsList := fv.([]any)
		tm, tIsMap := tv.(map[string]any)
		fm, fIsMap := fv.(map[string]any)
		switch {
		case tIsList && fIsList:
			for i, item := range fl {
				if i >= len(tl) {
					tl = append(tl, runtime.DeepCopyJSONValue(item))
					continue
				}
				im, iIsMap := item.(map[string]any)
				if cur, ok := tl[i].(map[string]any); ok && iIsMap {
					mergeInto(cur, im)
				} else {
					tl[i] = runtime.DeepCopyJSONValue(item)
				}
			}
			to[k] = tl
		case tIsMap && fIsMap:
			mergeInto(tm, fm)
		default:
			to[k] = runtime.DeepCopyJSONValue(fv)
		}
	}
}
