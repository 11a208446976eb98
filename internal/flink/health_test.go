package flink

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
)

// decode turns a YAML object into the map JudgeDeployment takes, with
// numbers as the ingester's decoder gives them.
func decode(t testing.TB, doc string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("test object: %v", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		t.Fatalf("test object: %v", err)
	}
	return obj
}

// judgement is what a table row expects; msg is a substring, because the
// exact wording is for people and may improve.
type judgement struct {
	health v1alpha1.Health
	phase  string
	msg    string
}

type judgeCase struct {
	name string
	obj  string
	want judgement
}

func runCases(t *testing.T, cases []judgeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeDeployment(decode(t, tc.obj))
			if got.Health != tc.want.health || got.Phase != tc.want.phase || !strings.Contains(got.Message, tc.want.msg) {
				t.Errorf("got %s %s %q, want %s %s containing %q", got.Health, got.Phase, got.Message, tc.want.health, tc.want.phase, tc.want.msg)
			}
		})
	}
}

const (
	H = v1alpha1.HealthHealthy
	U = v1alpha1.HealthUnhealthy
	X = v1alpha1.HealthUnknown
)

// Status errors as the Flink operator writes them: JSON from
// FlinkResourceExceptionUtils.updateFlinkResourceException (1.3+) for a
// DeploymentFailedException, with the container state in
// additionalMetadata.reason, and a reconcile failure a user did not cause;
// plain text as operators before 1.3 wrote it.
const (
	errImagePull = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException","message":"[flink-main-container] Back-off pulling image \"flink:1.99\"","additionalMetadata":{"reason":"ErrImagePull"},"throwableList":[]}`
	errCrashLoop = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException","message":"[flink-main-container] CrashLoop - Error: Could not find main class","additionalMetadata":{"reason":"CrashLoopBackOff"}}`
	errBackOff   = `ImagePullBackOff: Back-off pulling image "registry.invalid/flink"`
	errCluster   = `{"type":"org.apache.flink.kubernetes.operator.exception.ReconciliationException","message":"java.net.ConnectException: Connection refused: flink-rest:8081"}`
	// ApplicationReconciler.getJobUpgrade's UpgradeFailureException when
	// the JobManager is gone without HA metadata.
	errNoHA = `{"type":"org.apache.flink.kubernetes.operator.exception.UpgradeFailureException","message":"JobManager deployment is missing and HA metadata is not available to make stateful upgrades. It is possible that the job has finished or terminally failed, or the configmaps have been deleted.Manual restore required.","additionalMetadata":{},"throwableList":[]}`
	// The kubelet's waiting message, which 1.2's handleDeploymentFailed
	// wrote as status.error for a CrashLoopBackOff.
	errPlainCrashLoop = `back-off 40s restarting failed container=flink-main-container pod=wordcount-5d8c7b9f4-x2x7q_team-a(0b1f)`
	errValidation     = `{"type":"org.apache.flink.kubernetes.operator.exception.ValidationException","message":"Job parallelism must be larger than 0","additionalMetadata":{},"throwableList":[]}`
)

func flinkDeployment(status string) string {
	return "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}\nstatus:\n" + status
}

// lastSpec is status.reconciliationStatus.lastReconciledSpec as
// SpecUtils.writeSpecWithMeta writes it: the spec and resource_metadata,
// as one JSON string. jobState "" is a session cluster's spec (no job).
func lastSpec(jobState string, first bool) string {
	spec := map[string]any{"image": "flink:1.20", "flinkVersion": "v1_20"}
	if jobState != "" {
		spec["job"] = map[string]any{"jarURI": "local:///opt/flink/job.jar", "parallelism": 2, "upgradeMode": "savepoint", "state": jobState}
	}
	b, _ := json.Marshal(map[string]any{"spec": spec,
		"resource_metadata": map[string]any{"apiVersion": "flink.apache.org/v1beta1", "firstDeployment": first}})
	return string(b)
}

// fd is a whole FlinkDeployment: specJob is spec.job.state ("" for a
// session cluster), status the indented status fields, recon the
// reconciliation status (state, last reconciled job state, whether it is
// stable, first deployment).
type recon struct {
	state  string // ReconciliationState
	job    string // job.state of the last reconciled spec; "-" none yet; "" session
	stable bool
	first  bool
}

func fd(specJob string, r recon, status string) string {
	spec := "spec: {image: flink:1.20, flinkVersion: v1_20}\n"
	if specJob != "" {
		spec = fmt.Sprintf("spec:\n  image: flink:1.20\n  flinkVersion: v1_20\n  job: {jarURI: local:///opt/flink/job.jar, upgradeMode: savepoint, state: %s}\n", specJob)
	}
	rs := ""
	if r.job != "-" {
		last := lastSpec(r.job, r.first)
		rs = fmt.Sprintf("  reconciliationStatus:\n    state: %s\n    lastReconciledSpec: %q\n", r.state, last)
		if r.stable {
			rs += fmt.Sprintf("    lastStableSpec: %q\n", last)
		}
	}
	return "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount, generation: 2}\n" +
		spec + "status:\n  observedGeneration: 2\n" + rs + status
}

// TestFlinkOperatorStates follows the operator's own state machine, case
// by case; each names the operator code that writes that status, and the
// first nine are the FlinkDeployments purser used to judge wrongly.
func TestFlinkOperatorStates(t *testing.T) {
	running := recon{state: "DEPLOYED", job: "running", stable: true}
	runCases(t, []judgeCase{
		// 1. AbstractJobReconciler.reconcileSpecChange suspends with
		// cancelJob (AbstractFlinkService.cancelJob writes FINISHED) and
		// updateStatusForDeployedSpec records job.state suspended, marked
		// stable; ApplicationReconcilerTest.testUpgrade checks the same.
		{"suspended by the user is not Succeeded", fd("suspended", recon{state: "DEPLOYED", job: "suspended", stable: true}, `
  lifecycleState: SUSPENDED
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{H, PhasePending, "suspended (spec.job.state: suspended)"}},
		// 2. Between the passes of a savepoint upgrade: cancelJob wrote
		// FINISHED and deleted the cluster (MISSING), the state is
		// UPGRADING until the new spec is deployed.
		{"savepoint upgrade between passes is not Succeeded", fd("running", recon{state: "UPGRADING", job: "suspended"}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED, jobId: 0f3c, upgradeSavepointPath: "s3://sp/savepoint-0f3c-1"}`), judgement{H, PhasePending, "upgrading (job FINISHED, job manager MISSING)"}},
		// 3. A last-state upgrade cancelling asynchronously
		// (SuspendMode.CANCEL, JobUpgrade.lastStateUsingCancel): UPGRADING
		// while Flink reports CANCELED.
		{"cancel of a last-state upgrade is not Failed", fd("running", recon{state: "UPGRADING", job: "running"}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: READY
  jobStatus: {state: CANCELED, jobId: 0f3c}`), judgement{H, PhasePending, "upgrading (job CANCELED"}},
		// 4. Cancelled from the Flink UI: JobStatusObserver.updateJobStatus
		// marks the reconciled spec suspended (markSuspended); the spec
		// still says running, so the operator redeploys it.
		{"cancel from the Flink UI is not Failed", fd("running", recon{state: "DEPLOYED", job: "suspended", stable: true}, `
  lifecycleState: SUSPENDED
  jobManagerDeploymentStatus: READY
  jobStatus: {state: CANCELED, jobId: 0f3c}`), judgement{U, PhasePending, "cancelled outside the operator"}},
		// 5. A session cluster after a spec change: deleteClusterDeployment
		// wrote FINISHED (updateStatusAfterClusterDeletion), the
		// SessionObserver never rewrites it, and the JobManager is gone.
		{"session cluster with a lost JobManager is not Succeeded", fd("", recon{state: "DEPLOYED", job: "", stable: true}, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED}
  error: '{"type":"org.apache.flink.kubernetes.operator.exception.MissingJobManagerException","message":"Missing JobManager deployment"}'`), judgement{U, PhasePending, "session cluster job manager MISSING, lifecycle STABLE"}},
		// 6. The same session cluster serving again: Running, never
		// Succeeded, whatever the stale job state.
		{"session cluster serving with a stale FINISHED", fd("", recon{state: "DEPLOYED", job: "", stable: true}, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: FINISHED}`), judgement{H, PhaseRunning, "session cluster ready"}},
		// 7. Operator 1.0 to 1.3: no lifecycleState in the status (it was
		// @JsonIgnore); a serving session cluster is healthy.
		{"session cluster on an operator without lifecycleState", fd("", recon{state: "DEPLOYED", job: "", stable: true}, `
  jobManagerDeploymentStatus: READY
  jobStatus: {}`), judgement{H, PhaseRunning, "session cluster ready"}},
		// 8. The same, spec just deployed and not yet marked stable by
		// SessionObserver: serving is what counts.
		{"session cluster on an old operator, deployed not stable", fd("", recon{state: "DEPLOYED", job: ""}, `
  jobManagerDeploymentStatus: READY`), judgement{H, PhaseRunning, "session cluster ready"}},
		// 9. An old operator's suspended application: lifecycle derived
		// from the reconciled spec (CommonStatus.getLifecycleState).
		{"suspended on an operator without lifecycleState", fd("suspended", recon{state: "DEPLOYED", job: "suspended", stable: true}, `
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{H, PhasePending, "suspended"}},

		// ResourceLifecycleMetricsTest.lifecycleStateTest: CREATED,
		// UPGRADING, DEPLOYED, STABLE, FAILED, ROLLING_BACK, ROLLED_BACK.
		{"created, not yet deployed", fd("running", recon{job: "-"}, `
  lifecycleState: CREATED
  jobManagerDeploymentStatus: MISSING
  jobStatus: {}`), judgement{U, PhasePending, "not yet deployed by the Flink operator"}},
		{"submitted suspended is never deployed", fd("suspended", recon{job: "-"}, `
  lifecycleState: CREATED
  jobManagerDeploymentStatus: MISSING`), judgement{H, PhasePending, "submitted suspended"}},
		{"first deployment in progress", fd("running", recon{state: "UPGRADING", job: "suspended", first: true}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: MISSING
  jobStatus: {jobId: 0f3c}`), judgement{U, PhasePending, "being deployed for the first time"}},
		{"deployed, job reconciling", fd("running", recon{state: "DEPLOYED", job: "running", first: true}, `
  lifecycleState: DEPLOYED
  jobManagerDeploymentStatus: DEPLOYING
  jobStatus: {state: RECONCILING, jobId: 0f3c}`), judgement{U, PhasePending, "job reconciling, job manager DEPLOYING"}},
		{"deployed and running, not yet stable", fd("running", recon{state: "DEPLOYED", job: "running", first: true}, `
  lifecycleState: DEPLOYED
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "job running (not yet stable)"}},
		{"stable and running", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "job running"}},
		{"finished on its own", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{H, PhaseSucceeded, "job finished"}},
		{"finished, job manager removed after its TTL", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{H, PhaseSucceeded, "job finished"}},
		{"failed", fd("running", running, `
  lifecycleState: FAILED
  jobManagerDeploymentStatus: READY
  jobStatus: {state: FAILED, jobId: 0f3c}
  error: '{"type":"org.apache.flink.runtime.JobException","message":"Recovery is suppressed by NoRestartBackoffTimeStrategy"}'`), judgement{H, PhaseFailed, "job failed: JobException: Recovery is suppressed"}},
		{"rolling back", fd("running", recon{state: "ROLLING_BACK", job: "running"}, `
  lifecycleState: ROLLING_BACK
  jobManagerDeploymentStatus: DEPLOYING
  jobStatus: {state: RECONCILING, jobId: 0f3c}`), judgement{H, PhasePending, "rolling back to the last stable spec"}},
		{"rolled back and running", fd("running", recon{state: "ROLLED_BACK", job: "running"}, `
  lifecycleState: ROLLED_BACK
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "rolled back"}},
		// ResourceLifecycleMetricsTest.testUnrecoverableDeploymentLifecycleState:
		// a MISSING JobManager without HA metadata is FAILED; the operator
		// waits for a manual restore, another cluster restores from the
		// preserved state.
		{"job manager lost without HA", fd("running", running, `
  lifecycleState: FAILED
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: RECONCILING, jobId: 0f3c}
  error: '`+errNoHA+`'`), judgement{U, PhasePending, "job manager MISSING, not recoverable by the operator"}},
		{"job manager lost, HA recovering", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: RECONCILING, jobId: 0f3c}
  error: '{"type":"org.apache.flink.kubernetes.operator.exception.MissingJobManagerException","message":"Missing JobManager deployment"}'`), judgement{U, PhasePending, "job reconciling, job manager MISSING: MissingJobManagerException: Missing JobManager deployment"}},
		{"upgrade stuck without HA", fd("running", recon{state: "UPGRADING", job: "running"}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: RECONCILING, jobId: 0f3c}
  error: '`+errNoHA+`'`), judgement{U, PhasePending, "upgrading cannot proceed on this cluster"}},
		{"savepoint of an upgrade in progress", fd("running", recon{state: "UPGRADING", job: "running"}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "upgrading"}},
		// CANCELED with the spec still deployed to run: an operator
		// before 1.10 (no markSuspended) leaves it so for good.
		{"canceled on an operator before 1.10", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: CANCELED, jobId: 0f3c}`), judgement{H, PhaseFailed, "job canceled"}},
		{"resuming after a suspend", fd("running", recon{state: "DEPLOYED", job: "suspended", stable: true}, `
  lifecycleState: SUSPENDED
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{U, PhasePending, "resuming"}},
		{"suspend asked, not yet done", fd("suspended", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "spec.job.state is suspended"}},
		{"a spec change not yet reconciled keeps a finished job open", strings.Replace(fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: FAILED, jobId: 0f3c}`), "generation: 2", "generation: 3", 1), judgement{H, PhasePending, "has not reconciled generation 3"}},
		{"Flink's own SUSPENDED is a lost leadership", fd("running", running, `
  lifecycleState: STABLE
  jobManagerDeploymentStatus: READY
  jobStatus: {state: SUSPENDED, jobId: 0f3c}`), judgement{U, PhasePending, "job suspended"}},
		{"validation error before the first deployment", fd("running", recon{job: "-"}, `
  lifecycleState: FAILED
  error: '`+errValidation+`'`), judgement{X, PhasePending, "spec refused by the Flink operator"}},
		{"old operator, plain-text CrashLoopBackOff", fd("running", recon{state: "DEPLOYED", job: "running"}, `
  jobManagerDeploymentStatus: ERROR
  jobStatus: {state: RECONCILING, jobId: 0f3c}
  error: '`+errPlainCrashLoop+`'`), judgement{X, PhasePending, "user error CrashLoopBackOff"}},
		{"old operator, running and stable", fd("running", running, `
  jobManagerDeploymentStatus: READY
  jobStatus: {state: RUNNING, jobId: 0f3c}`), judgement{H, PhaseRunning, "job running"}},
		{"old operator, finished", fd("running", running, `
  jobManagerDeploymentStatus: READY
  jobStatus: {state: FINISHED, jobId: 0f3c}`), judgement{H, PhaseSucceeded, "job finished"}},
		{"session cluster deploying", fd("", recon{state: "DEPLOYED", job: ""}, `
  lifecycleState: DEPLOYED
  jobManagerDeploymentStatus: DEPLOYED_NOT_READY`), judgement{U, PhasePending, "session cluster job manager DEPLOYED_NOT_READY"}},
		{"session cluster being upgraded", fd("", recon{state: "UPGRADING", job: ""}, `
  lifecycleState: UPGRADING
  jobManagerDeploymentStatus: DEPLOYING
  jobStatus: {state: FINISHED}`), judgement{H, PhasePending, "session cluster upgrading"}},
		{"session cluster with a user error", fd("", recon{state: "DEPLOYED", job: ""}, `
  lifecycleState: DEPLOYED
  jobManagerDeploymentStatus: ERROR
  error: '`+errCrashLoop+`'`), judgement{X, PhasePending, "user error CrashLoopBackOff"}},
	})
}

// TestFlinkJobStates covers every job state of a deployed, stable spec
// with no error, with an error a failover could fix and with each kind of
// user error, because the failover controller acts on exactly this.
func TestFlinkJobStates(t *testing.T) {
	type want struct {
		health    string
		phase     string
		msg       string
		userError bool
	}
	// What each state gives when status.error is empty or not a user's.
	byState := map[string]want{
		"RUNNING":      {"Healthy", PhaseRunning, "job running", false},
		"FINISHED":     {"Healthy", PhaseSucceeded, "job finished", false},
		"FAILED":       {"Healthy", PhaseFailed, "job failed", false},
		"CANCELED":     {"Healthy", PhaseFailed, "job canceled", false},
		"SUSPENDED":    {"Unhealthy", PhasePending, "job suspended", false},
		"CANCELLING":   {"Healthy", PhaseRunning, "job cancelling", false},
		"FAILING":      {"Healthy", PhaseRunning, "job failing", false},
		"RESTARTING":   {"Healthy", PhaseRunning, "job restarting", false},
		"CREATED":      {"Unhealthy", PhasePending, "job created", false},
		"INITIALIZING": {"Unhealthy", PhasePending, "job initializing", false},
		"RECONCILING":  {"Unhealthy", PhasePending, "job reconciling", false},
	}
	// The states in which a user error changes the verdict: the job is
	// not running.
	notRunning := map[string]bool{"CREATED": true, "INITIALIZING": true, "RECONCILING": true, "SUSPENDED": true}
	errorsByName := map[string]string{"": "", "cluster error": errCluster, "ErrImagePull": errImagePull, "CrashLoopBackOff": errCrashLoop, "ImagePullBackOff": errBackOff}

	for state, base := range byState {
		for errName, errText := range errorsByName {
			t.Run(state+"/"+orNone(errName), func(t *testing.T) {
				status := fmt.Sprintf("  jobStatus: {state: %s, jobId: 0f3c}\n  jobManagerDeploymentStatus: READY\n  lifecycleState: DEPLOYED\n", state)
				if errText != "" {
					status += fmt.Sprintf("  error: %q\n", errText)
				}
				w := base
				if notRunning[state] && errName != "" && errName != "cluster error" {
					w = want{"Unknown", PhasePending, "user error " + errName + ", failover would not help", true}
				}
				got := JudgeDeployment(decode(t, flinkDeployment(status)))
				if string(got.Health) != w.health || got.Phase != w.phase || got.UserError != w.userError || !strings.Contains(got.Message, w.msg) {
					t.Errorf("got %s %s userError=%v %q, want %s %s userError=%v containing %q", got.Health, got.Phase, got.UserError, got.Message, w.health, w.phase, w.userError, w.msg)
				}
			})
		}
	}
}

func TestFlinkMessages(t *testing.T) {
	runCases(t, []judgeCase{
		{"operator JSON error reduced to type and message", flinkDeployment(`
  jobStatus: {state: RECONCILING}
  error: '` + errCluster + `'`), judgement{U, PhasePending, "job reconciling, job manager <none>: ReconciliationException: java.net.ConnectException"}},
		{"user error message is readable", flinkDeployment(`
  jobStatus: {state: INITIALIZING}
  error: '` + errImagePull + `'`), judgement{X, PhasePending, `DeploymentFailedException: [flink-main-container] Back-off pulling image "flink:1.99"`}},
		{"failed job shows its error", flinkDeployment(`
  jobStatus: {state: FAILED}
  error: 'job exceeded its restart attempts'`), judgement{H, PhaseFailed, "job failed: job exceeded its restart attempts"}},
		{"unknown state", flinkDeployment(`
  jobStatus: {state: EXPLODED}`), judgement{X, PhasePending, `unknown Flink job state "EXPLODED"`}},
		{"unknown lifecycle", flinkDeployment(`
  lifecycleState: MELTING
  jobStatus: {state: RUNNING}`), judgement{X, PhasePending, `unknown Flink lifecycle state "MELTING"`}},
	})
}

// TestFlinkWithoutSpec covers statuses saved without their spec (as
// status.result keeps them): the mode comes from the last reconciled
// spec, a job id or a job state only applications have.
func TestFlinkWithoutSpec(t *testing.T) {
	runCases(t, []judgeCase{
		{"session: ready and stable", flinkDeployment(`
  jobManagerDeploymentStatus: READY
  lifecycleState: STABLE`), judgement{H, PhaseRunning, "session cluster ready"}},
		{"session: empty job state is no job state", flinkDeployment(`
  jobStatus: {state: ""}
  jobManagerDeploymentStatus: READY
  lifecycleState: STABLE`), judgement{H, PhaseRunning, "session cluster ready"}},
		{"session: ready, not yet stable, still serving", flinkDeployment(`
  jobManagerDeploymentStatus: READY
  lifecycleState: DEPLOYED`), judgement{H, PhaseRunning, "session cluster ready"}},
		{"session: deploying", flinkDeployment(`
  jobManagerDeploymentStatus: DEPLOYING
  lifecycleState: DEPLOYED`), judgement{U, PhasePending, "job manager DEPLOYING"}},
		{"session: job manager missing after an upgrade", flinkDeployment(`
  jobManagerDeploymentStatus: MISSING
  lifecycleState: STABLE
  jobStatus: {state: FINISHED}
  error: Missing JobManager deployment`), judgement{U, PhasePending, "session cluster job manager MISSING, lifecycle STABLE: Missing JobManager deployment"}},
		{"session: job manager error, cluster cause", flinkDeployment(`
  jobManagerDeploymentStatus: ERROR
  lifecycleState: FAILED
  error: '` + errCluster + `'`), judgement{U, PhasePending, "job manager ERROR, lifecycle FAILED: ReconciliationException"}},
		{"session: job manager error, user cause", flinkDeployment(`
  jobManagerDeploymentStatus: ERROR
  lifecycleState: DEPLOYED
  error: '` + errCrashLoop + `'`), judgement{X, PhasePending, "user error CrashLoopBackOff"}},
		{"application from its reconciled spec", flinkDeployment(`
  jobManagerDeploymentStatus: MISSING
  jobStatus: {state: FINISHED}
  reconciliationStatus: {state: DEPLOYED, lastReconciledSpec: '` + lastSpec("suspended", false) + `'}`), judgement{H, PhasePending, "suspended"}},
		{"suspended", flinkDeployment(`
  jobManagerDeploymentStatus: MISSING
  lifecycleState: SUSPENDED`), judgement{H, PhasePending, "suspended"}},
		{"not yet observed by the operator", flinkDeployment(`  {}`), judgement{X, PhaseUnobserved, "not yet observed by the Flink operator"}},
		{"no status at all", "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}", judgement{X, PhaseUnobserved, "not yet observed"}},
		{"spec, no status", "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}\nspec: {job: {jarURI: x}}", judgement{X, PhaseUnobserved, "not yet observed"}},
	})
}

func TestFlinkUserErrorFlag(t *testing.T) {
	got := JudgeDeployment(decode(t, flinkDeployment(`
  jobStatus: {state: CREATED}
  error: '`+errImagePull+`'`)))
	if !got.UserError || got.Health != X {
		t.Fatalf("user error: got %+v", got)
	}
	got = JudgeDeployment(decode(t, flinkDeployment(`
  jobStatus: {state: RUNNING}
  error: '`+errImagePull+`'`)))
	if got.UserError || got.Health != H {
		t.Errorf("a running job with a stale error is not a user error: got %+v", got)
	}
	// JSON whose reason is not a container state, mentioning one in its
	// message, is not a user error: the operator's reason is the truth.
	got = JudgeDeployment(decode(t, flinkDeployment(`
  jobStatus: {state: RECONCILING}
  error: '{"type":"org.apache.flink.kubernetes.operator.exception.ReconciliationException","message":"node reported ImagePullBackOff for another pod"}'`)))
	if got.UserError || got.Health != U {
		t.Errorf("a reconcile error is not a user error: got %+v", got)
	}
}
