package flink

import "k8s.io/apimachinery/pkg/runtime"

// Roles are the fields of a FlinkDeploymentSpec whose pods the operator
// makes, JobManager first.
var Roles = []string{"jobManager", "taskManager"}

// PodTemplate is role's pod template (jobManager, taskManager) as
// the operator builds it (FlinkUtils.mergePodTemplates): spec.podTemplate
// with spec.<role>.podTemplate merged into it, objects field by field,
// lists element by element at the same index (longer lists append) or,
// byName, elements with the same name merged and the others appended,
// and any other value replaced by the role's. Nil when neither is set.
// This is the one merge of Flink pod templates: the FlinkDeployment's
// driver (internal/domain/kinds) gives it to admission, and Pods sizes
// the pods from it.
func PodTemplate(obj map[string]any, role string, byName bool) map[string]any {
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
