package kinds

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/flink"
)

// FlinkDeployment is the Apache Flink Kubernetes Operator's kind.
var FlinkDeployment = schema.GroupKind{Group: flink.Group, Kind: flink.KindDeployment}

// flinkDeployment is the FlinkDeployment's driver. What the operator does
// with a FlinkDeployment (its pod-template merge, its pods, what stopping
// and resuming a job means, how it upgrades) is internal/flink's
// knowledge; the driver is where the rest of purser asks for it.
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
	for _, role := range flink.Roles {
		var seen []map[string]any
		for _, byName := range []bool{false, true} {
			merged := flink.PodTemplate(obj, role, byName)
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

// Demand is the JobManager's pods and the TaskManagers' as the operator
// sizes them (flink.Pods: the roles' replicas, or the TaskManagers the
// job's parallelism needs, each pod with its role's resource), from the
// merge by index, the operator's default.
func (flinkDeployment) Demand(obj map[string]any) (Demand, error) {
	groups, err := flink.Pods(obj)
	if err != nil {
		return Demand{}, err
	}
	out := Demand{Groups: make([]PodGroup, len(groups))}
	for i, g := range groups {
		out.Groups[i] = PodGroup{What: g.Role, Count: g.Count, Spec: g.Spec}
	}
	return out, nil
}

func (flinkDeployment) DemandBy() string {
	return "spec.jobManager.replicas JobManagers and the TaskManagers of spec.taskManager.replicas (else job.parallelism / task slots), each pod with its role's resource"
}

// SuspendSpec sets spec.job.state: suspended makes the operator stop the
// job the way its upgradeMode says, with a savepoint or keeping its last
// state, so that it can be restored from there; running makes it restore
// the job (flink.Suspension, flink.Resumption). A session cluster (no
// spec.job) runs no job of its own to suspend: a *NotSuspendableError.
func (flinkDeployment) SuspendSpec(template map[string]any, suspend bool) (map[string]any, error) {
	if !suspend {
		return flink.Resumption(template), nil
	}
	spec, remove := flink.Suspension(template)
	if remove {
		return nil, &NotSuspendableError{Kind: FlinkDeployment}
	}
	if spec == nil { // the template itself asks for a suspended job
		spec = map[string]any{"job": map[string]any{"state": "suspended"}}
	}
	return spec, nil
}

func (flinkDeployment) SuspendsBy() string {
	return "spec.job.state suspended / running (a session cluster: no)"
}

// Fence suspends the job as flink.Suspension says, so that the operator
// stops it with a state the next attempt can restore from; a session
// cluster, which runs no job of its own, is deleted.
func (flinkDeployment) Fence(obj map[string]any) (map[string]any, bool) {
	return flink.Suspension(obj)
}

// Unfence gives the object back the job state its template asks for
// (flink.Resumption).
func (flinkDeployment) Unfence(template map[string]any) map[string]any {
	return flink.Resumption(template)
}

func (flinkDeployment) FencesBy() string {
	return "spec.job.state suspended, the template's state on return (a session cluster: deleted)"
}

// InPlace: yes. The operator compares the spec with the last one it
// reconciled and upgrades the running job by the spec's upgradeMode
// (stateless, savepoint, last-state), suspending it first
// (flink-kubernetes-operator, AbstractJobReconciler.reconcileSpecChange;
// a session cluster by SessionReconciler.reconcileSpecChange: deleted
// and deployed again).
func (flinkDeployment) InPlace(_, _ map[string]any) error { return nil }

// UpgradeMode is spec.job.upgradeMode (flink.UpgradeMode).
func (flinkDeployment) UpgradeMode(template map[string]any) string {
	return flink.UpgradeMode(template)
}

func (flinkDeployment) InPlaceBy() string {
	return "yes, the operator's upgrade by spec.job.upgradeMode"
}

// MovesBySavepoint: a job of its own (not a session cluster, which has no
// job to hand over) is stopped with a savepoint and restored from it
// (flink.MoveStop).
func (flinkDeployment) MovesBySavepoint(template map[string]any) bool {
	_, isJob := flink.MoveStop(template)
	return isJob
}

func (flinkDeployment) MovesBy() string {
	return "by savepoint when it runs a job (a session cluster: afresh)"
}
