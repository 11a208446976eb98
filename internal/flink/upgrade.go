package flink

import "github.com/purser-io/purser/internal/platform/fields"

// UpgradeMode is how the operator takes a change of an application
// deployment's spec while its job runs: spec.job.upgradeMode, stateless
// when the template names none (the operator's JobSpec defaults it so).
// stateless cancels the job and starts the new one empty; savepoint stops
// it with a savepoint and restores the new one from it; last-state
// restores from the latest checkpoint through HA metadata (or, without
// HA, from a savepoint). AbstractJobReconciler.reconcileSpecChange
// suspends the running job by this mode, then deploys the new spec.
// "" for a session cluster (no spec.job), which the operator deletes and
// deploys again.
func UpgradeMode(template map[string]any) string {
	if _, ok := fields.Get(template, "spec", "job"); !ok {
		return ""
	}
	if m := fields.String(template, "spec", "job", "upgradeMode"); m != "" {
		return m
	}
	return "stateless"
}
