package flink

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/fields"
)

// The FlinkDeployment judgement follows the state machine of the Apache
// Flink Kubernetes Operator (apache/flink-kubernetes-operator), read from
// its source; the class and method each rule rests on is named beside it,
// and docs/health.md has the same rules as a table.
//
// The order matters and is the operator's own: CommonStatus.getLifecycleState
// decides the resource's lifecycle from the reconciliation status before it
// looks at the job, and the job state only means what it says once the
// operator has deployed the spec it is judged against. A FINISHED job is
// what the operator writes when it stops a job to suspend or upgrade it
// (AbstractFlinkService.cancelJob, updateStatusAfterClusterDeletion), so
// FINISHED ends a runnable only when the operator also says the spec it
// deployed asks the job to run and nothing is being changed.

// userErrorReasons are the container states that the Flink operator turns
// into a DeploymentFailedException (DeploymentFailedException
// .CONTAINER_ERROR_REASONS, plus InvalidImageName and CreateContainerError,
// which come from the same kind of mistake). Each comes from the
// FlinkDeployment's own spec (its image, its entry point, its memory, a
// missing ConfigMap or Secret it names), so the next cluster would fail the
// same way.
var userErrorReasons = []string{
	"ErrImagePull",
	"ImagePullBackOff",
	"InvalidImageName",
	"CrashLoopBackOff",
	"CreateContainerConfigError",
	"CreateContainerError",
	"RunContainerError",
	"OOMKilled",
}

// plainUserErrors are the kubelet's waiting messages for the same states,
// which is all that operators before 1.3 put in a plain-text status.error
// (FlinkDeploymentController.handleDeploymentFailed wrote dfe.getMessage(),
// the container's waiting message, without its reason).
var plainUserErrors = map[string]string{
	"Back-off pulling image":      "ImagePullBackOff",
	"restarting failed container": "CrashLoopBackOff",
}

// Errors after which the operator itself will not bring the job back
// (CommonStatus.MSG_MANUAL_RESTORE_REQUIRED, MSG_HA_METADATA_NOT_AVAILABLE,
// MSG_JOB_FINISHED_OR_CONFIGMAPS_DELETED); CommonStatus.getLifecycleState
// calls a MISSING or ERROR JobManager with one of them FAILED.
var unrecoverableErrors = []string{
	"Manual restore required.",
	"HA metadata is not available",
	"It is possible that the job has finished or terminally failed, or the configmaps have been deleted.",
}

// flinkObject is what the judgement reads of a FlinkDeployment.
type flinkObject struct {
	application bool   // spec.job is set: an application cluster
	desired     string // spec.job.state, "running" when unset (JobSpec's default)
	lifecycle   string // status.lifecycleState, or derived for operators before 1.4
	derived     bool   // lifecycle was derived, not reported
	recon       string // status.reconciliationStatus.state
	reconciled  string // job.state of the last reconciled spec, "" without one
	firstDeploy bool   // the last reconciled spec is still the first deployment
	job         string // status.jobStatus.state
	jm          string // status.jobManagerDeploymentStatus
	err         flinkErr
	pending     string // why the operator has not reconciled the current spec yet, or ""
}

// JudgeDeployment judges a flink.apache.org/v1beta1 FlinkDeployment, the
// decoded JSON of the object, by the Flink Kubernetes operator's status.
// It reads its input defensively and never panics on an odd object.
//
// Healthy here means "moving it to another cluster would not help", not
// "it is doing well": a FAILED job has exhausted Flink's own restart
// strategy, and the same job would fail again elsewhere; a job being
// suspended or upgraded by the operator is doing what it was asked.
// Unhealthy means the Flink cluster is not there to run the job, which a
// failover fixes once tolerationSeconds have passed.
func JudgeDeployment(obj map[string]any) Verdict {
	f := readFlink(obj)
	if f.lifecycle == "" && f.job == "" && f.jm == "" && f.err.raw == "" {
		// No status at all: nothing is known of the job yet, so its
		// health is Unknown, not Unhealthy. The phase says that the
		// operator has not taken it up: on a cluster whose operator is
		// gone the status stays empty forever, and the failover
		// controller counts the toleration from the first such
		// observation, as it would an Unhealthy one.
		return Verdict{Health: v1alpha1.HealthUnknown, Phase: PhaseUnobserved, Message: "not yet observed by the Flink operator"}
	}
	if !f.application {
		return flinkSession(f)
	}
	return flinkApplication(f)
}

func readFlink(obj map[string]any) flinkObject {
	f := flinkObject{
		job:       fields.String(obj, "status", "jobStatus", "state"),
		jm:        fields.String(obj, "status", "jobManagerDeploymentStatus"),
		lifecycle: fields.String(obj, "status", "lifecycleState"),
		recon:     fields.String(obj, "status", "reconciliationStatus", "state"),
		err:       parseFlinkError(fields.String(obj, "status", "error")),
	}
	last := fields.String(obj, "status", "reconciliationStatus", "lastReconciledSpec")
	hasJob := false
	if last != "" {
		f.reconciled, f.firstDeploy, hasJob = reconciledJob(last)
	}
	spec, hasSpec := fields.Get(obj, "spec")
	if job, ok := fields.Get(obj, "spec", "job"); ok && job != nil {
		f.application = true
		f.desired = strings.ToLower(fields.String(obj, "spec", "job", "state"))
		if f.desired == "" {
			f.desired = "running"
		}
	} else if hasSpec && spec != nil {
		// A spec without a job is a session cluster (Mode.getMode), as
		// the operator deployed it when the spec is all we have.
		f.application = hasJob
	} else {
		// No spec (a status saved on its own): the last reconciled spec
		// says which mode was deployed; without one, a job id or a job
		// state only the job of an application cluster has.
		f.application = hasJob || fields.String(obj, "status", "jobStatus", "jobId") != "" ||
			f.lifecycle == "SUSPENDED" || (f.job != "" && f.job != "FINISHED")
		f.desired = f.reconciled
		if f.desired == "" && f.lifecycle == "SUSPENDED" {
			f.desired = "suspended"
		}
	}
	if f.lifecycle == "" {
		f.lifecycle, f.derived = deriveLifecycle(obj, f, last), true
	}
	if f.lifecycle == "" && f.application && f.desired == "suspended" && stoppedJob(f.job) {
		// A minimal status (no lifecycle, no reconciliation status, no
		// JobManager status) of a job the user suspended: judged by the
		// spec and the job state, as getLifecycleState judges the last
		// reconciled spec's job.state suspended. The operator stops a
		// suspended job with cancelJob, which leaves it FINISHED,
		// CANCELED or SUSPENDED by the operator's version; none of those
		// is an end of the work while the spec asks for suspended.
		f.lifecycle = "SUSPENDED"
	}
	// The operator records the generation it reconciled
	// (ReconciliationStatus.serializeAndSetLastReconciledSpec sets
	// observedGeneration); a newer spec is a change it has yet to act on.
	gen, okGen := fields.Int(obj, "metadata", "generation")
	seen, okSeen := fields.Int(obj, "status", "observedGeneration")
	if okGen && okSeen && gen > seen {
		f.pending = fmt.Sprintf("the operator has not reconciled generation %d yet (observed %d)", gen, seen)
	} else if f.application && f.reconciled != "" && f.desired != "" && f.desired != f.reconciled {
		f.pending = fmt.Sprintf("spec.job.state is %s, the operator last deployed it %s", f.desired, f.reconciled)
	}
	return f
}

// stoppedJob reports whether a job state is one a suspended job is left
// in (JobStatus: FINISHED after a savepoint or a cancel, CANCELED,
// SUSPENDED).
func stoppedJob(state string) bool {
	switch state {
	case "FINISHED", "CANCELED", "SUSPENDED":
		return true
	}
	return false
}

// reconciledJob reads the job state of status.reconciliationStatus
// .lastReconciledSpec, which the operator stores as a JSON string:
// {"spec": {...}, "resource_metadata": {...}} since 1.2
// (SpecUtils.writeSpecWithMeta), the spec itself before
// (SpecUtils.deserializeSpecWithMeta reads both).
func reconciledJob(last string) (state string, firstDeploy, hasJob bool) {
	var wrapped struct {
		Spec *struct {
			Job *struct {
				State string `json:"state"`
			} `json:"job"`
		} `json:"spec"`
		Job *struct {
			State string `json:"state"`
		} `json:"job"`
		Meta *struct {
			FirstDeployment bool `json:"firstDeployment"`
		} `json:"resource_metadata"`
	}
	if json.Unmarshal([]byte(last), &wrapped) != nil {
		return "", false, false
	}
	job := wrapped.Job
	if wrapped.Meta != nil || wrapped.Spec != nil {
		job = nil
		if wrapped.Spec != nil {
			job = wrapped.Spec.Job
		}
	}
	if wrapped.Meta != nil {
		firstDeploy = wrapped.Meta.FirstDeployment
	}
	if job == nil {
		return "", firstDeploy, false
	}
	if job.State == "" {
		return "running", firstDeploy, true
	}
	return strings.ToLower(job.State), firstDeploy, true
}

// deriveLifecycle is CommonStatus.getLifecycleState for operators that do
// not write status.lifecycleState (1.0 to 1.3, where the method existed but
// was @JsonIgnore): the same decisions from the same fields.
func deriveLifecycle(obj map[string]any, f flinkObject, last string) string {
	if _, ok := fields.Get(obj, "status", "reconciliationStatus"); !ok {
		return ""
	}
	if last == "" { // ReconciliationStatus.isBeforeFirstDeployment
		if f.err.raw == "" {
			return "CREATED"
		}
		return "FAILED"
	}
	switch f.recon {
	case "UPGRADING", "ROLLING_BACK":
		return f.recon
	}
	if f.reconciled == "suspended" {
		return "SUSPENDED"
	}
	if f.job == "FAILED" {
		return "FAILED"
	}
	if (f.jm == "MISSING" || f.jm == "ERROR") && f.err.unrecoverable() {
		return "FAILED"
	}
	if f.recon == "ROLLED_BACK" {
		return "ROLLED_BACK"
	}
	stable := fields.String(obj, "status", "reconciliationStatus", "lastStableSpec")
	if stable != "" && stable == last { // isLastReconciledSpecStable
		return "STABLE"
	}
	return "DEPLOYED"
}

// flinkApplication judges an application cluster: lifecycle first, then
// the job state against what the operator deployed.
func flinkApplication(f flinkObject) Verdict {
	switch f.lifecycle {
	case "DELETING", "DELETED":
		// FlinkDeploymentController.cleanup: the operator is tearing it
		// down because the object is being deleted.
		return healthy(PhasePending, "being deleted by the Flink operator")
	case "CREATED":
		// Not deployed yet (isBeforeFirstDeployment). A job submitted
		// suspended is never deployed (AbstractFlinkResourceReconciler
		// .reconcile returns), which is what was asked.
		if f.desired == "suspended" {
			return healthy(PhasePending, "submitted suspended; the operator deploys it when spec.job.state is running")
		}
		if r, ok := flinkUserError(f); ok {
			return r
		}
		return unhealthy(PhasePending, withDetail("not yet deployed by the Flink operator", f.err.text()))
	case "UPGRADING":
		return flinkUpgrading(f, "upgrading")
	case "ROLLING_BACK":
		return flinkUpgrading(f, "rolling back to the last stable spec")
	case "SUSPENDED":
		return flinkSuspended(f)
	case "FAILED":
		return flinkFailedLifecycle(f)
	case "DEPLOYED", "STABLE", "ROLLED_BACK", "":
		return flinkJob(f)
	}
	return unknown(fmt.Sprintf("unknown Flink lifecycle state %q", f.lifecycle))
}

// flinkUpgrading judges a spec change in progress (ReconciliationState
// UPGRADING or ROLLING_BACK). The operator stops the job (savepoint,
// last-state or stateless; AbstractJobReconciler.reconcileSpecChange),
// writes FINISHED and a MISSING JobManager, and deploys the new spec: none
// of that ends the job. The first deployment also passes through
// UPGRADING (updateStatusBeforeFirstDeployment); that one is a job that has
// not started, judged as starting.
func flinkUpgrading(f flinkObject, what string) Verdict {
	if r, ok := flinkUserError(f); ok {
		return r
	}
	if f.err.unrecoverable() {
		// getJobUpgrade threw an UpgradeFailureException: this cluster has
		// lost the state to upgrade from and waits for a person; another
		// cluster restores from the preserved restore point.
		return unhealthy(PhasePending, withDetail(what+" cannot proceed on this cluster", f.err.text()))
	}
	if f.firstDeploy && f.recon == "UPGRADING" {
		return unhealthy(PhasePending, withDetail("being deployed for the first time", f.err.text()))
	}
	phase := PhasePending
	if f.job == "RUNNING" {
		phase = PhaseRunning // a savepoint is still being taken
	}
	return healthy(phase, withDetail(fmt.Sprintf("%s (job %s, job manager %s)", what, orNone(f.job), orNone(f.jm)), f.err.text()))
}

// flinkSuspended judges lifecycle SUSPENDED: the last reconciled spec has
// job.state suspended. The user asked for it (AbstractJobReconciler
// .reconcileSpecChange suspends with cancelJob, which writes FINISHED), or
// the job was cancelled outside the operator, from the Flink UI or REST
// API, which JobStatusObserver.updateJobStatus records the same way
// (markSuspended, 1.10+). Neither is an end: while spec.job.state says
// running, the operator restores the job on its next pass.
func flinkSuspended(f flinkObject) Verdict {
	if f.desired == "suspended" {
		return healthy(PhasePending, "suspended (spec.job.state: suspended)")
	}
	if r, ok := flinkUserError(f); ok {
		return r
	}
	if f.err.unrecoverable() {
		return unhealthy(PhasePending, withDetail("cannot be resumed on this cluster", f.err.text()))
	}
	// Not running, and the operator is bringing it back: Unhealthy, so
	// that the toleration covers the restore and a restore that never
	// happens is moved.
	msg := "suspended by the operator, resuming as spec.job.state is running"
	if f.job == "CANCELED" {
		msg = "cancelled outside the operator (job CANCELED); the operator redeploys it as spec.job.state is running"
	}
	return unhealthy(PhasePending, withDetail(msg, f.err.text()))
}

// flinkFailedLifecycle judges lifecycle FAILED, which
// CommonStatus.getLifecycleState gives for three different things.
func flinkFailedLifecycle(f flinkObject) Verdict {
	if f.reconciled == "" {
		// Before the first deployment with an error: the spec was refused
		// (validation) or could not be submitted.
		if r, ok := flinkUserError(f); ok {
			return r
		}
		if f.err.typ == "ValidationException" {
			return Verdict{Health: v1alpha1.HealthUnknown, Phase: PhasePending, UserError: true,
				Message: withDetail("spec refused by the Flink operator, failover would not help", f.err.text())}
		}
		return unhealthy(PhasePending, withDetail("first deployment failed", f.err.text()))
	}
	if f.job == "FAILED" {
		return flinkJob(f)
	}
	// A MISSING or ERROR JobManager that the operator will not recover
	// (no HA metadata, manual restore required): the job is gone from this
	// cluster, and another one restores it from the preserved state.
	if r, ok := flinkUserError(f); ok {
		return r
	}
	return unhealthy(PhasePending, withDetail(fmt.Sprintf("job manager %s, not recoverable by the operator", orNone(f.jm)), f.err.text()))
}

// flinkJob judges the job of a deployed spec (lifecycle DEPLOYED, STABLE,
// ROLLED_BACK, or FAILED for a failed job) by status.jobStatus.state,
// Flink's JobStatus as the operator last observed it
// (JobStatusObserver.updateJobStatus).
func flinkJob(f flinkObject) Verdict {
	suffix := ""
	switch f.lifecycle {
	case "DEPLOYED":
		suffix = " (not yet stable)"
	case "ROLLED_BACK":
		suffix = " (rolled back to the last stable spec)"
	}
	switch f.job {
	case "RUNNING":
		if f.pending != "" {
			return healthy(PhaseRunning, "job running; "+f.pending)
		}
		return healthy(PhaseRunning, "job running"+suffix)
	case "FINISHED", "FAILED", "CANCELED":
		if f.pending != "" {
			// The operator redeploys a terminal job when its spec changes
			// (AbstractJobReconciler.getJobUpgrade, useStatusSavepoint).
			return healthy(PhasePending, fmt.Sprintf("job %s; %s", f.job, f.pending))
		}
		switch f.job {
		case "FINISHED":
			// ReconciliationUtils.checkAndUpdateStableSpec: a job that
			// finished on its own while deployed to run.
			return healthy(PhaseSucceeded, "job finished")
		case "FAILED":
			// Flink's restart strategy gave up; the same job would fail
			// the same way elsewhere.
			return healthy(PhaseFailed, withDetail("job failed", f.err.text()))
		}
		// CANCELED with the spec still deployed to run: an operator before
		// 1.10, whose JobStatusObserver did not mark a cancelled job
		// suspended, and which never redeploys it.
		return healthy(PhaseFailed, "job canceled")
	case "CANCELLING", "FAILING", "RESTARTING":
		// Flink moves on from these by itself within its restart strategy.
		return healthy(PhaseRunning, "job "+strings.ToLower(f.job))
	case "CREATED", "INITIALIZING", "RECONCILING", "SUSPENDED", "":
		// Not running. RECONCILING is the operator's own placeholder
		// while it deploys (ApplicationReconciler.deploy) and when it has
		// lost the JobManager (AbstractFlinkDeploymentObserver
		// .observeJmDeployment) or its REST API (JobStatusObserver
		// .ifRunningMoveToReconciling). SUSPENDED is Flink's, for a job
		// whose JobManager lost leadership, never the operator's.
		if r, ok := flinkUserError(f); ok {
			return r
		}
		what := "job " + strings.ToLower(f.job)
		if f.job == "" {
			what = "no job yet"
		}
		return unhealthy(PhasePending, withDetail(fmt.Sprintf("%s, job manager %s", what, orNone(f.jm)), f.err.text()))
	}
	return unknown(fmt.Sprintf("unknown Flink job state %q", f.job))
}

// flinkSession judges a session cluster (no spec.job), whose only product
// is a JobManager that serves: its job status is not about any job (the
// operator leaves FINISHED there after deleting the cluster for a spec
// change, updateStatusAfterClusterDeletion, and the SessionObserver never
// writes it again), so it is not read at all, and a session cluster never
// ends.
func flinkSession(f flinkObject) Verdict {
	switch f.lifecycle {
	case "DELETING", "DELETED":
		return healthy(PhasePending, "being deleted by the Flink operator")
	case "UPGRADING", "ROLLING_BACK":
		if !f.firstDeploy && f.jm != "ERROR" && !f.err.unrecoverable() {
			// SessionReconciler.reconcileSpecChange deletes and redeploys
			// the cluster in one pass.
			return healthy(PhasePending, fmt.Sprintf("session cluster %s (job manager %s)", strings.ToLower(strings.ReplaceAll(f.lifecycle, "_", " ")), orNone(f.jm)))
		}
	}
	if f.jm == "READY" {
		// SessionObserver.observeFlinkCluster: the REST API answered.
		return healthy(PhaseRunning, "session cluster ready")
	}
	f.job = "" // not about any job; the error is judged on its own
	if r, ok := flinkUserError(f); ok {
		return r
	}
	msg := fmt.Sprintf("session cluster job manager %s, lifecycle %s", orNone(f.jm), orNone(f.lifecycle))
	return unhealthy(PhasePending, withDetail(msg, f.err.text()))
}

// flinkUserError recognizes a status.error that the FlinkDeployment's own
// spec caused. Such an object is reported Unknown, not Unhealthy, so that
// the failover controller, which moves only Unhealthy objects, leaves it
// where its owner can see and fix it. A RUNNING job with a stale error is
// not one.
func flinkUserError(f flinkObject) (Verdict, bool) {
	if f.job == "RUNNING" || f.err.raw == "" {
		return Verdict{}, false
	}
	reason := f.err.userReason()
	if reason == "" {
		return Verdict{}, false
	}
	return Verdict{
		Health:    v1alpha1.HealthUnknown,
		Phase:     PhasePending,
		Message:   withDetail("user error "+reason+", failover would not help", f.err.text()),
		UserError: true,
	}, true
}

// flinkErr is status.error, in either of its shapes: JSON since 1.3
// (FlinkResourceExceptionUtils.updateFlinkResourceException writes a
// FlinkResourceException: type, message, additionalMetadata.reason for a
// DeploymentFailedException, throwableList), plain text before
// (ReconciliationUtils.updateForReconciliationError(target, String)).
type flinkErr struct {
	raw     string
	typ     string // the exception's class, without its package
	message string
	reason  string // additionalMetadata.reason
	causes  []string
}

func parseFlinkError(raw string) flinkErr {
	e := flinkErr{raw: raw}
	if !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return e
	}
	var j struct {
		Type               string         `json:"type"`
		Message            string         `json:"message"`
		AdditionalMetadata map[string]any `json:"additionalMetadata"`
		ThrowableList      []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"throwableList"`
	}
	if json.Unmarshal([]byte(raw), &j) != nil {
		return e
	}
	e.typ, e.message = shortType(j.Type), j.Message
	if r, ok := j.AdditionalMetadata["reason"].(string); ok {
		e.reason = r
	}
	for _, t := range j.ThrowableList {
		e.causes = append(e.causes, t.Message)
	}
	return e
}

func shortType(t string) string {
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// text is the error for people: the exception's short type and message,
// not the JSON nor the stack trace.
func (e flinkErr) text() string {
	if e.typ == "" && e.message == "" {
		return e.raw
	}
	return withDetail(e.typ, e.message)
}

// userReason is the container state of a user error, or "".
func (e flinkErr) userReason() string {
	if e.typ != "" || e.message != "" {
		// JSON: the reason the operator recorded is the truth; a message
		// mentioning a reason in passing (another exception's text) is not.
		for _, r := range userErrorReasons {
			if e.reason == r {
				return r
			}
		}
		if e.typ == "DeploymentFailedException" {
			for _, r := range userErrorReasons {
				if strings.Contains(e.message, r) {
					return r
				}
			}
		}
		return ""
	}
	for _, r := range userErrorReasons {
		if strings.Contains(e.raw, r) {
			return r
		}
	}
	for msg, r := range plainUserErrors {
		if strings.Contains(e.raw, msg) {
			return r
		}
	}
	return ""
}

// unrecoverable reports an error after which the operator waits for a
// person (see unrecoverableErrors).
func (e flinkErr) unrecoverable() bool {
	if e.raw == "" {
		return false
	}
	for _, m := range unrecoverableErrors {
		if strings.Contains(e.raw, m) {
			return true
		}
	}
	return false
}
