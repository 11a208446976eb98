package flink

import "github.com/purser-io/purser/internal/platform/fields"

// What stopping and resuming a FlinkDeployment's job means to the
// operator. Setting spec.job.state to suspended makes the operator stop
// the job the way its upgradeMode says, with a savepoint or keeping its
// last state (AbstractJobReconciler.reconcileSpecChange, cancelJob), so
// the job can be restored from there, on the same cluster or another;
// setting it back to running makes the operator restore it
// (AbstractJobReconciler.resumeJob).

// Suspension is the merge patch of spec that stops obj's job, nil when
// its job is suspended already. remove says that obj runs no job of its
// own to suspend (a session cluster: no spec.job), so stopping it means
// deleting it.
func Suspension(obj map[string]any) (spec map[string]any, remove bool) {
	if _, ok := fields.Get(obj, "spec", "job"); !ok {
		return nil, true
	}
	if fields.String(obj, "spec", "job", "state") == "suspended" {
		return nil, false
	}
	return map[string]any{"job": map[string]any{"state": "suspended"}}, false
}

// Resumption is the merge patch of spec that undoes Suspension for an
// object made from template: the job state the template asks for,
// running when it names none (JobSpec's default).
func Resumption(template map[string]any) map[string]any {
	state := fields.String(template, "spec", "job", "state")
	if state == "" {
		state = "running"
	}
	return map[string]any{"job": map[string]any{"state": state}}
}
