package kinds

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FlinkDeployment is the Apache Flink Kubernetes Operator's kind.
var FlinkDeployment = schema.GroupKind{Group: "flink.apache.org", Kind: "FlinkDeployment"}

// FlinkRoles are the fields of a FlinkDeploymentSpec whose pods the
// operator makes, JobManager first.
var FlinkRoles = []string{"jobManager", "taskManager"}

type flinkDeployment struct{}

func (flinkDeployment) GroupKind() schema.GroupKind { return FlinkDeployment }
func (flinkDeployment) Knows() string {
	return "spec.jobManager.podTemplate and spec.taskManager.podTemplate, each merged over spec.podTemplate as the operator merges them (lists by index, or by name); spec.serviceAccount"
}
func (flinkDeployment) Nested(map[string]any) ([]Nested, error) { return nil, nil }

// PodTemplates are the JobManager's and the TaskManagers' pods, each
// role's template merged over spec.podTemplate, and the service account
// the operator gives every pod it makes (spec.serviceAccount). The
// operator merges lists element by element unless its
// kubernetes.operator.pod-template.merge-arrays-by-name option says by
// name; purser cannot see the option, so it judges both.
func (flinkDeployment) PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	var pods []PodTemplate
	for _, role := range FlinkRoles {
		var seen []map[string]any
		for _, byName := range []bool{false, true} {
			merged := FlinkPodTemplate(obj, role, byName)
			if merged == nil || containsJSON(seen, merged) {
				continue
			}
			seen = append(seen, merged)
			found, err := onePod(map[string]any{"pod": merged}, []string{"pod"})
			if err != nil {
				return nil, fmt.Errorf("spec.%s.podTemplate merged with spec.podTemplate: %w", role, err)
			}
			for i := range found {
				found[i].Path = "spec." + role + ".podTemplate (merged with spec.podTemplate"
				if byName {
					found[i].Path += ", lists by name"
				}
				found[i].Path += ")"
			}
			pods = append(pods, found...)
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	if account, _ := spec["serviceAccount"].(string); account != "" {
		pods = append(pods, PodTemplate{Path: "spec.serviceAccount", Spec: corev1.PodSpec{ServiceAccountName: account}})
	}
	return pods, nil
}

func containsJSON(list []map[string]any, m map[string]any) bool {
	for _, x := range list {
		if reflect.DeepEqual(x, m) {
			return true
		}
	}
	return false
}

// FlinkPodTemplate is role's pod template (jobManager, taskManager) as
// the operator builds it (FlinkUtils.mergePodTemplates): spec.podTemplate
// with spec.<role>.podTemplate merged into it, objects field by field,
// lists element by element at the same index (longer lists append) or,
// byName, elements with the same name merged and the others appended,
// and any other value replaced by the role's. Nil when neither is set.
// This is the one merge of Flink pod templates: admission judges it and
// the Flink knowledge sizes pods from it.
func FlinkPodTemplate(obj map[string]any, role string, byName bool) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	common, _ := spec["podTemplate"].(map[string]any)
	r, _ := spec[role].(map[string]any)
	own, _ := r["podTemplate"].(map[string]any)
	switch {
	case own == nil && common == nil:
		return nil
	case own == nil:
		return runtime.DeepCopyJSON(common)
	case common == nil:
		return runtime.DeepCopyJSON(own)
	}
	out := runtime.DeepCopyJSON(common)
	mergeInto(out, own, byName)
	return out
}

func mergeInto(to, from map[string]any, byName bool) {
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
		case tIsList && fIsList && byName && named(tl) && named(fl):
			for _, item := range fl {
				im := item.(map[string]any)
				merged := false
				for _, cur := range tl {
					if cm := cur.(map[string]any); cm["name"] == im["name"] {
						mergeInto(cm, im, byName)
						merged = true
						break
					}
				}
				if !merged {
					tl = append(tl, runtime.DeepCopyJSONValue(item))
				}
			}
			to[k] = tl
		case tIsList && fIsList:
			for i, item := range fl {
				if i >= len(tl) {
					tl = append(tl, runtime.DeepCopyJSONValue(item))
					continue
				}
				im, iIsMap := item.(map[string]any)
				if cur, ok := tl[i].(map[string]any); ok && iIsMap {
					mergeInto(cur, im, byName)
				} else {
					tl[i] = runtime.DeepCopyJSONValue(item)
				}
			}
			to[k] = tl
		case tIsMap && fIsMap:
			mergeInto(tm, fm, byName)
		default:
			to[k] = runtime.DeepCopyJSONValue(fv)
		}
	}
}

// named: every element is an object with a name.
func named(l []any) bool {
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}
