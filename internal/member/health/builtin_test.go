package health

import (
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
)

// decode turns a YAML object into the map Interpret takes, with numbers as
// the ingester's decoder gives them.
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

type interpretCase struct {
	name string
	obj  string
	want judgement
}

func runCases(t *testing.T, header string, cases []interpretCase) {
	t.Helper()
	in, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := in.Interpret(decode(t, header+tc.obj))
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

func TestJob(t *testing.T) {
	runCases(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: report}\n", []interpretCase{
		{"no status yet", ``, judgement{H, PhasePending, "waiting for pods"}},
		{"pods created, none running", `status: {active: 1, ready: 0}`, judgement{H, PhasePending, "waiting for pods to start"}},
		{"running", `status: {active: 2, ready: 2, succeeded: 1}`, judgement{H, PhaseRunning, "2 active, 1 succeeded, 0 failed"}},
		{"running, old controller without ready", `status: {active: 1}`, judgement{H, PhaseRunning, "job running"}},
		{"between completions", `status: {succeeded: 1}`, judgement{H, PhaseRunning, "1 succeeded"}},
		{"backing off after a failed pod", `status: {failed: 1}`, judgement{H, PhasePending, "retrying"}},
		{"complete", `
status:
  succeeded: 1
  conditions:
  - {type: Complete, status: "True"}`, judgement{H, PhaseSucceeded, "job complete"}},
		{"success criteria met before Complete", `
status:
  active: 1
  succeeded: 3
  conditions:
  - {type: SuccessCriteriaMet, status: "True"}`, judgement{H, PhaseSucceeded, "job complete"}},
		{"failed", `
status:
  failed: 7
  conditions:
  - {type: Failed, status: "True", reason: BackoffLimitExceeded, message: Job has reached the specified backoff limit}`,
			judgement{U, PhaseFailed, "BackoffLimitExceeded: Job has reached the specified backoff limit"}},
		{"failure target before Failed", `
status:
  active: 1
  conditions:
  - {type: FailureTarget, status: "True", reason: DeadlineExceeded}`, judgement{U, PhaseFailed, "DeadlineExceeded"}},
		{"Failed condition False is not a failure", `
status:
  active: 1
  conditions:
  - {type: Failed, status: "False"}`, judgement{H, PhaseRunning, "job running"}},
		{"suspended condition", `
spec: {suspend: true}
status:
  conditions:
  - {type: Suspended, status: "True", reason: JobSuspended, message: Job suspended}`, judgement{H, PhasePending, "job suspended: JobSuspended"}},
		{"suspended in spec, not yet in status", `spec: {suspend: true}`, judgement{H, PhasePending, "spec.suspend"}},
		{"deleted while running", `
metadata: {name: report, deletionTimestamp: "2026-11-29T10:00:00Z"}
status: {active: 1}`, judgement{H, PhaseFailed, "terminating since 2026-11-29T10:00:00Z: job running"}},
		{"deleted after completing keeps Succeeded", `
metadata: {name: report, deletionTimestamp: "2026-11-29T10:00:00Z"}
status:
  conditions:
  - {type: Complete, status: "True"}`, judgement{H, PhaseSucceeded, "job complete"}},
		{"counts of the wrong type are absent", `status: {active: "many", failed: 1.5}`, judgement{H, PhasePending, "waiting for pods"}},
	})
}

func TestWorkflow(t *testing.T) {
	runCases(t, "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: nightly}\n", []interpretCase{
		{"not yet seen by the controller", ``, judgement{H, PhasePending, "waiting for the workflow controller"}},
		{"pending", `status: {phase: Pending}`, judgement{H, PhasePending, "workflow pending"}},
		{"running", `status: {phase: Running, progress: 1/3}`, judgement{H, PhaseRunning, "workflow running: progress 1/3"}},
		{"succeeded", `status: {phase: Succeeded, progress: 3/3}`, judgement{H, PhaseSucceeded, "workflow succeeded"}},
		{"failed", `status: {phase: Failed, message: child 'step-2' failed}`, judgement{U, PhaseFailed, "workflow failed: child 'step-2' failed"}},
		{"error", `status: {phase: Error, message: invalid spec}`, judgement{U, PhaseFailed, "workflow error: invalid spec"}},
		{"unknown phase", `status: {phase: Exploded}`, judgement{X, PhasePending, `unknown workflow phase "Exploded"`}},
		{"phase of the wrong type", `status: {phase: 3}`, judgement{H, PhasePending, "waiting for the workflow controller"}},
		{"deleted while running", `
metadata: {name: nightly, deletionTimestamp: "2026-11-29T10:00:00Z"}
status: {phase: Running}`, judgement{H, PhaseFailed, "terminating"}},
	})
}

func TestDeployment(t *testing.T) {
	runCases(t, "apiVersion: apps/v1\nkind: Deployment\n", []interpretCase{
		{"no status yet", `metadata: {name: web, generation: 1}
spec: {replicas: 3}`, judgement{H, PhasePending, "waiting for the deployment controller"}},
		{"new generation not observed", `
metadata: {name: web, generation: 3}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 3}`,
			judgement{H, PhaseRunning, "observe generation 3 (observed 2)"}},
		{"available", `
metadata: {name: web, generation: 2}
spec: {replicas: 3}
status:
  observedGeneration: 2
  replicas: 3
  updatedReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True"}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}`, judgement{H, PhaseRunning, "3 of 3 replicas available"}},
		{"replicas default to one", `
metadata: {name: web, generation: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1}`, judgement{H, PhaseRunning, "1 of 1 replicas available"}},
		{"first rollout, nothing available yet", `
metadata: {name: web, generation: 1}
spec: {replicas: 3}
status:
  observedGeneration: 1
  replicas: 3
  updatedReplicas: 3
  conditions:
  - {type: Available, status: "False", reason: MinimumReplicasUnavailable}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated}`, judgement{H, PhasePending, "rolling out: MinimumReplicasUnavailable"}},
		{"rolling update, fewer updated", `
metadata: {name: web, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 4, updatedReplicas: 1, availableReplicas: 3}`, judgement{H, PhaseRunning, "rolling out (1 of 3 updated, 3 available)"}},
		{"rolling update, old replicas terminating", `
metadata: {name: web, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 4, updatedReplicas: 3, availableReplicas: 3}`, judgement{H, PhaseRunning, "1 old replicas terminating"}},
		{"progress deadline exceeded", `
metadata: {name: web, generation: 2}
spec: {replicas: 3}
status:
  observedGeneration: 2
  replicas: 4
  updatedReplicas: 1
  availableReplicas: 3
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: ReplicaSet "web-2" has timed out progressing.}`,
			judgement{U, PhaseRunning, "rollout stuck: ProgressDeadlineExceeded"}},
		{"progress deadline exceeded with nothing available", `
metadata: {name: web, generation: 1}
spec: {replicas: 1}
status:
  observedGeneration: 1
  replicas: 1
  updatedReplicas: 1
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded}`, judgement{U, PhasePending, "rollout stuck"}},
		{"rollout done, then pods fail", `
metadata: {name: web, generation: 2}
spec: {replicas: 3}
status:
  observedGeneration: 2
  replicas: 3
  updatedReplicas: 3
  availableReplicas: 1
  conditions:
  - {type: Available, status: "False", reason: MinimumReplicasUnavailable, message: Deployment does not have minimum availability.}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}`, judgement{U, PhaseRunning, "unavailable: MinimumReplicasUnavailable"}},
		{"one pod down, still above minimum", `
metadata: {name: web, generation: 2}
spec: {replicas: 4}
status:
  observedGeneration: 2
  replicas: 4
  updatedReplicas: 4
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True"}`, judgement{H, PhaseRunning, "3 of 4 replicas available"}},
		{"paused", `
metadata: {name: web, generation: 2}
spec: {replicas: 3, paused: true}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 3}`, judgement{H, PhaseRunning, "rollout paused"}},
		{"scaled to zero", `
metadata: {name: web, generation: 4}
spec: {replicas: 0}
status: {observedGeneration: 4}`, judgement{H, PhaseRunning, "scaled to zero"}},
		{"being deleted", `
metadata: {name: web, generation: 2, deletionTimestamp: "2026-11-29T10:00:00Z"}
spec: {replicas: 1}
status: {observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1}`, judgement{H, PhaseFailed, "terminating"}},
	})
}

func TestStatefulSet(t *testing.T) {
	runCases(t, "apiVersion: apps/v1\nkind: StatefulSet\n", []interpretCase{
		{"no status yet", `metadata: {name: db, generation: 1}
spec: {replicas: 3}`, judgement{H, PhasePending, "waiting for the statefulset controller"}},
		{"new generation not observed", `
metadata: {name: db, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 1, replicas: 3, readyReplicas: 3}`, judgement{H, PhaseRunning, "observe generation 2"}},
		{"starting, none ready", `
metadata: {name: db, generation: 1}
spec: {replicas: 3}
status: {observedGeneration: 1, replicas: 1, currentRevision: db-1, updateRevision: db-1}`, judgement{U, PhasePending, "0 of 3 replicas ready"}},
		{"some ready", `
metadata: {name: db, generation: 1}
spec: {replicas: 3}
status: {observedGeneration: 1, replicas: 3, readyReplicas: 2, updatedReplicas: 3, currentRevision: db-1, updateRevision: db-1}`, judgement{U, PhaseRunning, "2 of 3 replicas ready"}},
		{"all ready", `
metadata: {name: db, generation: 1}
spec: {replicas: 3}
status: {observedGeneration: 1, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: db-1, updateRevision: db-1}`, judgement{H, PhaseRunning, "3 of 3 replicas ready"}},
		{"rolling update between pods", `
metadata: {name: db, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 1, currentRevision: db-1, updateRevision: db-2}`, judgement{H, PhaseRunning, "rolling out: 1 of 3 replicas at revision db-2"}},
		{"revisions differ though all updated", `
metadata: {name: db, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: db-1, updateRevision: db-2}`, judgement{H, PhaseRunning, "rolling out"}},
		{"OnDelete ignores revisions", `
metadata: {name: db, generation: 2}
spec: {replicas: 3, updateStrategy: {type: OnDelete}}
status: {observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 0, currentRevision: db-1, updateRevision: db-2}`, judgement{H, PhaseRunning, "3 of 3 replicas ready"}},
		{"partition rolling", `
metadata: {name: db, generation: 2}
spec: {replicas: 4, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 1, currentRevision: db-1, updateRevision: db-2}`, judgement{H, PhaseRunning, "1 of 2 replicas above partition 2"}},
		{"partition done", `
metadata: {name: db, generation: 2}
spec: {replicas: 4, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 2, currentRevision: db-1, updateRevision: db-2}`, judgement{H, PhaseRunning, "partitioned at 2"}},
		{"scaled to zero", `
metadata: {name: db, generation: 3}
spec: {replicas: 0}
status: {observedGeneration: 3, replicas: 0, currentRevision: db-1, updateRevision: db-1}`, judgement{H, PhaseRunning, "0 of 0 replicas ready"}},
		{"being deleted", `
metadata: {name: db, generation: 1, deletionTimestamp: "2026-11-29T10:00:00Z"}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, readyReplicas: 1, updatedReplicas: 1}`, judgement{H, PhaseFailed, "terminating"}},
	})
}

func TestUnknownKinds(t *testing.T) {
	runCases(t, "", []interpretCase{
		{"kind without status", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}", judgement{"", "", "a ConfigMap has no status to judge"}},
		{"kind without interpreter", "apiVersion: example.com/v1\nkind: Widget\nstatus: {phase: Running}", judgement{X, "", "no health interpreter for example.com/v1 Widget"}},
		{"known kind, other version", "apiVersion: batch/v1beta1\nkind: Job", judgement{X, "", "no health interpreter for batch/v1beta1 Job"}},
		{"ready node", "apiVersion: v1\nkind: Node\nstatus: {conditions: [{type: Ready, status: \"True\", reason: KubeletReady}]}", judgement{H, "", "Ready"}},
		{"cordoned node", "apiVersion: v1\nkind: Node\nspec: {unschedulable: true}\nstatus: {conditions: [{type: Ready, status: \"True\"}]}", judgement{H, "", "Ready (cordoned)"}},
		{"node not ready", "apiVersion: v1\nkind: Node\nstatus: {conditions: [{type: Ready, status: \"False\", reason: KubeletNotReady, message: PLEG is not healthy}]}", judgement{U, "", "NotReady: KubeletNotReady"}},
		{"node whose kubelet stopped posting", "apiVersion: v1\nkind: Node\nstatus: {conditions: [{type: Ready, status: Unknown, reason: NodeStatusUnknown}]}", judgement{X, "", "node status unknown: NodeStatusUnknown"}},
		{"new node", "apiVersion: v1\nkind: Node", judgement{X, "", "no Ready condition"}},
		{"node being deleted keeps no phase", "apiVersion: v1\nkind: Node\nmetadata: {deletionTimestamp: \"2026-12-01T00:00:00Z\"}\nstatus: {conditions: [{type: Ready, status: \"True\"}]}", judgement{H, "", "Ready"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: c}", judgement{X, PhasePending, "no apiVersion or kind"}},
		{"empty object", "{}", judgement{X, PhasePending, "no apiVersion or kind"}},
	})
}

func TestNilInterpreterUsesBuiltins(t *testing.T) {
	var in *Interpreter
	got := in.Interpret(decode(t, "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nstatus: {phase: Succeeded}"))
	if got.Health != H || got.Phase != PhaseSucceeded {
		t.Errorf("got %+v", got)
	}
	if got := in.Interpret(nil); got.Health != X {
		t.Errorf("nil object: got %+v", got)
	}
}

func TestMessagesStayOnOneShortLine(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got, _ := New(nil)
	r := got.Interpret(map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"status": map[string]any{"phase": "Failed", "message": "line one\nline two\t" + long},
	})
	if strings.ContainsAny(r.Message, "\n\t") || len(r.Message) > maxMessage {
		t.Fatalf("message not clipped to one line of %d bytes: %d bytes", maxMessage, len(r.Message))
	}
	if !strings.HasPrefix(r.Message, "workflow failed: line one line two é") || !strings.HasSuffix(r.Message, "é...") {
		t.Errorf("message cut badly: %q...", r.Message[:40])
	}
}
