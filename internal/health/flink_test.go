package health

import (
	"fmt"
	"strings"
	"testing"
)

// Status errors as the Flink operator writes them: JSON from its
// DeploymentFailedException for a container it found waiting, and a plain
// reconcile failure that a user did not cause.
const (
	errImagePull = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException","message":"[flink-main-container] Back-off pulling image \"flink:1.99\"","additionalMetadata":{"reason":"ErrImagePull"},"throwableList":[]}`
	errCrashLoop = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException","message":"[flink-main-container] CrashLoop - Error: Could not find main class","additionalMetadata":{"reason":"CrashLoopBackOff"}}`
	errBackOff   = `ImagePullBackOff: Back-off pulling image "registry.invalid/flink"`
	errCluster   = `{"type":"org.apache.flink.kubernetes.operator.exception.ReconciliationException","message":"java.net.ConnectException: Connection refused: flink-rest:8081"}`
)

func flinkDeployment(status string) string {
	return "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}\nstatus:\n" + status
}

// TestFlinkJobStates covers every job state with no error, with an error
// a failover could fix and with each kind of user error, because the issue
// names all of them and the failover controller acts on exactly this.
func TestFlinkJobStates(t *testing.T) {
	in, _ := New(nil)
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
		"SUSPENDED":    {"Healthy", PhasePending, "job suspended", false},
		"CANCELLING":   {"Healthy", PhaseRunning, "job cancelling", false},
		"FAILING":      {"Healthy", PhaseRunning, "job failing", false},
		"RESTARTING":   {"Healthy", PhaseRunning, "job restarting", false},
		"CREATED":      {"Unhealthy", PhasePending, "job created", false},
		"INITIALIZING": {"Unhealthy", PhasePending, "job initializing", false},
		"RECONCILING":  {"Unhealthy", PhasePending, "job reconciling", false},
	}
	// The states in which a user error changes the verdict.
	startingUp := map[string]bool{"CREATED": true, "INITIALIZING": true, "RECONCILING": true}
	errorsByName := map[string]string{"": "", "cluster error": errCluster, "ErrImagePull": errImagePull, "CrashLoopBackOff": errCrashLoop, "ImagePullBackOff": errBackOff}

	for state, base := range byState {
		for errName, errText := range errorsByName {
			t.Run(state+"/"+orNone(errName), func(t *testing.T) {
				status := fmt.Sprintf("  jobStatus: {state: %s, jobId: 0f3c}\n  jobManagerDeploymentStatus: READY\n  lifecycleState: DEPLOYED\n", state)
				if errText != "" {
					status += fmt.Sprintf("  error: %q\n", errText)
				}
				w := base
				if startingUp[state] && errName != "" && errName != "cluster error" {
					w = want{"Unknown", PhasePending, "user error " + errName + ", failover would not help", true}
				}
				got := in.Interpret(decode(t, flinkDeployment(status)))
				if string(got.Health) != w.health || got.Phase != w.phase || got.UserError != w.userError || !strings.Contains(got.Message, w.msg) {
					t.Errorf("got %s %s userError=%v %q, want %s %s userError=%v containing %q", got.Health, got.Phase, got.UserError, got.Message, w.health, w.phase, w.userError, w.msg)
				}
			})
		}
	}
}

func TestFlinkMessages(t *testing.T) {
	runCases(t, "", []interpretCase{
		{"operator JSON error reduced to type and message", flinkDeployment(`
  jobStatus: {state: RECONCILING}
  error: '` + errCluster + `'`), judgement{U, PhasePending, "job reconciling: ReconciliationException: java.net.ConnectException"}},
		{"user error message is readable", flinkDeployment(`
  jobStatus: {state: INITIALIZING}
  error: '` + errImagePull + `'`), judgement{X, PhasePending, `DeploymentFailedException: [flink-main-container] Back-off pulling image "flink:1.99"`}},
		{"failed job shows its error", flinkDeployment(`
  jobStatus: {state: FAILED}
  error: 'job exceeded its restart attempts'`), judgement{H, PhaseFailed, "job failed: job exceeded its restart attempts"}},
		{"unknown state", flinkDeployment(`
  jobStatus: {state: EXPLODED}`), judgement{X, PhasePending, `unknown Flink job state "EXPLODED"`}},
		{"being deleted", strings.Replace(flinkDeployment(`
  jobStatus: {state: RUNNING}
  lifecycleState: DELETING`), "{name: wordcount}", `{name: wordcount, deletionTimestamp: "2026-11-29T10:00:00Z"}`, 1), judgement{H, PhaseFailed, "terminating since 2026-11-29T10:00:00Z: job running"}},
	})
}

// TestFlinkWithoutJobState covers session clusters and application
// clusters before their job exists.
func TestFlinkWithoutJobState(t *testing.T) {
	runCases(t, "", []interpretCase{
		{"ready and stable", flinkDeployment(`
  jobManagerDeploymentStatus: READY
  lifecycleState: STABLE`), judgement{H, PhaseRunning, "job manager ready, lifecycle STABLE"}},
		{"empty job state is no job state", flinkDeployment(`
  jobStatus: {state: ""}
  jobManagerDeploymentStatus: READY
  lifecycleState: STABLE`), judgement{H, PhaseRunning, "lifecycle STABLE"}},
		{"ready but not yet stable", flinkDeployment(`
  jobManagerDeploymentStatus: READY
  lifecycleState: DEPLOYED`), judgement{U, PhasePending, "job manager READY, lifecycle DEPLOYED"}},
		{"deploying", flinkDeployment(`
  jobManagerDeploymentStatus: DEPLOYING
  lifecycleState: DEPLOYED`), judgement{U, PhasePending, "job manager DEPLOYING"}},
		{"deployed, not ready", flinkDeployment(`
  jobManagerDeploymentStatus: DEPLOYED_NOT_READY
  lifecycleState: DEPLOYED`), judgement{U, PhasePending, "DEPLOYED_NOT_READY"}},
		{"job manager missing", flinkDeployment(`
  jobManagerDeploymentStatus: MISSING
  lifecycleState: STABLE
  error: Missing JobManager deployment`), judgement{U, PhasePending, "job manager MISSING, lifecycle STABLE: Missing JobManager deployment"}},
		{"job manager error, cluster cause", flinkDeployment(`
  jobManagerDeploymentStatus: ERROR
  lifecycleState: FAILED
  error: '` + errCluster + `'`), judgement{U, PhasePending, "job manager ERROR, lifecycle FAILED: ReconciliationException"}},
		{"job manager error, user cause", flinkDeployment(`
  jobManagerDeploymentStatus: ERROR
  lifecycleState: DEPLOYED
  error: '` + errCrashLoop + `'`), judgement{X, PhasePending, "user error CrashLoopBackOff"}},
		{"suspended", flinkDeployment(`
  jobManagerDeploymentStatus: MISSING
  lifecycleState: SUSPENDED`), judgement{H, PhasePending, "suspended"}},
		{"not yet observed by the operator", flinkDeployment(`  {}`), judgement{U, PhasePending, "not yet observed by the Flink operator"}},
		{"no status at all", "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}", judgement{U, PhasePending, "not yet observed"}},
	})
}

func TestFlinkUserErrorFlag(t *testing.T) {
	in, _ := New(nil)
	got := in.Interpret(decode(t, flinkDeployment(`
  jobStatus: {state: CREATED}
  error: '`+errImagePull+`'`)))
	if !got.UserError || got.Health != X {
		t.Fatalf("user error: got %+v", got)
	}
	got = in.Interpret(decode(t, flinkDeployment(`
  jobStatus: {state: RUNNING}
  error: '`+errImagePull+`'`)))
	if got.UserError || got.Health != H {
		t.Errorf("a running job with a stale error is not a user error: got %+v", got)
	}
}
