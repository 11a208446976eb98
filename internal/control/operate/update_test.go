package operate_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

func flinkTemplate(parallelism int, extra map[string]any) map[string]any {
	job := map[string]any{"jarURI": "local:///x.jar", "parallelism": parallelism, "upgradeMode": "savepoint"}
	md := map[string]any{}
	for k, v := range extra {
		md[k] = v
	}
	return map[string]any{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": md,
		"spec": map[string]any{"job": job}}
}

func TestInPlace(t *testing.T) {
	jobT := func(image string) map[string]any {
		return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": image}}}}}}
	}
	workflowT := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": map[string]any{"entrypoint": "main"}}
	deploymentT := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": 1}}
	cases := []struct {
		name      string
		old, next map[string]any
		refusal   string // "" : allowed
	}{
		{"flink parallelism", flinkTemplate(2, nil), flinkTemplate(3, nil), ""},
		{"flink renamed", flinkTemplate(2, nil), flinkTemplate(3, map[string]any{"name": "other"}), `metadata.name changes from "wc" to "other"`},
		{"flink to job", flinkTemplate(2, nil), jobT("busybox"), "kind changes from FlinkDeployment.flink.apache.org to Job.batch"},
		{"job", jobT("busybox:1.36"), jobT("busybox:1.37"), "a Job's pod template is immutable on its cluster"},
		{"workflow", workflowT, workflowT, "storedWorkflowTemplateSpec"},
		{"deployment", deploymentT, deploymentT, "changing the object of a running Deployment.apps in place is not supported yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := operate.InPlace(c.old, c.next, "wc")
			if c.refusal == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *operate.NotUpdatableError
			if !errors.As(err, &refused) {
				t.Fatalf("err = %v, want a *NotUpdatableError", err)
			}
			if !strings.Contains(err.Error(), c.refusal) || !strings.Contains(err.Error(), "rerun it (POST .../rerun)") {
				t.Fatalf("refusal %q does not say %q and offer rerun", err, c.refusal)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	now := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	open := []*store.Attempt{{Number: 1, Cluster: "old", ObjectUID: "u0", EndedAt: &now}, {Number: 2, Cluster: "sandbox-1", ObjectUID: "u1"}}
	for _, phase := range []v1alpha1.Phase{v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended} {
		cur := &lifecycle.Runnable{Rec: &store.Runnable{Namespace: "team-a", Name: "wc", Phase: string(phase), Generation: 4}}
		tr, err := operate.Update(cur, open, "alice", now, 4)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if tr.To != phase || tr.Enqueue != stream.SubmissionUpdate || tr.EnqueueAttempt != 2 || tr.Actor != "alice" || tr.Audit.Action != "update" {
			t.Fatalf("%s: transition %+v", phase, tr)
		}
		if !strings.Contains(tr.Message, "generation 4") || !strings.Contains(tr.Message, "attempt 2 on sandbox-1") {
			t.Fatalf("%s: message %q", phase, tr.Message)
		}
		var st v1alpha1.RunnableStatus
		if err := tr.Edit(&st); err != nil {
			t.Fatal(err)
		}
		if want := (&v1alpha1.Update{Generation: 4, By: "alice", At: now, Attempt: 2}); !reflect.DeepEqual(st.Update, want) {
			t.Fatalf("%s: status.update %+v, want %+v", phase, st.Update, want)
		}
	}
	for _, c := range []struct {
		phase    v1alpha1.Phase
		attempts []*store.Attempt
	}{
		{v1alpha1.PhaseScheduled, []*store.Attempt{{Number: 1, Cluster: "sandbox-1"}}}, // not created yet
		{v1alpha1.PhaseFailingOver, open},
		{v1alpha1.PhaseRunning, open[:1]}, // its attempt ended
		{v1alpha1.PhaseRunning, nil},
	} {
		cur := &lifecycle.Runnable{Rec: &store.Runnable{Namespace: "team-a", Name: "wc", Phase: string(c.phase), Generation: 2}}
		var state *operate.StateError
		if _, err := operate.Update(cur, c.attempts, "alice", now, 2); !errors.As(err, &state) {
			t.Fatalf("%s with %d attempts: err = %v, want a *StateError", c.phase, len(c.attempts), err)
		}
	}
}

func TestUpdateSpecKeeps(t *testing.T) {
	flinkGK := schema.GroupKind{Group: "flink.apache.org", Kind: "FlinkDeployment"}
	if got := operate.UpdateSpecKeeps(flinkGK, flinkTemplate(3, nil), false); got != nil {
		t.Fatalf("running: keeps %v", got)
	}
	want := map[string]any{"job": map[string]any{"state": "suspended"}}
	if got := operate.UpdateSpecKeeps(flinkGK, flinkTemplate(3, nil), true); !reflect.DeepEqual(got, want) {
		t.Fatalf("suspended: keeps %v, want %v", got, want)
	}
	if got := operate.UpgradeMode(flinkGK, flinkTemplate(3, nil)); got != "savepoint" {
		t.Fatalf("upgradeMode %q", got)
	}
	if got := operate.UpgradeMode(flinkGK, map[string]any{"spec": map[string]any{"job": map[string]any{}}}); got != "stateless" {
		t.Fatalf("default upgradeMode %q, want the operator's stateless", got)
	}
	if got := operate.UpgradeMode(schema.GroupKind{Group: "batch", Kind: "Job"}, nil); got != "" {
		t.Fatalf("a Job's upgradeMode %q", got)
	}
}
