package kinds

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
)

// The capabilities below are optional: a driver implements the ones its
// kind has, and the registry's methods of the same names look the driver
// up and say what purser does for a kind without them. They are here, and
// not in the loops that use them, so that what purser knows of a kind
// (how it suspends, how it is fenced, whether it takes a change while it
// runs, how many pods it runs) is written once, beside its pods; a loop
// that needs it asks the registry and never names a kind.

// Suspender is a kind that its own spec can pause and start again, so
// that purser's suspend and resume keep the object, its pods' history and
// its progress, where a kind without one can only be cancelled.
type Suspender interface {
	// SuspendSpec is the part of spec that suspends (suspend true) or
	// resumes an object made from template. A *NotSuspendableError when
	// this object cannot be (a FlinkDeployment that runs no job).
	SuspendSpec(template map[string]any, suspend bool) (map[string]any, error)
	// SuspendsBy names the field, for docs/kinds.md.
	SuspendsBy() string
}

// Fencer is a kind that the agent can stop in place when its cluster's
// lease expires (consistency AtMostOne), keeping the object and what it
// did, so that the failover controller can undo the fencing if the
// cluster comes back before the work moved. A kind without one is deleted
// by fencing: stopping it is all that AtMostOne asks.
type Fencer interface {
	// Fence is the merge patch of spec that stops the live object obj;
	// nil when it is stopped already. remove says that obj cannot be
	// stopped but by deleting it.
	Fence(obj map[string]any) (spec map[string]any, remove bool)
	// Unfence is the merge patch of spec that undoes Fence for an object
	// made from template.
	Unfence(template map[string]any) map[string]any
	// FencesBy says how, for docs/kinds.md.
	FencesBy() string
}

// InPlaceUpdater is a kind whose driver knows what its controller does
// with a changed template while the object runs, so that an update of a
// running runnable is applied when the controller takes it and refused,
// with the reason, when the change would never reach the work. A kind
// without one is refused: purser cannot tell how its controller takes it.
type InPlaceUpdater interface {
	// InPlace is nil when the running object made from old takes next by
	// server-side apply, and otherwise says why not, as a sentence that
	// a user reads.
	InPlace(old, next map[string]any) error
	// UpgradeMode is how the controller takes the change, for the
	// status message; "" when there is nothing to name.
	UpgradeMode(template map[string]any) string
	// InPlaceBy says whether and how, for docs/kinds.md.
	InPlaceBy() string
}

// Demander is a kind whose pods placement can count: which pods its
// object runs at once, and how many of each. Placement weighs each by
// Kubernetes' own request rule; a kind without one is weighed by every
// pod spec found in it, one pod each.
type Demander interface {
	Demand(obj map[string]any) (Demand, error)
	// DemandBy says how the pods are counted, for docs/kinds.md.
	DemandBy() string
}

// PodGroup is Count pods of one spec.
type PodGroup struct {
	// What says in words which pods and what counted them
	// ("pods (parallelism)", "taskmanager").
	What  string
	Count int64
	Spec  corev1.PodSpec
}

// Demand is the pods an object runs.
type Demand struct {
	Groups []PodGroup
	// OneAtATime: the groups run one after another (an Argo Workflow's
	// steps), so the object needs the largest of them, not their sum.
	OneAtATime bool
}

// NotSuspendableError says why a kind cannot be suspended.
type NotSuspendableError struct{ Kind schema.GroupKind }

func (e *NotSuspendableError) Error() string {
	return fmt.Sprintf("%s cannot be suspended: purser suspends a batch/v1 Job (spec.suspend), an Argo Workflow (spec.suspend) "+
		"and a FlinkDeployment (spec.job.state), and knows no suspend field of %s; cancel it instead", e.Kind, e.Kind)
}

// InPlaceError says why the running object of a kind cannot take a
// changed template in place.
type InPlaceError struct {
	Kind schema.GroupKind
	// Reason is the driver's, or, when Unsupported, the registry's.
	Reason string
	// Unsupported: the kind has no driver that knows (no
	// InPlaceUpdater), rather than one that says no.
	Unsupported bool
}

func (e *InPlaceError) Error() string { return e.Reason }

// SuspendSpec is the part of spec that suspends or resumes an object of
// kind gk made from template, by its driver; a *NotSuspendableError for a
// kind without a Suspender.
func (r *Registry) SuspendSpec(gk schema.GroupKind, template map[string]any, suspend bool) (map[string]any, error) {
	if s, ok := r.drivers[gk].(Suspender); ok {
		return s.SuspendSpec(template, suspend)
	}
	return nil, &NotSuspendableError{Kind: gk}
}

// Fence is how the agent stops the live object obj of kind gk: the merge
// patch of spec that stops it (nil when it is stopped already), or remove
// to delete it, which is what it does to a kind without a Fencer.
func (r *Registry) Fence(gk schema.GroupKind, obj map[string]any) (spec map[string]any, remove bool) {
	if f, ok := r.drivers[gk].(Fencer); ok {
		return f.Fence(obj)
	}
	return nil, true
}

// Unfence is the merge patch of spec that undoes the agent's fencing of
// an object of kind gk made from template; false for a kind that fencing
// deletes.
func (r *Registry) Unfence(gk schema.GroupKind, template map[string]any) (map[string]any, bool) {
	if f, ok := r.drivers[gk].(Fencer); ok {
		return f.Unfence(template), true
	}
	return nil, false
}

// InPlace says whether the running object of kind gk made from old can
// take next in place: nil, or an *InPlaceError with the driver's reason
// (or, for a kind without an InPlaceUpdater, that purser cannot tell).
// Both templates are of kind gk: a change of kind is the caller's to
// refuse.
func (r *Registry) InPlace(gk schema.GroupKind, old, next map[string]any) error {
	u, ok := r.drivers[gk].(InPlaceUpdater)
	if !ok {
		return &InPlaceError{Kind: gk, Unsupported: true, Reason: fmt.Sprintf("changing the object of a running %s in place is not supported yet "+
			"(purser updates a FlinkDeployment in place, through the Flink operator's upgrade)", gk)}
	}
	if err := u.InPlace(old, next); err != nil {
		return &InPlaceError{Kind: gk, Reason: err.Error()}
	}
	return nil
}

// UpgradeMode is how the controller of kind gk takes a change of an
// object made from template, for the status message; "" for a kind
// without a mode to name.
func (r *Registry) UpgradeMode(gk schema.GroupKind, template map[string]any) string {
	if u, ok := r.drivers[gk].(InPlaceUpdater); ok {
		return u.UpgradeMode(template)
	}
	return ""
}

// Demand is the pods obj runs, by its driver; false for a kind without a
// Demander, which the caller weighs by the pod specs it finds in obj.
func (r *Registry) Demand(obj map[string]any) (Demand, bool, error) {
	d, ok := r.drivers[GroupKindOf(obj)].(Demander)
	if !ok {
		return Demand{}, false, nil
	}
	demand, err := d.Demand(obj)
	return demand, true, err
}

// SavepointMover is a kind whose running state a planned move hands over:
// stopped with a savepoint on the cluster it leaves and restored from
// exactly that savepoint on the next, where any other kind leaves as a
// failover moves it (the old copy gone, the next one started afresh).
type SavepointMover interface {
	// MovesBySavepoint says whether the object made from template has
	// state to hand over (a FlinkDeployment that runs a job of its own).
	MovesBySavepoint(template map[string]any) bool
	// MovesBy says which objects, for docs/kinds.md.
	MovesBy() string
}

// MovesBySavepoint reports whether a planned move of an object of kind gk
// made from template hands its state over in a savepoint, by its driver;
// false for a kind without a SavepointMover.
func (r *Registry) MovesBySavepoint(gk schema.GroupKind, template map[string]any) bool {
	m, ok := r.drivers[gk].(SavepointMover)
	return ok && m.MovesBySavepoint(template)
}

// FailureClassifier is a kind whose failed object's status says why it
// failed in terms spec.retry's rules can match (an exit code, a deadline,
// a disruption, OOMKilled), so that a retry can be decided on the cause
// rather than on the failure alone. A kind without one fails as
// FailureOther, with its status' message.
type FailureClassifier interface {
	// ClassifyFailure reads the status of a failed object.
	ClassifyFailure(status map[string]any) Failure
	// ClassifiesBy says from what, for docs/kinds.md.
	ClassifiesBy() string
}

// Failure is what a driver can tell of why an object failed.
type Failure struct {
	Class  string // one of v1alpha1.FailureClasses
	Reason string // the object's own words
	// ExitCode is the container's exit code, when the object names it.
	ExitCode *int32
}

// ClassifyFailure reads why an object of kind gk failed from its status,
// by its driver; FailureOther with the status' message for a kind
// without a FailureClassifier.
func (r *Registry) ClassifyFailure(gk schema.GroupKind, status map[string]any) Failure {
	if c, ok := r.drivers[gk].(FailureClassifier); ok {
		return c.ClassifyFailure(status)
	}
	msg, _ := status["message"].(string)
	return Failure{Class: v1alpha1.FailureOther, Reason: msg}
}

// PodSelector is a kind whose controller labels the pods it makes with
// the owner's uid, so that a client can list an object's pods by label
// rather than by walking owner references (a Job's pods, whose owner is
// the Job itself).
type PodSelector interface {
	// PodSelector is the label selector of the pods made by the object
	// with uid.
	PodSelector(uid string) string
}

// PodSelector is the label selector of the pods the object of kind gk
// with uid made, by its driver; "" for a kind without a PodSelector.
func (r *Registry) PodSelector(gk schema.GroupKind, uid string) string {
	if s, ok := r.drivers[gk].(PodSelector); ok {
		return s.PodSelector(uid)
	}
	return ""
}
