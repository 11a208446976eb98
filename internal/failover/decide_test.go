package failover

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

var (
	t0     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	timing = Timing{AgentLease: 30 * time.Second, FencingMargin: 10 * time.Second}
)

func appSpec(consistency, purge string, toleration int64) *v1alpha1.RunnableSpec {
	return &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{
		Consistency: consistency,
		Application: &v1alpha1.ApplicationFailover{TolerationSeconds: &toleration, PurgeMode: purge},
	}}
}

func unhealthyFor(d time.Duration) *v1alpha1.RunnableStatus {
	since := t0.Add(-d)
	return &v1alpha1.RunnableStatus{Health: v1alpha1.HealthUnhealthy, UnhealthySince: &since, Message: "RECONCILING"}
}

func noExecute(key string, added time.Time) corev1.Taint {
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
}

func TestDecide(t *testing.T) {
	heartbeat := t0.Add(-35 * time.Second)
	oldHeartbeat := t0.Add(-41 * time.Second)
	fresh := t0.Add(-5 * time.Second)
	no := false
	tests := []struct {
		name    string
		spec    *v1alpha1.RunnableSpec
		status  *v1alpha1.RunnableStatus
		cluster Cluster
		want    Verdict // Message is checked for a substring only
	}{
		{"healthy stays", appSpec("", "", 60), &v1alpha1.RunnableStatus{Health: v1alpha1.HealthHealthy},
			Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"unhealthy within toleration stays", appSpec("", "", 60), unhealthyFor(59 * time.Second),
			Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"unknown health (user error) never moves", appSpec("", "", 60),
			&v1alpha1.RunnableStatus{Health: v1alpha1.HealthUnknown}, Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"no application failover: unhealthy stays", &v1alpha1.RunnableSpec{}, unhealthyFor(time.Hour),
			Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"unhealthy past toleration, AtMostOne: delete first", appSpec("", v1alpha1.PurgeGracefully, 60), unhealthyFor(60 * time.Second),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, DeleteFirst: true, Purge: v1alpha1.PurgeGracefully, Grace: 600 * time.Second, Message: "tolerationSeconds 60"}},
		{"AtLeastOne gracefully: place first", appSpec(v1alpha1.ConsistencyAtLeastOne, v1alpha1.PurgeGracefully, 60), unhealthyFor(2 * time.Minute),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, Purge: v1alpha1.PurgeGracefully, Grace: 600 * time.Second}},
		{"purge Never keeps the old copy", appSpec("", v1alpha1.PurgeNever, 60), unhealthyFor(2 * time.Minute),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, Purge: v1alpha1.PurgeNever, Grace: 600 * time.Second}},
		{"manual drain on a reachable cluster: delete first", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", Reachable: true, Taints: []corev1.Taint{noExecute("maintenance", t0)}},
			Verdict{Evict: true, Reason: ReasonNoExecuteTaint, DeleteFirst: true, Purge: v1alpha1.PurgeDirectly, Message: "maintenance:NoExecute"}},
		{"tolerated taint stays", &v1alpha1.RunnableSpec{Placement: v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{
			{Key: "maintenance", Operator: corev1.TolerationOpExists}}}}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", Reachable: true, Taints: []corev1.Taint{noExecute("maintenance", t0)}}, Verdict{}},
		{"NoSchedule alone stays", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", Taints: []corev1.Taint{{Key: v1alpha1.TaintUnreachable, Effect: corev1.TaintEffectNoSchedule}}}, Verdict{}},
		{"unreachable, AtMostOne, lease not yet over: waits", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &heartbeat, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Message: "moves at 2026-11-29T12:00:05Z", Waiting: v1alpha1.WaitingFencing, Overridable: true}},
		{"unreachable, AtMostOne, lease and margin over: moves, old copy later", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &oldHeartbeat, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Evict: true, Reason: ReasonClusterUnreachable, Purge: v1alpha1.PurgeDirectly}},
		{"unreachable, no heartbeat ever: the taint's time counts", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0.Add(-39*time.Second))}},
			Verdict{Message: "moves at 2026-11-29T12:00:01Z", Waiting: v1alpha1.WaitingFencing, Overridable: true}},
		{"unreachable, AtMostOne, every agent silent: holds", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &oldHeartbeat, HeartbeatsStale: true, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Message: "is the stream or the ingester down", Waiting: v1alpha1.WaitingHeartbeats, Overridable: true}},
		{"unreachable, AtMostOne, agent alive: nobody stops the copy", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &fresh, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0.Add(-time.Hour))}},
			Verdict{Message: "its agent is alive and renews its lease; while it still reaches", Waiting: v1alpha1.WaitingUnconfirmed, Overridable: true}},
		{"unreachable, AtMostOne, agent alive without its API server", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &fresh, AgentReachesKubeAPI: &no, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0.Add(-time.Hour))}},
			Verdict{Message: "it cannot reach that API server either", Waiting: v1alpha1.WaitingUnconfirmed, Overridable: true}},
		{"unreachable, AtMostOne, agent silent after saying it lost its API server", &v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &oldHeartbeat, AgentReachesKubeAPI: &no, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Message: "said it could not reach that API server, so it cannot have stopped the copy", Waiting: v1alpha1.WaitingUnconfirmed, Overridable: true}},
		{"unreachable, AtMostOne, a person confirmed the copy stopped: moves", &v1alpha1.RunnableSpec{},
			&v1alpha1.RunnableStatus{ConfirmedStopped: &v1alpha1.Confirmation{By: "alice", At: t0, Attempt: 1}},
			Cluster{Name: "b", LastHeartbeat: &fresh, AgentReachesKubeAPI: &no, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Evict: true, Reason: ReasonClusterUnreachable, Purge: v1alpha1.PurgeDirectly, Message: "alice confirmed"}},
		{"unreachable, AtLeastOne, every agent silent: moves", &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Consistency: v1alpha1.ConsistencyAtLeastOne}},
			&v1alpha1.RunnableStatus{},
			Cluster{Name: "b", HeartbeatsStale: true, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Evict: true, Reason: ReasonClusterUnreachable, Purge: v1alpha1.PurgeDirectly}},
		{"unreachable, AtLeastOne: moves at once", &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Consistency: v1alpha1.ConsistencyAtLeastOne}},
			&v1alpha1.RunnableStatus{},
			Cluster{Name: "b", LastHeartbeat: &heartbeat, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}},
			Verdict{Evict: true, Reason: ReasonClusterUnreachable, Purge: v1alpha1.PurgeDirectly}},
		{"agent lease expired, cluster answers: delete first", &v1alpha1.RunnableSpec{}, unhealthyFor(time.Hour),
			Cluster{Name: "b", Reachable: true, Taints: []corev1.Taint{noExecute(v1alpha1.TaintNotReady, t0)}},
			Verdict{Evict: true, Reason: ReasonClusterNotReady, DeleteFirst: true, Purge: v1alpha1.PurgeDirectly}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.spec, tt.status, tt.cluster, t0, timing)
			if !strings.Contains(got.Message, tt.want.Message) {
				t.Errorf("message %q does not contain %q", got.Message, tt.want.Message)
			}
			if tt.want.Evict && got.Message == "" {
				t.Error("an eviction without a message")
			}
			got.Message, tt.want.Message = "", ""
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPreserve(t *testing.T) {
	rules := []v1alpha1.StatePreservationRule{
		{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}"},
		{AliasLabelName: "example.com/restarts", JSONPath: "{.restarts}"},
	}
	status := map[string]any{"jobStatus": map[string]any{"jobId": "44cc5573", "state": "RECONCILING"}, "restarts": int64(3)}
	got, notes := Preserve(rules, status, nil)
	if got["flink.apache.org/job-id"] != "44cc5573" || got["example.com/restarts"] != "3" || len(notes) != 0 {
		t.Fatalf("first failover: got %v, notes %v", got, notes)
	}

	// The next attempt never reported a job id: the previous one stays,
	// and the newer restart count wins.
	got, notes = Preserve(rules, map[string]any{"jobStatus": map[string]any{"state": "CREATED"}, "restarts": int64(5)}, got)
	if got["flink.apache.org/job-id"] != "44cc5573" || got["example.com/restarts"] != "5" {
		t.Fatalf("second failover: got %v", got)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "keeping \"44cc5573\"") {
		t.Fatalf("notes %v do not say the old value was kept", notes)
	}

	// No status observed at all, nothing before: nothing preserved.
	got, notes = Preserve(rules[:1], nil, nil)
	if got != nil || len(notes) != 1 {
		t.Fatalf("no status: got %v, notes %v", got, notes)
	}
}

func TestPrepare(t *testing.T) {
	spec := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{
		Consistency: v1alpha1.ConsistencyAtLeastOne,
		Mutations: []v1alpha1.Mutation{{
			When:  "'flink.apache.org/job-id' in preserved",
			Path:  "spec.job.initialSavepointPath",
			Value: "'s3://checkpoints/' + preserved['flink.apache.org/job-id']",
		}},
	}}
	newObj := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
			"metadata": map[string]any{"name": "wordcount", "labels": map[string]any{"app": "wc"}},
			"spec":     map[string]any{"job": map[string]any{"jarURI": "local:///wc.jar"}},
		}}
	}

	first := newObj()
	if err := Prepare(first, spec, nil); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(first.Object, "spec", "job", "initialSavepointPath"); found {
		t.Error("a mutation applied although nothing was preserved")
	}
	if first.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtLeastOne || first.GetLabels()["app"] != "wc" {
		t.Errorf("labels %v", first.GetLabels())
	}

	next := newObj()
	if err := Prepare(next, spec, map[string]string{"flink.apache.org/job-id": "44cc5573"}); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(next.Object, "spec", "job", "initialSavepointPath"); p != "s3://checkpoints/44cc5573" {
		t.Errorf("initialSavepointPath = %q", p)
	}
	if next.GetLabels()["flink.apache.org/job-id"] != "44cc5573" {
		t.Errorf("alias label missing: %v", next.GetLabels())
	}

	// Without a failover section the object is fenced like AtMostOne.
	plain := newObj()
	if err := Prepare(plain, &v1alpha1.RunnableSpec{}, nil); err != nil {
		t.Fatal(err)
	}
	if plain.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtMostOne {
		t.Errorf("labels %v", plain.GetLabels())
	}

	// A mutation that fails at run time is an error, not a silent skip.
	bad := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{{
		When: "true", Path: "spec.x", Value: "preserved['missing']",
	}}}}
	if err := Prepare(newObj(), bad, map[string]string{}); err == nil || !strings.Contains(err.Error(), "mutations[0].value") {
		t.Errorf("err = %v", err)
	}
}
