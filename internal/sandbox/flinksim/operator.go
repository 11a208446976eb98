package flinksim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// One pass of the operator over one FlinkDeployment, as
// FlinkDeploymentController.reconcile runs it: observe the Flink cluster
// into the status (AbstractFlinkDeploymentObserver.observeInternal), then
// reconcile the spec against the last reconciled spec
// (AbstractFlinkResourceReconciler.reconcile), then compute the lifecycle
// (CommonStatus.getLifecycleState). The Flink cluster itself (its
// JobManager Deployment and the job it runs) is the simulator's stand-in
// for Flink: flinkCluster.

// Strings the operator writes (CommonStatus, AbstractFlinkDeploymentObserver
// .onMissingDeployment, ApplicationReconciler.getJobUpgrade).
const (
	msgMissingJM         = "Missing JobManager deployment"
	msgManualRestore     = "Manual restore required."
	msgHANotAvailable    = "HA metadata is not available"
	msgFinishedOrDeleted = "It is possible that the job has finished or terminally failed, or the configmaps have been deleted."
	lastStateDummyPath   = "KUBERNETES_OPERATOR_LAST_STATE" // AbstractJobReconciler.LAST_STATE_DUMMY_SP_PATH
	defaultSavepointDir  = "s3://flink/savepoints"
	defaultCheckpointDir = "s3://flink/checkpoints"
)

// flinkCluster is what Kubernetes and Flink would hold for one
// FlinkDeployment: the JobManager Deployment and the job it runs.
type flinkCluster struct {
	exists       bool      // the JobManager Deployment exists
	readyAt      time.Time // its pod serves the REST API from then
	jobID        string
	jobState     string // Flink's JobStatus, as its REST API reports it
	started      time.Time
	restoredFrom string // the savepoint or checkpoint the job started from
	// The job's checkpointing, fixed when it is submitted: every
	// chkEvery (execution.checkpointing.interval; 0 for none) under
	// chkDir (state.checkpoints.dir). Flink completes them on its own
	// (checkpoints.go).
	chkEvery time.Duration
	chkDir   string
	// chkRetained is state.checkpoints.num-retained: how many of the
	// newest completed checkpoints Flink keeps (default 1).
	chkRetained int
	// ha: the job runs with Kubernetes HA, so its checkpoints complete
	// only while the kube-apiserver stores their pointers.
	ha bool
}

// Deploy is one submission of a job (ApplicationReconciler.deploy), for
// tests that follow where a job's state came from.
type Deploy struct {
	JobID string
	// RestoredFrom is the savepoint or checkpoint path the job started
	// from: spec.job.initialSavepointPath at the first deployment, the
	// upgrade savepoint on a savepoint upgrade or resume, the job's latest
	// checkpoint on a last-state restore; "" for a fresh start.
	RestoredFrom string
}

// memory is what the simulator keeps per FlinkDeployment besides its
// status: the stand-in for Flink, and events a test injected.
type memory struct {
	uid       string
	cluster   flinkCluster
	deploys   []Deploy
	lastNonce *int64
	// written is the object as the apiserver answered the simulator's
	// last status write: Running reads it while the cache is older.
	written *unstructured.Unstructured
}

// events are a test's one-shot injections into one FlinkDeployment. They
// are kept apart from memory, which a pass copies and writes back whole,
// so that one injected during a pass waits for the next instead of being
// overwritten; one is taken only by a pass whose status is written.
type events struct {
	cancelUI bool // a cancel from the Flink UI
	loseJM   bool // the JobManager Deployment is deleted from outside
}

// effects are what a pass asks of the Kubernetes API besides the status.
type effects struct {
	snapshots []snapshotRecord // FlinkStateSnapshots to create (1.10+)
	requeue   time.Duration    // >0: pass again after this
	again     bool             // pass again at once (a second reconcile step)
	files     []string         // completed savepoints, for Config.Checkpoints
	taken     events           // the injected events this pass acted on
}

// snapshotRecord is a completed savepoint or checkpoint for a
// FlinkStateSnapshot.
type snapshotRecord struct {
	checkpoint  bool
	path        string
	triggerType string
	at          time.Time
}

// pass is one operator pass.
type pass struct {
	opts    Config
	name    string
	gen     int64
	spec    spec
	st      *deploymentStatus
	mem     *memory
	ev      events         // injected events not yet taken; the pass clears what it takes
	chk     jobCheckpoints // what Flink has completed of the current job's checkpoints
	fault   Fault
	now     time.Time
	eff     effects
	deploys []Deploy
}

// run is the observe step (reconcile false) or the reconcile step of a
// pass: FlinkDeploymentController.reconcile writes the status after each
// (statusRecorder.patchAndCacheStatus), so what the observer saw is
// stored even when the reconciler acts on it at once.
func (p *pass) run(reconcile bool) {
	if reconcile {
		p.reconcile()
	} else {
		p.observe()
	}
	// ReconciliationUtils.rescheduleAfter: a READY, MISSING or ERROR
	// deployment is looked at again after the reconcile interval; one
	// being deployed is followed closer (by the simulator when its
	// JobManager is due, as the operator's watch of the Deployment does).
	switch p.st.JobManagerDeploymentStatus {
	case "READY", "MISSING", "ERROR":
		p.eff.requeue = minPositive(p.eff.requeue, p.opts.ReconcileInterval)
	}
	if p.opts.LegacyStatus {
		p.st.LifecycleState = ""
		p.st.ObservedGeneration = 0
	} else {
		p.st.LifecycleState = lifecycle(p.st, p.spec.application)
	}
}

// observe is AbstractFlinkDeploymentObserver.observeInternal with
// ApplicationObserver / SessionObserver.observeFlinkCluster.
func (p *pass) observe() {
	st, c := p.st, &p.mem.cluster
	last := st.ReconciliationStatus.lastSpec()
	if last == nil {
		return
	}
	if p.ev.loseJM {
		// The JobManager Deployment is deleted from outside.
		p.ev.loseJM = false
		c.exists = false
		if c.jobState != "" && !globallyTerminal(c.jobState) {
			c.jobState = ""
		}
	}
	suspendedJob := p.spec.application && p.spec.state == "suspended" && jobState(last.Spec) == "suspended"
	if suspendedJob && st.JobManagerDeploymentStatus == "MISSING" {
		return // isSuspendedJob: nothing to observe
	}
	if st.JobManagerDeploymentStatus != "READY" || p.fault != 0 || !c.exists {
		p.observeJM()
	}
	if st.JobManagerDeploymentStatus != "READY" {
		p.clearErrors()
		return
	}
	if !p.spec.application {
		// SessionObserver.observeFlinkCluster: the REST API answers.
		if st.ReconciliationStatus.State == "DEPLOYED" {
			st.ReconciliationStatus.markStable()
		}
		p.clearErrors()
		return
	}
	p.observeJob(last)
	p.clearErrors()
}

// observeJM is AbstractFlinkDeploymentObserver.observeJmDeployment.
func (p *pass) observeJM() {
	st, c := p.st, &p.mem.cluster
	prev := st.JobManagerDeploymentStatus
	switch {
	case p.fault == ImagePullBackOff && c.exists:
		// checkContainerErrors throws a DeploymentFailedException, which
		// FlinkDeploymentController.reconcile records.
		st.JobManagerDeploymentStatus = "ERROR"
		st.JobStatus.State = "RECONCILING"
		st.Error = p.errorText("org.apache.flink.kubernetes.operator.exception.DeploymentFailedException",
			`[flink-main-container] Back-off pulling image "flink:missing"`, "ImagePullBackOff")
		return
	case !c.exists:
		st.JobManagerDeploymentStatus = "MISSING"
		if !globallyTerminal(st.JobStatus.State) {
			st.JobStatus.State = "RECONCILING"
		}
		if prev != "MISSING" && prev != "ERROR" {
			st.Error = p.errorText("org.apache.flink.kubernetes.operator.exception.MissingJobManagerException", msgMissingJM, "")
		}
		return
	case p.fault == Reconciling || p.now.Before(c.readyAt):
		// The Deployment exists but has no available JobManager: being
		// deployed, or its pod lost. The job's REST API does not answer
		// (JobStatusObserver.ifRunningMoveToReconciling).
		st.JobManagerDeploymentStatus = "DEPLOYING"
		if p.spec.application && (st.JobStatus.State == "RUNNING" || st.JobStatus.State == "") {
			st.JobStatus.State = "RECONCILING"
		}
		if p.fault == 0 || p.fault == SavepointFails { // a fault of the job, not of its JobManager
			p.eff.requeue = c.readyAt.Sub(p.now)
		}
		return
	case prev == "DEPLOYING" || prev == "MISSING" || prev == "ERROR" || prev == "":
		// "JobManager deployment port is ready, waiting for the Flink REST API..."
		st.JobManagerDeploymentStatus = "DEPLOYED_NOT_READY"
		p.eff.again = true
		return
	}
	st.JobManagerDeploymentStatus = "READY" // from DEPLOYED_NOT_READY
}

// observeJob is JobStatusObserver.observe for an application cluster
// whose JobManager is READY, with the savepoint and checkpoint observers.
func (p *pass) observeJob(last *specWithMeta) {
	st, c := p.st, &p.mem.cluster
	if jobState(last.Spec) == "suspended" {
		return
	}
	if p.ev.cancelUI && c.jobState == "RUNNING" {
		c.jobState = "CANCELED" // someone pressed Cancel in the Flink UI
	}
	p.ev.cancelUI = false
	legacyCancel := p.opts.LegacyStatus // before 1.10: no markSuspended
	if p.fault == FailedJob && c.jobState == "RUNNING" {
		c.jobState = "FAILED"
	}
	if p.fault == 0 && c.jobState == "FAILED" && c.exists {
		c.jobState = "RUNNING" // the fault was lifted: Flink restarts the job
		c.started = p.now
	}
	prev := st.JobStatus.State
	st.JobStatus.JobID = c.jobID
	st.JobStatus.JobName = p.name
	st.JobStatus.State = c.jobState
	st.JobStatus.StartTime = strconv.FormatInt(c.started.UnixMilli(), 10)
	if prev != c.jobState {
		st.JobStatus.UpdateTime = strconv.FormatInt(p.now.UnixMilli(), 10)
		if c.jobState == "CANCELED" && !legacyCancel {
			// JobStatusObserver.updateJobStatus → markSuspended (1.10+).
			last.Spec = setJobState(last.Spec, "suspended")
			last.Meta.FirstDeployment = false
			st.ReconciliationStatus.setLastSpec(last)
		}
		if c.jobState == "FAILED" {
			st.Error = p.errorText("org.apache.flink.runtime.JobException", "Recovery is suppressed by NoRestartBackoffTimeStrategy", "")
		}
	}
	// ReconciliationUtils.checkAndUpdateStableSpec.
	if st.ReconciliationStatus.State == "DEPLOYED" && (c.jobState == "RUNNING" ||
		(c.jobState == "FINISHED" && jobState(last.Spec) == "running")) {
		st.ReconciliationStatus.markStable()
	}
	if c.jobState == "RUNNING" {
		p.checkpoint()
	}
}

// checkpoint reports the newest checkpoint Flink has completed of the
// running job in status.jobStatus.checkpointInfo, as SnapshotObserver
// does at the operator's passes; Flink takes them at its own pace
// (checkpoints.go), so one completed between passes shows at the next.
func (p *pass) checkpoint() {
	if p.chk.n == 0 {
		return
	}
	if p.st.JobStatus.CheckpointInfo == nil {
		p.st.JobStatus.CheckpointInfo = &checkpointInfo{}
	}
	at := p.chk.last.UnixMilli()
	p.st.JobStatus.CheckpointInfo.LastCheckpoint = &checkpoint{TimeStamp: at, TriggerType: "PERIODIC", FormatType: "FULL"}
	p.st.JobStatus.CheckpointInfo.LastPeriodicCheckpointTimestamp = at
}

// clearErrors is clearErrorsIfDeploymentIsHealthy.
func (p *pass) clearErrors() {
	st := p.st
	if st.JobManagerDeploymentStatus != "ERROR" && st.JobStatus.State != "FAILED" && st.ReconciliationStatus.stable() {
		st.Error = ""
	}
}

// reconcile is AbstractFlinkResourceReconciler.reconcile.
func (p *pass) reconcile() {
	st := p.st
	last := st.ReconciliationStatus.lastSpec()
	if last == nil {
		p.firstDeploy()
		return
	}
	if st.ReconciliationStatus.State == "UPGRADING" && !p.spec.application {
		p.deploySession()
		return
	}
	desired := p.spec.state
	changed := upgradeDiff(p.spec.raw, last.Spec) || st.ReconciliationStatus.State == "UPGRADING" ||
		(p.spec.application && desired != jobState(last.Spec))
	if changed {
		if !p.spec.application {
			// SessionReconciler.reconcileSpecChange: delete, record the
			// target spec as upgrading, deploy, record it deployed.
			p.deleteCluster()
			p.beforeDeploy(false)
			p.eff.again = true
			return
		}
		p.reconcileJobChange(last)
		return
	}
	p.reconcileOther(last)
}

// firstDeploy is the isBeforeFirstDeployment branch of reconcile.
func (p *pass) firstDeploy() {
	if p.spec.application && p.spec.state == "suspended" {
		return // submitted suspended: nothing to deploy
	}
	// updateStatusBeforeFirstDeployment: the initial savepoint becomes the
	// upgrade savepoint, restored at this deployment only.
	if p.spec.application {
		if p.spec.initialSP != "" {
			p.st.JobStatus.UpgradeSavepointPath = p.spec.initialSP
			p.spec.upgradeMode = "savepoint"
		} else {
			p.spec.upgradeMode = "stateless"
		}
	}
	p.beforeDeploy(true)
	if !p.spec.application {
		p.deploySession()
		return
	}
	p.deployJob(p.spec.initialSP, false)
	p.afterDeploy("running")
}

// reconcileJobChange is AbstractJobReconciler.reconcileSpecChange.
func (p *pass) reconcileJobChange(last *specWithMeta) {
	st, c := p.st, &p.mem.cluster
	current, desired := jobState(last.Spec), p.spec.state
	lastMode, _ := jobField(last.Spec, "upgradeMode")
	if current == "running" {
		mode := p.spec.upgradeMode
		terminal := globallyTerminal(c.jobState) || !c.exists
		restoreMode := mode
		switch {
		case terminal && mode != "stateless":
			// useStatusSavepoint: restore from the last savepoint known.
			if st.JobStatus.UpgradeSavepointPath == "" && lastSavepoint(st) == "" {
				st.Error = p.errorText("org.apache.flink.kubernetes.operator.exception.UpgradeFailureException",
					"Job is in terminal state but last checkpoint is unknown, possibly due to an unrecoverable restore error. "+msgManualRestore, "")
				return
			}
			restoreMode = "savepoint"
		case !c.exists && mode != "stateless":
			if !p.spec.ha() {
				st.Error = p.errorText("org.apache.flink.kubernetes.operator.exception.UpgradeFailureException",
					"JobManager deployment is missing and "+msgHANotAvailable+" to make stateful upgrades. "+msgFinishedOrDeleted+msgManualRestore, "")
				return
			}
			restoreMode = "last-state"
		case mode == "savepoint" && c.jobState == "RUNNING" && p.fault == SavepointFails:
			// savepointJobOrError throws; nothing is deleted and the job
			// runs on (ReconciliationUtils keeps the last reconciled spec).
			st.Error = p.errorText("org.apache.flink.kubernetes.operator.exception.UpgradeFailureException",
				"Savepoint Error", "SavepointError")
			p.eff.requeue = minPositive(p.eff.requeue, p.opts.ReconcileInterval)
			return
		case mode == "savepoint" && c.jobState == "RUNNING":
			// SuspendMode.SAVEPOINT: stop with savepoint
			// (AbstractFlinkService.savepointJobOrError).
			loc := p.takeSavepoint("UPGRADE", nil)
			st.JobStatus.UpgradeSavepointPath = loc
		case mode == "savepoint" || mode == "last-state":
			if !p.spec.ha() && mode == "last-state" {
				restoreMode = "savepoint"
				loc := p.takeSavepoint("UPGRADE", nil) // lastStateUsingCancel restores from a savepoint
				st.JobStatus.UpgradeSavepointPath = loc
			}
			if mode == "savepoint" && c.jobState != "RUNNING" {
				return // JobUpgrade.pendingUpgrade: waiting for an upgradable state
			}
		}
		// The cluster goes (cancelJob, deleteClusterDeployment) and the job
		// reads FINISHED (AbstractFlinkService.cancelJob).
		p.deleteCluster()
		st.JobStatus.State = "FINISHED"
		spec := p.spec
		spec.upgradeMode = restoreMode
		if desired == "running" {
			// updateStatusBeforeDeploymentAttempt: UPGRADING, the target
			// spec recorded suspended; the next pass deploys it.
			p.spec = spec
			p.beforeDeploy(false)
			p.eff.again = true
			return
		}
		p.spec = spec
		p.afterDeploy("suspended")
		return
	}
	if current == "suspended" && desired == "running" {
		// We inherit the upgrade mode unless stateless upgrade requested.
		if p.spec.upgradeMode != "stateless" {
			p.spec.upgradeMode = lastMode
		}
		p.beforeDeploy(false)
		var from string
		if p.spec.upgradeMode == "savepoint" {
			from = st.JobStatus.UpgradeSavepointPath
			if from == "" {
				from = lastSavepoint(st)
			}
		}
		p.deployJob(from, lastMode == "last-state")
		p.afterDeploy("running")
		return
	}
	// suspended → suspended with another change: record it.
	p.afterDeploy(desired)
}

// reconcileOther is AbstractJobReconciler.reconcileOtherChanges with
// ApplicationReconciler's JobManager recovery
// (shouldRecoverDeployment, jmMissingForRunningDeployment).
func (p *pass) reconcileOther(last *specWithMeta) {
	st, c := p.st, &p.mem.cluster
	if p.spec.application {
		if c.jobState == "RUNNING" && st.JobManagerDeploymentStatus == "READY" {
			p.snapshotTriggers()
		}
		jmShouldRun := jobState(last.Spec) == "running" && !globallyTerminal(st.JobStatus.State)
		if jmShouldRun && st.JobManagerDeploymentStatus == "MISSING" && (p.spec.ha() || p.spec.upgradeMode == "stateless") {
			// resubmitJob with requireHaMetadata: the same job id, from
			// its latest checkpoint (HA).
			p.deployJob("", p.spec.ha())
			return
		}
		return
	}
	if st.JobManagerDeploymentStatus == "MISSING" {
		p.deploySession() // SessionReconciler.recoverSession
	}
}

// snapshotTriggers takes a periodic savepoint
// (kubernetes.operator.periodic.savepoint.interval) or a manual one
// (a new spec.job.savepointTriggerNonce): SnapshotUtils.shouldTriggerSnapshot.
func (p *pass) snapshotTriggers() {
	if n := p.spec.spNonce; n != nil && (p.mem.lastNonce == nil || *p.mem.lastNonce != *n) {
		p.mem.lastNonce = n
		p.takeSavepoint("MANUAL", n)
		return
	}
	interval, err := time.ParseDuration(p.spec.conf["kubernetes.operator.periodic.savepoint.interval"])
	if err != nil || interval <= 0 {
		return
	}
	lastTs := int64(0)
	if si := p.st.JobStatus.SavepointInfo; si != nil {
		lastTs = si.LastPeriodicSavepointTimestamp
	}
	from := time.UnixMilli(lastTs)
	if from.Before(p.mem.cluster.started) {
		from = p.mem.cluster.started
	}
	if p.now.Before(from.Add(interval)) {
		return // a later pass takes it: the operator does not wake for it
	}
	p.takeSavepoint("PERIODIC", nil)
}

// takeSavepoint completes a savepoint of the running job and records it
// where the operator version records it: a FlinkStateSnapshot (1.10+ with
// the CRD installed; setUpgradeSavepointPath, FlinkStateSnapshotUtils
// .createSavepointResource) or status.jobStatus.savepointInfo
// (SavepointInfo.updateLastSavepoint).
func (p *pass) takeSavepoint(trigger string, nonce *int64) string {
	c := &p.mem.cluster
	dir := p.spec.conf["state.savepoints.dir"]
	if dir == "" {
		dir = defaultSavepointDir
	}
	// Flink names a savepoint savepoint-<first 6 of the job id>-<12 hex>.
	loc := fmt.Sprintf("%s/savepoint-%s-%s", strings.TrimSuffix(dir, "/"), c.jobID[:6], randomHex(6))
	p.eff.files = append(p.eff.files, loc)
	if p.opts.StateSnapshots {
		p.eff.snapshots = append(p.eff.snapshots, snapshotRecord{path: loc, triggerType: trigger, at: p.now})
		if trigger == "PERIODIC" {
			p.ensureSavepointInfo().LastPeriodicSavepointTimestamp = p.now.UnixMilli()
		}
		return loc
	}
	sp := savepoint{TimeStamp: p.now.UnixMilli(), Location: loc, TriggerType: trigger, FormatType: "CANONICAL", TriggerNonce: nonce}
	si := p.ensureSavepointInfo()
	si.LastSavepoint = &sp
	si.SavepointHistory = append(si.SavepointHistory, sp)
	if trigger == "PERIODIC" {
		si.LastPeriodicSavepointTimestamp = sp.TimeStamp
	}
	return loc
}

func (p *pass) ensureSavepointInfo() *savepointInfo {
	if p.st.JobStatus.SavepointInfo == nil {
		p.st.JobStatus.SavepointInfo = &savepointInfo{}
	}
	return p.st.JobStatus.SavepointInfo
}

// beforeDeploy is updateStatusBeforeDeploymentAttempt: the target spec is
// recorded as UPGRADING with the job suspended, before anything is
// deployed, so a failed attempt is retried from it.
func (p *pass) beforeDeploy(first bool) {
	rs := &p.st.ReconciliationStatus
	if last := rs.lastSpec(); last != nil && !first {
		first = rs.State == "DEPLOYED" && last.Meta.FirstDeployment
	}
	p.st.Error = ""
	rs.ReconciliationTimestamp = p.now.UnixMilli()
	rs.State = "UPGRADING"
	state := "suspended"
	if !p.spec.application {
		state = ""
	}
	rs.setLastSpec(&specWithMeta{Spec: p.recorded(state), Meta: reconMeta{APIVersion: "flink.apache.org/v1beta1", FirstDeployment: first}})
	p.st.ObservedGeneration = p.gen
}

// afterDeploy is updateStatusForDeployedSpec.
func (p *pass) afterDeploy(state string) {
	rs := &p.st.ReconciliationStatus
	first := false
	if last := rs.lastSpec(); last != nil {
		first = last.Meta.FirstDeployment
	}
	p.st.Error = ""
	rs.ReconciliationTimestamp = p.now.UnixMilli()
	rs.State = "DEPLOYED"
	rs.setLastSpec(&specWithMeta{Spec: p.recorded(state), Meta: reconMeta{APIVersion: "flink.apache.org/v1beta1", FirstDeployment: first}})
	if state == "suspended" {
		rs.markStable() // a job suspended by the user is marked stable
	}
	p.st.ObservedGeneration = p.gen
}

func (p *pass) recorded(state string) map[string]any {
	if !p.spec.application {
		return deepCopy(p.spec.raw)
	}
	return p.spec.withJobState(state)
}

// deployJob is ApplicationReconciler.deploy: a new job id unless the
// deployment restores the last state (setJobIdIfNecessary; a fixed id in
// $internal.pipeline.job-id wins), and the restore path it starts from.
func (p *pass) deployJob(savepointPath string, lastState bool) {
	c := &p.mem.cluster
	id := p.spec.conf["$internal.pipeline.job-id"]
	if id == "" {
		id = c.jobID
		if id == "" || !lastState {
			id = randomHex(16)
		}
	}
	from := savepointPath
	if from == "" && lastState && p.chk.n > 0 && c.jobID == id {
		// The same job goes on from its latest checkpoint, and Flink
		// numbers the next ones after it.
		from = fmt.Sprintf("%s/%s/chk-%d", c.chkDir, id, p.chk.n)
		p.st.JobStatus.UpgradeSavepointPath = lastStateDummyPath
	}
	every, err := time.ParseDuration(p.spec.conf["execution.checkpointing.interval"])
	if err != nil {
		every = 0
	}
	*c = flinkCluster{exists: true, readyAt: p.now.Add(p.opts.StartDelay), jobID: id, jobState: "RUNNING",
		started: p.now.Add(p.opts.StartDelay), restoredFrom: from, chkEvery: every, chkDir: p.checkpointDir(), chkRetained: p.retainedCheckpoints(), ha: p.spec.ha()}
	p.deploys = append(p.deploys, Deploy{JobID: id, RestoredFrom: from})
	p.st.JobStatus.JobID = id
	p.st.JobStatus.State = "RECONCILING"
	p.st.JobManagerDeploymentStatus = "DEPLOYING"
	p.eff.requeue = minPositive(p.eff.requeue, p.opts.StartDelay)
}

// deploySession is SessionReconciler.deploy after the status was
// recorded: the session cluster is submitted and recorded deployed.
func (p *pass) deploySession() {
	c := &p.mem.cluster
	*c = flinkCluster{exists: true, readyAt: p.now.Add(p.opts.StartDelay)}
	p.st.JobManagerDeploymentStatus = "DEPLOYING"
	if p.st.ReconciliationStatus.State == "UPGRADING" {
		p.afterDeploy("")
	}
	p.eff.requeue = minPositive(p.eff.requeue, p.opts.StartDelay)
}

// deleteCluster is AbstractFlinkService.deleteClusterDeployment and
// updateStatusAfterClusterDeletion.
func (p *pass) deleteCluster() {
	c := &p.mem.cluster
	c.exists = false
	p.st.JobManagerDeploymentStatus = "MISSING"
	if !globallyTerminal(p.st.JobStatus.State) {
		p.st.JobStatus.State = "FINISHED"
	}
	if c.jobState != "" && !globallyTerminal(c.jobState) {
		c.jobState = "FINISHED"
	}
}

// retainedCheckpoints is state.checkpoints.num-retained (Flink's
// CheckpointingOptions.MAX_RETAINED_CHECKPOINTS, default 1).
func (p *pass) retainedCheckpoints() int {
	if n, err := strconv.Atoi(p.spec.conf["state.checkpoints.num-retained"]); err == nil && n > 0 {
		return n
	}
	return 1
}

func (p *pass) checkpointDir() string {
	if d := p.spec.conf["state.checkpoints.dir"]; d != "" {
		return strings.TrimSuffix(d, "/")
	}
	return defaultCheckpointDir
}

// errorText is status.error as the operator writes it: JSON since 1.3
// (FlinkResourceExceptionUtils.updateFlinkResourceException), the
// exception as text before.
func (p *pass) errorText(typ, msg, reason string) string {
	if p.opts.LegacyStatus {
		if reason != "" {
			return msg // handleDeploymentFailed wrote the message alone
		}
		return typ + ": " + msg
	}
	e := map[string]any{"type": typ, "message": msg, "additionalMetadata": map[string]any{}, "throwableList": []any{}}
	if reason != "" {
		e["additionalMetadata"] = map[string]any{"reason": reason}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Jackson does not escape HTML
	_ = enc.Encode(e)
	return strings.TrimSpace(b.String())
}

// lifecycle is CommonStatus.getLifecycleState.
func lifecycle(st *deploymentStatus, application bool) string {
	rs := &st.ReconciliationStatus
	last := rs.lastSpec()
	if last == nil {
		if st.Error == "" {
			return "CREATED"
		}
		return "FAILED"
	}
	switch rs.State {
	case "UPGRADING", "ROLLING_BACK":
		return rs.State
	}
	if application && jobState(last.Spec) == "suspended" {
		return "SUSPENDED"
	}
	if st.JobStatus.State == "FAILED" {
		return "FAILED"
	}
	jm := st.JobManagerDeploymentStatus
	if (jm == "MISSING" || jm == "ERROR") && (strings.Contains(st.Error, msgManualRestore) ||
		strings.Contains(st.Error, msgFinishedOrDeleted) || strings.Contains(st.Error, msgHANotAvailable)) {
		return "FAILED"
	}
	if rs.State == "ROLLED_BACK" {
		return "ROLLED_BACK"
	}
	if rs.stable() {
		return "STABLE"
	}
	return "DEPLOYED"
}

// globallyTerminal is Flink's JobStatus.isGloballyTerminalState.
func globallyTerminal(state string) bool {
	return state == "FINISHED" || state == "FAILED" || state == "CANCELED"
}

func lastSavepoint(st *deploymentStatus) string {
	if si := st.JobStatus.SavepointInfo; si != nil && si.LastSavepoint != nil {
		return si.LastSavepoint.Location
	}
	return ""
}

func jobState(spec map[string]any) string {
	s, _ := jobField(spec, "state")
	if s == "" {
		return "running"
	}
	return s
}

func jobField(spec map[string]any, key string) (string, bool) {
	job, ok := spec["job"].(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := job[key].(string)
	return s, ok
}

func setJobState(spec map[string]any, state string) map[string]any {
	out := deepCopy(spec)
	if job, ok := out["job"].(map[string]any); ok {
		job["state"] = state
	}
	return out
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		return a
	}
	if a <= 0 || b < a {
		return b
	}
	return a
}

// randomHex is n random bytes in hex; a Flink job id is 16.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
