package flink

import (
	"time"

	"github.com/purser-io/purser/internal/platform/fields"
)

// What a planned move of a FlinkDeployment asks of the operator, and how
// purser reads the answer. The operator stops a job with a savepoint when
// spec.job.state becomes suspended under upgradeMode savepoint
// (AbstractJobReconciler.reconcileSpecChange, then
// ApplicationReconciler.cancelJob with SuspendMode.SAVEPOINT, which calls
// AbstractFlinkService.cancelJob: savepointJobOrError runs Flink's
// stop-with-savepoint, then the JobManager deployment is deleted and the
// job reads FINISHED). The savepoint's location is recorded by
// setUpgradeSavepointPath in status.jobStatus.upgradeSavepointPath, and in
// status.jobStatus.savepointInfo.lastSavepoint (trigger UPGRADE) on
// operators without the FlinkStateSnapshot CRD, or as a FlinkStateSnapshot
// with the upgrade flag where it is installed. When stop-with-savepoint
// fails or times out, savepointJobOrError throws an
// UpgradeFailureException ("Savepoint Error", reason SavepointError)
// before anything is deleted: the job keeps running, the last reconciled
// spec stays the running one, and status.error says why; the operator
// tries again at every pass for as long as the spec asks for suspended.

// MoveStop is the part of spec that makes the operator stop the job of a
// FlinkDeployment with a savepoint. isJob false: a session cluster (no
// spec.job), which has no job to hand over.
func MoveStop(template map[string]any) (spec map[string]any, isJob bool) {
	if _, ok := fields.Get(template, "spec", "job"); !ok {
		return nil, false
	}
	return map[string]any{"job": map[string]any{"state": "suspended", "upgradeMode": "savepoint"}}, true
}

// MovePutBack is the part of spec that undoes MoveStop for an object made
// from template whose last observed status is status: the job state and
// upgradeMode the template asks for. An upgradeMode the template does not
// name is left out, so that the apply gives the field up (server-side
// apply removes a field its manager no longer sets) and the object is as
// the template made it. But a job that did stop resumes by upgradeMode
// savepoint, from the savepoint the operator knows: resumed stateless (the
// CRD's default upgradeMode), it would start afresh
// (AbstractJobReconciler.resumeJob inherits the last upgradeMode unless
// the spec asks for stateless).
func MovePutBack(template, status map[string]any) map[string]any {
	job := Resumption(template)["job"].(map[string]any)
	if mode := fields.String(template, "spec", "job", "upgradeMode"); mode != "" {
		job["upgradeMode"] = mode
	}
	if JobStopped(status) && job["upgradeMode"] != "last-state" {
		job["upgradeMode"] = "savepoint"
	}
	return map[string]any{"job": job}
}

// UpgradeSavepointPath is status.jobStatus.upgradeSavepointPath, the
// savepoint or checkpoint the operator restores the job from next, or ""
// (also for the last-state placeholder, which is no location).
func UpgradeSavepointPath(status map[string]any) string {
	p, _ := dig(status, "jobStatus", "upgradeSavepointPath").(string)
	if p == lastStateDummy {
		return ""
	}
	return p
}

// StopSavepoint is what a FlinkDeployment's status says of a stop with
// savepoint asked when its upgradeSavepointPath was before: the savepoint's
// location and, when the operator reported it, when it was taken, once the
// job has stopped with a new savepoint; "" while it has not.
func StopSavepoint(status map[string]any, before string) (path string, takenAt *time.Time) {
	path = UpgradeSavepointPath(status)
	if path == "" || path == before || !JobStopped(status) {
		return "", nil
	}
	if sp := ReportedSavepoint(status); sp != nil && sp.Path == path {
		takenAt = sp.TakenAt
	}
	return path, takenAt
}

// JobStopped reports whether status shows the job stopped by the
// operator: cancelJob left it FINISHED (CANCELED or SUSPENDED on some
// versions), or the lifecycle says SUSPENDED.
func JobStopped(status map[string]any) bool {
	if s, _ := dig(status, "lifecycleState").(string); s == "SUSPENDED" {
		return true
	}
	state, _ := dig(status, "jobStatus", "state").(string)
	return stoppedJob(state)
}

// SavepointFailure is why the operator failed to stop the job with a
// savepoint, from status.error while the job still runs; "" when the
// status shows no such failure.
func SavepointFailure(status map[string]any) string {
	raw, _ := dig(status, "error").(string)
	if raw == "" {
		return ""
	}
	if state, _ := dig(status, "jobStatus", "state").(string); state != "RUNNING" {
		return ""
	}
	return parseFlinkError(raw).text()
}

// RestoreFrom makes obj (a FlinkDeployment about to be created) start its
// job from the savepoint at path: spec.job.initialSavepointPath, which the
// operator restores at the first deployment only
// (AbstractFlinkResourceReconciler.updateStatusBeforeFirstDeployment
// makes it the upgrade savepoint, with upgradeMode savepoint). It reports
// false for an object without spec.job.
func RestoreFrom(obj map[string]any, path string) bool {
	job, ok := dig(obj, "spec", "job").(map[string]any)
	if !ok {
		return false
	}
	job["initialSavepointPath"] = path
	return true
}
