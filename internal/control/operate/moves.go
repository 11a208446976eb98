package operate

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// The moves of a user's operation, decided from the runnable and its
// attempts as one transaction read them. Each returns the lifecycle
// transition to apply (By and Actor are the caller's to fill in), or why
// the runnable cannot be operated so now: a *StateError (the API's 409)
// or a *NotSuspendableError (422). The caller checks who may.

// StateError says that the runnable's phase does not allow the operation.
type StateError struct{ Message string }

func (e *StateError) Error() string { return e.Message }

func stateErr(format string, args ...any) error {
	return &StateError{Message: fmt.Sprintf(format, args...)}
}

// Suspend moves a Submitted or Running runnable to Suspended; the
// submitter then sets its kind's suspend field on the attempt's cluster.
func Suspend(cur *lifecycle.Runnable, gk schema.GroupKind, template map[string]any, attempts []*store.Attempt, actor string, now time.Time) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	if _, err := SuspendSpec(gk, template, true); err != nil {
		return nil, err
	}
	phase := cur.Phase()
	if phase == v1alpha1.PhaseSuspended {
		return nil, stateErr("runnable %s is Suspended already", ref)
	}
	n := len(attempts)
	if !lifecycle.Allowed(phase, v1alpha1.PhaseSuspended, lifecycle.ByAPI) || n == 0 || attempts[n-1].EndedAt != nil {
		return nil, stateErr("runnable %s is %s; only a Submitted or Running runnable can be suspended", ref, phase)
	}
	a := attempts[n-1]
	summary := fmt.Sprintf("suspended %s (was %s; attempt %d on %s)", ref, phase, a.Number, a.Cluster)
	return &lifecycle.Transition{
		To: v1alpha1.PhaseSuspended, By: lifecycle.ByAPI, Actor: actor,
		Message: summary + "; its suspend field is being set on the cluster",
		Edit: func(st *v1alpha1.RunnableStatus) error {
			st.Suspension = &v1alpha1.Suspension{Suspend: true, By: actor, At: now, Attempt: a.Number}
			return nil
		},
		Enqueue: stream.SubmissionSuspend, EnqueueAttempt: a.Number,
		Audit: &audit.Entry{Action: "suspend", Summary: summary},
	}, nil
}

// Resume asks the submitter to clear a Suspended runnable's suspend field;
// the runnable stays Suspended until that is done, then is Submitted.
func Resume(cur *lifecycle.Runnable, actor string, now time.Time) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	sp := cur.Status.Suspension
	if cur.Phase() != v1alpha1.PhaseSuspended || sp == nil {
		return nil, stateErr("runnable %s is %s, not Suspended; nothing to resume", ref, cur.Phase())
	}
	if !sp.Suspend {
		return nil, stateErr("runnable %s is being resumed already (asked by %s)", ref, sp.By)
	}
	summary := fmt.Sprintf("resume of %s asked (attempt %d)", ref, sp.Attempt)
	return &lifecycle.Transition{
		To: v1alpha1.PhaseSuspended, By: lifecycle.ByAPI, Actor: actor,
		Message: summary + "; its suspend field is being cleared on the cluster",
		Edit: func(st *v1alpha1.RunnableStatus) error {
			st.Suspension = &v1alpha1.Suspension{Suspend: false, By: actor, At: now, Attempt: sp.Attempt}
			return nil
		},
		Enqueue: stream.SubmissionResume, EnqueueAttempt: sp.Attempt,
		Audit: &audit.Entry{Action: "resume", Summary: summary},
	}, nil
}

// Rerun queues an ended runnable (Succeeded, Failed, Expired, Cancelled)
// again, for a new attempt with its current spec, or, where the namespace
// needs approval, makes it wait for one. Its attempts so far stay; its
// status starts afresh, as nothing the last attempt observed or carried
// applies to the next. The actor becomes its submitter (cur.Rec is
// changed: the caller's own read in the transaction).
func Rerun(cur *lifecycle.Runnable, attempts []*store.Attempt, actor string, needsApproval bool) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	phase := cur.Phase()
	if !phase.Terminal() || !lifecycle.Allowed(phase, v1alpha1.PhaseQueued, lifecycle.ByAPI) {
		return nil, stateErr("runnable %s is %s; only an ended runnable (Succeeded, Failed, Expired, Cancelled) can be rerun", ref, phase)
	}
	n := len(attempts)
	if n > 0 && attempts[n-1].EndedAt == nil {
		return nil, stateErr("runnable %s is %s and its attempt %d on %s is still being removed; rerun it once that is done",
			ref, phase, attempts[n-1].Number, attempts[n-1].Cluster)
	}
	number := 1
	if n > 0 {
		number = attempts[n-1].Number + 1
	}
	cur.Rec.Submitter = actor
	summary := fmt.Sprintf("rerun %s, which had ended %s, as attempt %d", ref, phase, number)
	t := &lifecycle.Transition{
		To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI, Actor: actor,
		Message: summary + "; waiting for a cluster",
		Edit: func(st *v1alpha1.RunnableStatus) error {
			*st = v1alpha1.RunnableStatus{Message: st.Message, ApprovedBy: st.ApprovedBy, ApprovedGeneration: st.ApprovedGeneration}
			return nil
		},
		Enqueue: stream.SubmissionSubmit, EnqueueAttempt: number,
		Audit: &audit.Entry{Action: "rerun", Summary: summary},
	}
	if needsApproval {
		t.To, t.Enqueue = v1alpha1.PhasePendingApproval, ""
		t.Message = summary + "; waiting for approval by an approver other than " + actor
		t.Edit = func(st *v1alpha1.RunnableStatus) error {
			*st = v1alpha1.RunnableStatus{Message: st.Message}
			return nil
		}
		t.Audit.Summary += "; waits for approval"
	}
	return t, nil
}

// IneligibleError says that a move's target cannot take the runnable (the
// API's 422), naming why.
type IneligibleError struct{ Message string }

func (e *IneligibleError) Error() string { return e.Message }

// BySavepoint reports whether a runnable of kind gk made from template is
// moved by handing its state over in a savepoint, as its driver says
// (kinds.SavepointMover: a FlinkDeployment that runs a job of its own,
// not a session cluster).
func BySavepoint(gk schema.GroupKind, template map[string]any) bool {
	return kinds.Default().MovesBySavepoint(gk, template)
}

// Move asks a planned move of a Running runnable to cluster to ("":
// placement chooses among the clusters other than its own), checked
// against cs, every registered cluster as placement sees it (readiness,
// taints, what of spec.dependsOn it lacks). The controller then does it:
// a FlinkDeployment is stopped with a savepoint and restored from it on
// the target; other kinds leave as a cluster failover moves them, the old
// copy gone before the next one is placed (AtMostOne).
func Move(cur *lifecycle.Runnable, spec *v1alpha1.RunnableSpec, gvk schema.GroupVersionKind, attempts []*store.Attempt,
	to string, cs []placement.Cluster, actor string, now time.Time) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	phase := cur.Phase()
	if m := cur.Status.Move; m.Active() {
		return nil, stateErr("runnable %s is being moved already, from %s to %s (asked by %s at %s; step %s)",
			ref, m.From, m.To, m.By, m.At.UTC().Format(time.RFC3339), m.Step)
	}
	n := len(attempts)
	if phase != v1alpha1.PhaseRunning || n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].Cluster != cur.Rec.Cluster {
		return nil, stateErr("runnable %s is %s; only a Running runnable can be moved", ref, phase)
	}
	a := attempts[n-1]
	if to == a.Cluster {
		return nil, &IneligibleError{Message: fmt.Sprintf("runnable %s runs on %s already; name another cluster, or none to let placement choose", ref, to)}
	}
	p := attempt.Excluding(spec.Placement, a.Cluster)
	candidates := cs
	if to != "" {
		i := slices.IndexFunc(cs, func(c placement.Cluster) bool { return c.Name == to })
		if i < 0 {
			return nil, &IneligibleError{Message: fmt.Sprintf("cluster %s is not registered", to)}
		}
		candidates = cs[i : i+1]
	}
	d := placement.Choose(p, gvk.String(), candidates)
	if d.Cluster == "" {
		if to != "" {
			return nil, &IneligibleError{Message: fmt.Sprintf("cluster %s cannot take runnable %s: %s", to, ref, d.Rejected[to])}
		}
		return nil, &IneligibleError{Message: fmt.Sprintf("no cluster other than %s can take runnable %s: %s", a.Cluster, ref, d.Reason)}
	}
	how := fmt.Sprintf("its copy on %s is removed first, then it is placed on %s", a.Cluster, d.Cluster)
	if BySavepoint(gvk.GroupKind(), spec.Template) {
		how = fmt.Sprintf("its job is stopped on %s with a savepoint, and the copy on %s restores from exactly that savepoint", a.Cluster, d.Cluster)
	}
	summary := fmt.Sprintf("planned move of %s (attempt %d) from %s to %s asked by %s", ref, a.Number, a.Cluster, d.Cluster, actor)
	move := &v1alpha1.Move{From: a.Cluster, To: d.Cluster, By: actor, At: now, Attempt: a.Number, Step: v1alpha1.MoveAsked}
	return &lifecycle.Transition{
		To: v1alpha1.PhaseRunning, By: lifecycle.ByAPI, Actor: actor,
		Message: summary + "; " + how,
		Edit: func(st *v1alpha1.RunnableStatus) error {
			st.Move = move
			return nil
		},
		Audit: &audit.Entry{Action: "move", Summary: summary + "; " + how},
	}, nil
}
