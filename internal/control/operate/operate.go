// Package operate holds what purser knows of operating work that already
// runs, kind by kind: which field of an object suspends and resumes it.
// The API asks it whether a runnable's kind can be suspended before it
// moves the runnable; the submitter asks it what to apply on the cluster.
// Pure functions only; Flink's own rules stay in internal/flink.
package operate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/flink"
)

// Kinds whose suspension purser knows.
var (
	jobKind      = schema.GroupKind{Group: "batch", Kind: "Job"}
	workflowKind = schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}
	flinkKind    = schema.GroupKind{Group: flink.Group, Kind: flink.KindDeployment}
)

// NotSuspendableError says why a kind cannot be suspended.
type NotSuspendableError struct{ Kind schema.GroupKind }

func (e *NotSuspendableError) Error() string {
	return fmt.Sprintf("%s cannot be suspended: purser suspends a batch/v1 Job (spec.suspend), an Argo Workflow (spec.suspend) "+
		"and a FlinkDeployment (spec.job.state), and knows no suspend field of %s; cancel it instead", e.Kind, e.Kind)
}

// SuspendSpec is the part of spec that suspends (suspend true) or resumes
// an object of kind gk made from template, by the kind's own field:
//   - Job: spec.suspend; the Job controller deletes the active pods and
//     sets the Suspended condition, and creates pods again once false
//     (kubernetes pkg/controller/job/job_controller.go, syncJob).
//   - Argo Workflow: spec.suspend, as `argo suspend` and `argo resume`
//     set and clear it (argo-workflows workflow/util/util.go,
//     SuspendWorkflow, ResumeWorkflow); the controller schedules no new
//     step while it is true (docs/walk-through/suspending.md).
//   - FlinkDeployment: spec.job.state suspended / running, which the
//     operator turns into a stop by the upgradeMode and a restore
//     (internal/flink, suspend.go).
//
// A FlinkDeployment without spec.job (a session cluster) and every other
// kind give a *NotSuspendableError.
func SuspendSpec(gk schema.GroupKind, template map[string]any, suspend bool) (map[string]any, error) {
	switch gk {
	case jobKind, workflowKind:
		return map[string]any{"suspend": suspend}, nil
	case flinkKind:
		if !suspend {
			return flink.Resumption(template), nil
		}
		spec, remove := flink.Suspension(template)
		if remove {
			return nil, &NotSuspendableError{Kind: gk}
		}
		if spec == nil { // the template itself asks for a suspended job
			spec = map[string]any{"job": map[string]any{"state": "suspended"}}
		}
		return spec, nil
	}
	return nil, &NotSuspendableError{Kind: gk}
}
