package health

import (
	"strings"
	"testing"
)

// errImagePull is status.error as the Flink operator writes it for a
// DeploymentFailedException (FlinkResourceExceptionUtils
// .updateFlinkResourceException, 1.3+).
const errImagePull = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException","message":"[flink-main-container] Back-off pulling image \"flink:1.99\"","additionalMetadata":{"reason":"ErrImagePull"},"throwableList":[]}`

func flinkDeployment(status string) string {
	return "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: wordcount}\nstatus:\n" + status
}

// TestFlinkDeploymentRegistered: FlinkDeployments are judged by
// internal/flink (whose tests follow the operator's states), with the
// rules every kind shares on top: a deletion shows in the phase, and a
// user error keeps its flag.
func TestFlinkDeploymentRegistered(t *testing.T) {
	runCases(t, "", []interpretCase{
		{"running", flinkDeployment(`
  jobStatus: {state: RUNNING}
  jobManagerDeploymentStatus: READY
  lifecycleState: STABLE`), judgement{H, PhaseRunning, "job running"}},
		{"being deleted", strings.Replace(flinkDeployment(`
  jobStatus: {state: RUNNING}
  lifecycleState: DELETING`), "{name: wordcount}", `{name: wordcount, deletionTimestamp: "2026-11-29T10:00:00Z"}`, 1), judgement{H, PhaseFailed, "terminating since 2026-11-29T10:00:00Z: being deleted by the Flink operator"}},
	})
	in, _ := New(nil)
	got := in.Interpret(decode(t, flinkDeployment(`
  jobStatus: {state: CREATED}
  error: '`+errImagePull+`'`)))
	if !got.UserError || got.Health != X || !strings.Contains(got.Message, "user error ErrImagePull") {
		t.Errorf("user error: got %+v", got)
	}
}
