package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions the API reports in a Runnable's and a Deployable's
// status.conditions, and in a native object's read through /k8s. They are
// computed from the rest of the status when the API answers, never
// stored, and follow the convention generic readers of Kubernetes status
// go by (the kstatus rules Flux's health checks and kubectl wait use): an
// object is in progress while Reconciling is True, has failed for good
// while Stalled is True, and is up once Ready is True.
// ConditionReady (types.go) is the third.
const (
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionPendingApproval is True while a change waits for a second
	// person (status.pendingChange).
	ConditionPendingApproval = "PendingApproval"
)

// RunnableConditions are the conditions of r as its status stands. A
// runnable is Ready while it runs healthy and once it has succeeded;
// Reconciling while purser is still bringing it there (waiting, placed
// and not yet running, failing over, an update in place not yet taken by
// its object); Stalled once it ended any other way.
func RunnableConditions(r *Runnable) []Condition {
	st := &r.Status
	var out []Condition
	add := func(typ string, ok bool, reason, msg string) { out = append(out, condition(typ, ok, reason, msg)) }
	phase := string(st.Phase)
	where := ""
	if st.Cluster != "" {
		where = " on cluster " + st.Cluster
	}
	switch {
	case st.Phase == PhaseRunning && st.Health == HealthHealthy:
		add(ConditionReady, true, phase, "running and healthy"+where)
	case st.Phase == PhaseRunning:
		msg := "running" + where + ", health " + string(orUnknown(st.Health))
		if st.Message != "" {
			msg += ": " + st.Message
		}
		add(ConditionReady, false, "Health"+string(orUnknown(st.Health)), msg)
	case st.Phase == PhaseSucceeded:
		add(ConditionReady, true, phase, "succeeded"+where)
	default:
		add(ConditionReady, false, phaseOrNew(st.Phase), phaseMessage(st))
	}
	updating := st.Phase == PhaseRunning && runningOlderSpec(r)
	switch {
	case slices.Contains(WaitingPhases, st.Phase) || st.Phase == PhaseScheduled || st.Phase == PhaseSubmitted ||
		st.Phase == PhaseFailingOver || st.Phase == "":
		add(ConditionReconciling, true, phaseOrNew(st.Phase), phaseMessage(st))
	case updating:
		add(ConditionReconciling, true, "Updating",
			fmt.Sprintf("generation %d is not yet taken by the running attempt's object", r.Metadata.Generation))
	}
	if slices.Contains(EndedPhases, st.Phase) && st.Phase != PhaseSucceeded {
		add(ConditionStalled, true, phase, phaseMessage(st))
	}
	if pc := st.PendingChange; pc != nil {
		add(ConditionPendingApproval, true, "AwaitingApproval", pendingMessage(pc.Author, pc.ResourceVersion, pc.Delete))
	}
	return out
}

func condition(typ string, ok bool, reason, msg string) Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return Condition{Type: typ, Status: s, Reason: reason, Message: msg}
}

// runningOlderSpec: the current attempt's object carries a generation of
// the spec older than the runnable's, as far as the attempts were read.
func runningOlderSpec(r *Runnable) bool {
	if len(r.Status.Attempts) == 0 {
		return false
	}
	cur := r.Status.Attempts[len(r.Status.Attempts)-1]
	return cur.Generation != 0 && cur.Generation < r.Metadata.Generation
}

func orUnknown(h Health) Health {
	if h == "" {
		return HealthUnknown
	}
	return h
}

func phaseOrNew(p Phase) string {
	if p == "" {
		return "New"
	}
	return string(p)
}

func phaseMessage(st *RunnableStatus) string {
	msg := "phase " + phaseOrNew(st.Phase)
	if st.Cluster != "" {
		msg += " on cluster " + st.Cluster
	}
	if st.QueuePosition > 0 {
		msg += fmt.Sprintf(", position %d in the queue", st.QueuePosition)
	}
	if st.Message != "" {
		msg += ": " + st.Message
	}
	return msg
}

func pendingMessage(author, rv string, del bool) string {
	what := "a change"
	if del {
		what = "a deletion"
	}
	return fmt.Sprintf("%s by %s waits for approval (resourceVersion %s)", what, author, rv)
}

// DeployableConditions are the conditions of d as its status stands. A
// deployable is Ready once every cluster that took it is synced at its
// live generation (and its rollout, if any, is done); Reconciling while
// some are not yet; Stalled when a cluster's admission refused the object
// as it would be written (only a new spec changes that) or the rollout of
// its generation halted or was rolled back.
func DeployableConditions(d *Deployable) []Condition {
	st := &d.Status
	var out []Condition
	add := func(typ string, ok bool, reason, msg string) { out = append(out, condition(typ, ok, reason, msg)) }
	var behind, denied []string
	for _, c := range st.Clusters {
		switch {
		case c.Reason == "AdmissionDenied":
			denied = append(denied, c.Cluster+": "+c.Message)
		case c.State != StateSynced || c.SyncedGeneration < st.Generation:
			behind = append(behind, c.Cluster)
		}
	}
	rollingOut := st.Rollout != nil && st.Rollout.Generation == st.Generation && st.Rollout.State != RolloutComplete
	rolloutFailed := st.Rollout != nil && st.Rollout.Generation == st.Generation &&
		(st.Rollout.State == RolloutHalted || st.Rollout.State == RolloutRolledBack)
	switch {
	case st.Generation == 0:
		add(ConditionReady, false, "PendingApproval", "not live yet: its first spec waits for approval")
	case len(denied) > 0 || rolloutFailed:
		add(ConditionReady, false, "Failed", failedMessage(denied, st.Rollout, rolloutFailed))
		add(ConditionStalled, true, "Failed", failedMessage(denied, st.Rollout, rolloutFailed))
	case len(st.Clusters) == 0:
		add(ConditionReady, false, "NotSynced", "no cluster has reported a copy yet")
		add(ConditionReconciling, true, "NotSynced", "no cluster has reported a copy yet")
	case len(behind) > 0 || rollingOut:
		msg := fmt.Sprintf("generation %d", st.Generation)
		if len(behind) > 0 {
			msg += " is not yet synced on " + strings.Join(behind, ", ")
		}
		if rollingOut {
			msg += "; rollout " + string(st.Rollout.State)
			if st.Rollout.Wave != "" {
				msg += " in wave " + st.Rollout.Wave
			}
		}
		add(ConditionReady, false, "Syncing", msg)
		if d.Spec.Mode != ModeObserve {
			add(ConditionReconciling, true, "Syncing", msg)
		}
	default:
		add(ConditionReady, true, "Synced", fmt.Sprintf("generation %d synced on %d clusters", st.Generation, len(st.Clusters)))
	}
	if pc := st.PendingChange; pc != nil {
		add(ConditionPendingApproval, true, "AwaitingApproval", pendingMessage(pc.Author, pc.ResourceVersion, pc.Delete))
	}
	return out
}

func failedMessage(denied []string, ro *RolloutStatus, rolloutFailed bool) string {
	var parts []string
	if len(denied) > 0 {
		parts = append(parts, "admission refused the object on "+strings.Join(denied, "; "))
	}
	if rolloutFailed {
		parts = append(parts, "the rollout is "+string(ro.State)+": "+ro.Message)
	}
	return strings.Join(parts, "; ")
}
