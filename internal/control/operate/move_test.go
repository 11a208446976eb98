package operate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

func TestMove(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	flinkGVK := schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"}
	jobGVK := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	spec := &v1alpha1.RunnableSpec{
		Template:  map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "local:///x.jar"}}},
		Placement: v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b", "c", "d"}}},
	}
	cordoned := []corev1.Taint{{Key: v1alpha1.TaintCordon, Effect: corev1.TaintEffectNoSchedule}}
	cs := []placement.Cluster{
		{Name: "a", Ready: true}, {Name: "b", Ready: true}, {Name: "c", Ready: false},
		{Name: "d", Ready: true, Taints: cordoned}, {Name: "e", Ready: true}, {Name: "f", Ready: true, Lacks: "deployable cfg (Pending)"},
	}
	running := func(phase v1alpha1.Phase, m *v1alpha1.Move) (*lifecycle.Runnable, []*store.Attempt) {
		return &lifecycle.Runnable{Rec: &store.Runnable{Namespace: "team-a", Name: "wc", Phase: string(phase), Cluster: "a"},
				Status: v1alpha1.RunnableStatus{Move: m}},
			[]*store.Attempt{{Number: 1, Cluster: "a"}}
	}
	cases := []struct {
		name   string
		phase  v1alpha1.Phase
		move   *v1alpha1.Move
		gvk    schema.GroupVersionKind
		to     string
		want   string // the target, or the error's words
		state  bool   // a 409
		how    string
		inelig bool // a 422
	}{
		{"to a named cluster, by savepoint", v1alpha1.PhaseRunning, nil, flinkGVK, "b", "b", false, "stopped on a with a savepoint", false},
		{"placement chooses, the current one excluded", v1alpha1.PhaseRunning, nil, flinkGVK, "", "b", false, "savepoint", false},
		{"a Job moves as a failover does", v1alpha1.PhaseRunning, nil, jobGVK, "b", "b", false, "removed first", false},
		{"not Running", v1alpha1.PhaseSubmitted, nil, flinkGVK, "b", "is Submitted; only a Running runnable can be moved", true, "", false},
		{"moving already", v1alpha1.PhaseRunning, &v1alpha1.Move{From: "a", To: "b", Step: v1alpha1.MoveSavepointAsked}, flinkGVK, "b", "being moved already", true, "", false},
		{"an earlier move ended", v1alpha1.PhaseRunning, &v1alpha1.Move{From: "x", To: "a", Step: v1alpha1.MoveDone}, flinkGVK, "b", "b", false, "savepoint", false},
		{"to itself", v1alpha1.PhaseRunning, nil, flinkGVK, "a", "runs on a already", false, "", true},
		{"not registered", v1alpha1.PhaseRunning, nil, flinkGVK, "z", "cluster z is not registered", false, "", true},
		{"not Ready", v1alpha1.PhaseRunning, nil, flinkGVK, "c", "not Ready", false, "", true},
		{"tainted against it", v1alpha1.PhaseRunning, nil, flinkGVK, "d", v1alpha1.TaintCordon, false, "", true},
		{"outside its placement", v1alpha1.PhaseRunning, nil, flinkGVK, "e", "cluster e cannot take", false, "", true},
		{"lacking what it dependsOn", v1alpha1.PhaseRunning, nil, flinkGVK, "f", "cluster f cannot take", false, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur, attempts := running(c.phase, c.move)
			tr, err := operate.Move(cur, spec, c.gvk, attempts, c.to, cs, "alice", now)
			var state *operate.StateError
			var inelig *operate.IneligibleError
			switch {
			case c.state:
				if !errors.As(err, &state) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want a StateError with %q", err, c.want)
				}
				return
			case c.inelig:
				if !errors.As(err, &inelig) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want an IneligibleError with %q", err, c.want)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			var st v1alpha1.RunnableStatus
			if err := tr.Edit(&st); err != nil {
				t.Fatal(err)
			}
			m := st.Move
			if m.To != c.want || m.From != "a" || m.Step != v1alpha1.MoveAsked || m.Attempt != 1 || m.By != "alice" {
				t.Errorf("move %+v", m)
			}
			if tr.To != v1alpha1.PhaseRunning || !lifecycle.Allowed(v1alpha1.PhaseRunning, tr.To, lifecycle.ByAPI) || tr.Audit == nil ||
				!strings.Contains(tr.Message, c.how) {
				t.Errorf("transition %+v", tr)
			}
		})
	}
}
