package health

import (
	"fmt"
	"strings"

	"github.com/purser-io/purser/internal/platform/fields"
)

// The built-in interpreters follow what each kind's own controller writes
// in status, and nothing else: no clock (a verdict must not change between
// two reads of the same object) and no guess about the future. How long an
// Unhealthy object may stay so before it is moved is the failover policy's
// tolerationSeconds, so starting up may read Unhealthy for a while; kinds
// with their own deadline (Deployment) are trusted to report it instead.

// interpretJob judges a batch/v1 Job from its conditions first, as the Job
// controller decides them, and from its pod counts while none is final.
func interpretJob(obj map[string]any) Result {
	active, succeeded, failed := count(obj, "status", "active"), count(obj, "status", "succeeded"), count(obj, "status", "failed")
	counts := fmt.Sprintf("%d active, %d succeeded, %d failed", active, succeeded, failed)
	// FailureTarget is set before the Job's pods are torn down and Failed
	// after: both mean it will not succeed, so report it at the first.
	for _, typ := range []string{"Failed", "FailureTarget"} {
		if c, ok := isTrue(obj, typ); ok {
			return unhealthy(PhaseFailed, withDetail("job failed", c.describe())+" ("+counts+")")
		}
	}
	// SuccessCriteriaMet is the early form of Complete, as FailureTarget is
	// of Failed.
	for _, typ := range []string{"Complete", "SuccessCriteriaMet"} {
		if _, ok := isTrue(obj, typ); ok {
			return healthy(PhaseSucceeded, "job complete ("+counts+")")
		}
	}
	if c, ok := isTrue(obj, "Suspended"); ok {
		return healthy(PhasePending, withDetail("job suspended", c.describe()))
	}
	if fields.Bool(obj, "spec", "suspend") {
		return healthy(PhasePending, "job suspended (spec.suspend)")
	}
	if active > 0 {
		// status.ready counts active pods that run; an old Job controller
		// does not write it, so absent means "assume they run".
		if ready, ok := fields.Int(obj, "status", "ready"); ok && ready == 0 {
			return healthy(PhasePending, "waiting for pods to start ("+counts+")")
		}
		return healthy(PhaseRunning, "job running ("+counts+")")
	}
	if failed > 0 {
		// No active pod and failures, but no Failed condition: the Job
		// controller is backing off before the next try, within backoffLimit.
		return healthy(PhasePending, "retrying after failed pods ("+counts+")")
	}
	if succeeded > 0 {
		// Between the pods of a Job with several completions.
		return healthy(PhaseRunning, "job running ("+counts+")")
	}
	return healthy(PhasePending, "waiting for pods")
}

// interpretWorkflow judges an Argo Workflow by status.phase, which the
// workflow controller keeps; Error is Argo's failure of the workflow
// itself (not of a step), and is as final as Failed.
func interpretWorkflow(obj map[string]any) Result {
	phase, msg := fields.String(obj, "status", "phase"), fields.String(obj, "status", "message")
	if progress := fields.String(obj, "status", "progress"); progress != "" {
		msg = withDetail(msg, "progress "+progress)
	}
	switch phase {
	case "":
		return healthy(PhasePending, "waiting for the workflow controller")
	case "Pending":
		return healthy(PhasePending, withDetail("workflow pending", msg))
	case "Running":
		return healthy(PhaseRunning, withDetail("workflow running", msg))
	case "Succeeded":
		return healthy(PhaseSucceeded, withDetail("workflow succeeded", msg))
	case "Failed", "Error":
		return unhealthy(PhaseFailed, withDetail("workflow "+strings.ToLower(phase), msg))
	}
	return unknown(fmt.Sprintf("unknown workflow phase %q", phase))
}

// interpretDeployment judges an apps/v1 Deployment as `kubectl rollout
// status` does. A rollout in progress is Healthy, because the Deployment
// controller has its own deadline (progressDeadlineSeconds) and says
// ProgressDeadlineExceeded when it passes; once a rollout is complete, a
// Deployment below its minimum availability is Unhealthy.
func interpretDeployment(obj map[string]any) Result {
	replicas := desiredReplicas(obj)
	updated, available := count(obj, "status", "updatedReplicas"), count(obj, "status", "availableReplicas")
	current := count(obj, "status", "replicas")
	phase := PhaseRunning
	if available == 0 && replicas > 0 {
		phase = PhasePending
	}
	if r, waiting := waitingForController(obj, "deployment"); waiting {
		r.Phase = phase
		return r
	}
	progressing, _ := findCondition(obj, "Progressing")
	if progressing.reason == "ProgressDeadlineExceeded" {
		return unhealthy(phase, withDetail("rollout stuck", progressing.describe()))
	}
	counts := fmt.Sprintf("%d of %d updated, %d available", updated, replicas, available)
	if fields.Bool(obj, "spec", "paused") {
		return healthy(phase, "rollout paused ("+counts+")")
	}
	if updated < replicas {
		return healthy(phase, "rolling out ("+counts+")")
	}
	if current > updated {
		return healthy(phase, fmt.Sprintf("rolling out: %d old replicas terminating (%s)", current-updated, counts))
	}
	if replicas == 0 {
		return healthy(PhaseRunning, "scaled to zero")
	}
	if avail, ok := findCondition(obj, "Available"); ok && avail.status == "False" {
		// All replicas are new, but the pods of a first rollout (or of a
		// scale-up) may still be starting: the controller says so by
		// keeping Progressing on a reason other than NewReplicaSetAvailable
		// until the deadline. Once it has said the rollout is done, pods
		// below the minimum are failing, not starting.
		if progressing.status == "True" && progressing.reason != "NewReplicaSetAvailable" {
			return healthy(phase, withDetail("rolling out", avail.describe())+" ("+counts+")")
		}
		return unhealthy(phase, withDetail("unavailable", avail.describe())+" ("+counts+")")
	}
	if available < updated {
		// Above the minimum availability but not all there: the Deployment
		// serves, and Available=False will say when it no longer does.
		return healthy(phase, fmt.Sprintf("%d of %d replicas available", available, replicas))
	}
	return healthy(PhaseRunning, fmt.Sprintf("%d of %d replicas available", available, replicas))
}

// interpretStatefulSet judges an apps/v1 StatefulSet. Unlike a Deployment
// it has no progress deadline and no availability condition, so readiness
// is the only signal: fewer ready replicas than asked for is Unhealthy,
// whether the pods are starting, crashing or being rolled, and the failover
// policy's tolerationSeconds is what tells a slow start from a failure.
func interpretStatefulSet(obj map[string]any) Result {
	replicas := desiredReplicas(obj)
	ready, updated := count(obj, "status", "readyReplicas"), count(obj, "status", "updatedReplicas")
	phase := PhaseRunning
	if ready == 0 && replicas > 0 {
		phase = PhasePending
	}
	if r, waiting := waitingForController(obj, "statefulset"); waiting {
		r.Phase = phase
		return r
	}
	if ready < replicas {
		return unhealthy(phase, fmt.Sprintf("%d of %d replicas ready", ready, replicas))
	}
	readyMsg := fmt.Sprintf("%d of %d replicas ready", ready, replicas)
	if fields.String(obj, "spec", "updateStrategy", "type") == "OnDelete" {
		// The controller never rolls pods under OnDelete, so revisions
		// differ until someone deletes them; that is not a rollout to
		// wait for.
		return healthy(PhaseRunning, readyMsg)
	}
	partition := count(obj, "spec", "updateStrategy", "rollingUpdate", "partition")
	if partition > 0 {
		// Only ordinals at or above the partition are updated, so a
		// finished partitioned rollout leaves currentRevision behind.
		if updated < replicas-partition {
			return healthy(PhaseRunning, fmt.Sprintf("rolling out: %d of %d replicas above partition %d updated", updated, replicas-partition, partition))
		}
		return healthy(PhaseRunning, readyMsg+fmt.Sprintf(", partitioned at %d", partition))
	}
	currentRev, updateRev := fields.String(obj, "status", "currentRevision"), fields.String(obj, "status", "updateRevision")
	if updated < replicas || (updateRev != "" && currentRev != updateRev) {
		return healthy(PhaseRunning, fmt.Sprintf("rolling out: %d of %d replicas at revision %s", updated, replicas, updateRev))
	}
	return healthy(PhaseRunning, readyMsg)
}

// desiredReplicas is spec.replicas, which defaults to 1 when omitted.
func desiredReplicas(obj map[string]any) int64 {
	if n, ok := fields.Int(obj, "spec", "replicas"); ok {
		return n
	}
	return 1
}

// waitingForController reports a workload whose status does not yet
// describe its current spec: no status at all, or an observedGeneration
// behind metadata.generation. Counts in such a status are about the old
// spec, so judging from them would be wrong either way; the controller
// catches up in moments, so it is Healthy and the caller sets the phase.
func waitingForController(obj map[string]any, controller string) (Result, bool) {
	observed, ok := fields.Int(obj, "status", "observedGeneration")
	if !ok {
		return healthy("", "waiting for the "+controller+" controller"), true
	}
	if generation, ok := fields.Int(obj, "metadata", "generation"); ok && generation > observed {
		return healthy("", fmt.Sprintf("waiting for the %s controller to observe generation %d (observed %d)", controller, generation, observed)), true
	}
	return Result{}, false
}

// withDetail appends detail to msg after a colon, when there is one.
func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	if msg == "" {
		return detail
	}
	return msg + ": " + detail
}
