// Package operate holds what purser knows of operating work that already
// runs: the operations on a runnable's object (suspend, resume, update in
// place, retry, move) as the API and the submitter need them. What each
// kind does for them is its driver's (internal/domain/kinds).
// The API asks it whether a runnable's kind can be suspended before it
// moves the runnable; the submitter asks it what to apply on the cluster.
// Pure functions only.
package operate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/kinds"
)

// NotSuspendableError says why a kind cannot be suspended.
type NotSuspendableError = kinds.NotSuspendableError

// SuspendSpec is the part of spec that suspends (suspend true) or resumes
// an object of kind gk made from template, by the kind's own field, as
// its driver says (kinds.Suspender: a Job's and an Argo Workflow's
// spec.suspend, a FlinkDeployment's spec.job.state). A FlinkDeployment
// without spec.job (a session cluster) and a kind whose driver knows no
// suspend give a *NotSuspendableError.
func SuspendSpec(gk schema.GroupKind, template map[string]any, suspend bool) (map[string]any, error) {
	return kinds.Default().SuspendSpec(gk, template, suspend)
}
