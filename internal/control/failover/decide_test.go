package failover

import (
	"reflect"
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

// unhealthyFor is an attempt that ran Healthy once and has been
// Unhealthy for d.
func unhealthyFor(d time.Duration) *v1alpha1.RunnableStatus {
	st := startingFor(d)
	ran := t0.Add(-d - time.Minute)
	st.HealthySince = &ran
	return st
}

// startingFor is an attempt that has been Unhealthy for d since it
// started, never Healthy.
func startingFor(d time.Duration) *v1alpha1.RunnableStatus {
	since := t0.Add(-d)
	return &v1alpha1.RunnableStatus{Health: v1alpha1.HealthUnhealthy, UnhealthySince: &since, Message: "RECONCILING"}
}

func withInitial(spec *v1alpha1.RunnableSpec, seconds int64) *v1alpha1.RunnableSpec {
	spec.Failover.Application.InitialTolerationSeconds = &seconds
	return spec
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
		// A new copy that has not run yet gets the initial toleration:
		// never evicted for being empty while it starts (Karmada #6233).
		{"starting within the initial toleration stays", appSpec("", "", 60), startingFor(5 * time.Minute),
			Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"starting past the default initial toleration moves", appSpec("", v1alpha1.PurgeDirectly, 60), startingFor(10 * time.Minute),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, DeleteFirst: true, Purge: v1alpha1.PurgeDirectly, Grace: 600 * time.Second, Message: "initialTolerationSeconds (it has not run Healthy yet) 600"}},
		{"explicit initial toleration", withInitial(appSpec("", v1alpha1.PurgeDirectly, 60), 90), startingFor(90 * time.Second),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, DeleteFirst: true, Purge: v1alpha1.PurgeDirectly, Grace: 600 * time.Second, Message: "initialTolerationSeconds"}},
		{"explicit initial toleration not yet over", withInitial(appSpec("", v1alpha1.PurgeDirectly, 60), 90), startingFor(89 * time.Second),
			Cluster{Name: "b", Reachable: true}, Verdict{}},
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
			Verdict{Evict: true, Reason: ReasonClusterUnreachable, Purge: v1alpha1.PurgeDirectly, TrustsFencing: true}},
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
			if !got.Evict && got.Message == "" && tt.status.UnhealthySince != nil && tt.status.Health == v1alpha1.HealthUnhealthy && appFailover(tt.spec) != nil {
				// Within the toleration: the verdict says when it ends.
				if got.Until.IsZero() || !got.Until.After(t0) {
					t.Errorf("Until %v, want the end of the toleration after %v", got.Until, t0)
				}
			}
			got.Until = time.Time{}
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
	c := Preserve(rules, status, nil, nil, nil, 1, true)
	if c.Preserved["flink.apache.org/job-id"] != "44cc5573" || c.Preserved["example.com/restarts"] != "3" || len(c.Notes) != 0 {
		t.Fatalf("first failover: %+v", c)
	}

	// The next attempt ran but never reported a job id: the previous one
	// stays, and the newer restart count wins.
	got := Preserve(rules, map[string]any{"jobStatus": map[string]any{"state": "CREATED"}, "restarts": int64(5)}, c.Preserved, nil, nil, 2, true)
	if got.Preserved["flink.apache.org/job-id"] != "44cc5573" || got.Preserved["example.com/restarts"] != "5" {
		t.Fatalf("second failover: %+v", got)
	}
	if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "keeping \"44cc5573\"") {
		t.Fatalf("notes %v do not say the old value was kept", got.Notes)
	}

	// No status observed at all, nothing before: nothing preserved.
	got = Preserve(rules[:1], nil, nil, nil, nil, 1, true)
	if got.Preserved != nil || len(got.Notes) != 1 {
		t.Fatalf("no status: %+v", got)
	}
}

// TestPreserveOnlyProvenState is Karmada #6232: an attempt that never ran
// Healthy reports a new job id (and restore point) of a job with no
// state; the next attempt must still restore the earlier, proven one.
func TestPreserveOnlyProvenState(t *testing.T) {
	rules := []v1alpha1.StatePreservationRule{{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}"}}
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	p1 := &v1alpha1.RestorePoint{Path: "s3://cp/aaaa/chk-7", Kind: v1alpha1.RestoreCheckpoint, JobID: "aaaa", TakenAt: at(0), Attempt: 1}
	status := func(id string) map[string]any {
		return map[string]any{"jobStatus": map[string]any{"jobId": id, "state": "RECONCILING"}}
	}
	tests := []struct {
		name       string
		previous   map[string]string
		prevPoint  *v1alpha1.RestorePoint
		status     map[string]any
		candidates []v1alpha1.RestorePoint
		proven     bool
		wantID     string
		wantPoint  string
		wantNote   string
		wantReport map[string]string
	}{
		{"proven first attempt carries its job id and restore point", nil, nil, status("aaaa"),
			[]v1alpha1.RestorePoint{*p1}, true, "aaaa", "s3://cp/aaaa/chk-7", "", map[string]string{"flink.apache.org/job-id": "aaaa", "restorePath": "s3://cp/aaaa/chk-7"}},
		{"never healthy: the new job id is reported, not carried", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			nil, false, "aaaa", "s3://cp/aaaa/chk-7", "attempt 2 never ran Healthy", map[string]string{"flink.apache.org/job-id": "bbbb"}},
		{"never healthy, even with a restore point of its own", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://cp/bbbb/chk-1", TakenAt: at(5)}}, false, "aaaa", "s3://cp/aaaa/chk-7", "never ran Healthy", nil},
		{"proven: a newer restore point replaces the older", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://cp/bbbb/chk-2", TakenAt: at(5)}}, true, "bbbb", "s3://cp/bbbb/chk-2", "", nil},
		{"proven: an older restore point does not", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://sp/old", TakenAt: at(-5)}}, true, "bbbb", "s3://cp/aaaa/chk-7", "is not newer than", nil},
		{"the newest of several candidates", nil, nil, status("cccc"),
			[]v1alpha1.RestorePoint{{Path: "s3://sp/savepoint-cccc-1", TakenAt: at(1)}, {Path: "s3://cp/cccc/chk-9", TakenAt: at(2)}}, true, "cccc", "s3://cp/cccc/chk-9", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Preserve(rules, tt.status, tt.previous, tt.prevPoint, tt.candidates, 2, tt.proven)
			if c.Preserved["flink.apache.org/job-id"] != tt.wantID {
				t.Errorf("job id %q, want %q", c.Preserved["flink.apache.org/job-id"], tt.wantID)
			}
			if got := ""; c.RestorePoint != nil {
				got = c.RestorePoint.Path
				if got != tt.wantPoint {
					t.Errorf("restore point %q, want %q", got, tt.wantPoint)
				}
			} else if tt.wantPoint != "" {
				t.Errorf("no restore point, want %q", tt.wantPoint)
			}
			note := strings.Join(c.Notes, "; ")
			if (tt.wantNote == "") != (note == "") || !strings.Contains(note, tt.wantNote) {
				t.Errorf("notes %q, want %q", note, tt.wantNote)
			}
			if tt.wantReport != nil && !reflect.DeepEqual(c.Reported, tt.wantReport) {
				t.Errorf("reported %v, want %v", c.Reported, tt.wantReport)
			}
		})
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
	if err := Prepare(first, spec, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(first.Object, "spec", "job", "initialSavepointPath"); found {
		t.Error("a mutation applied although nothing was preserved")
	}
	if first.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtLeastOne || first.GetLabels()["app"] != "wc" {
		t.Errorf("labels %v", first.GetLabels())
	}

	next := newObj()
	if err := Prepare(next, spec, map[string]string{"flink.apache.org/job-id": "44cc5573"}, ""); err != nil {
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
	if err := Prepare(plain, &v1alpha1.RunnableSpec{}, nil, ""); err != nil {
		t.Fatal(err)
	}
	if plain.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtMostOne {
		t.Errorf("labels %v", plain.GetLabels())
	}

	// A mutation that fails at run time is an error, not a silent skip.
	bad := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{{
		When: "true", Path: "spec.x", Value: "preserved['missing']",
	}}}}
	if err := Prepare(newObj(), bad, map[string]string{}, ""); err == nil || !strings.Contains(err.Error(), "mutations[0].value") {
		t.Errorf("err = %v", err)
	}

	// The example's mutation: restore from the exact restore point carried.
	exact := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{{
		When: "restorePath != ''", Path: "spec.job.initialSavepointPath", Value: "restorePath",
	}}}}
	restored := newObj()
	if err := Prepare(restored, exact, nil, "s3://cp/44cc5573/chk-42"); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(restored.Object, "spec", "job", "initialSavepointPath"); p != "s3://cp/44cc5573/chk-42" {
		t.Errorf("initialSavepointPath = %q", p)
	}
	fresh := newObj()
	if err := Prepare(fresh, exact, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(fresh.Object, "spec", "job", "initialSavepointPath"); found {
		t.Error("restored from nothing")
	}
}

// A create retried across a partition can land after the agent fenced
// what it knew: an AtMostOne move that trusts the fencing waits the margin
// after the last moment such a create can take effect.
func TestHoldLateCreate(t *testing.T) {
	oldHeartbeat := t0.Add(-41 * time.Second)
	c := Cluster{Name: "b", LastHeartbeat: &oldHeartbeat, Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, t0)}}
	v := Decide(&v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{}, c, t0, timing)
	if !v.Evict || !v.TrustsFencing {
		t.Fatalf("verdict %+v, want an eviction that trusts the fencing", v)
	}
	landed := t0.Add(-5 * time.Second) // the margin is 10 s
	hold := HoldLateCreate(v, c, 1, &landed, t0, timing)
	if hold == nil {
		t.Fatal("moves 5 s after a create could still land, within the margin")
	}
	if hold.Evict || hold.Waiting != v1alpha1.WaitingFencing || !hold.Overridable || !hold.Until.Equal(t0.Add(5*time.Second)) {
		t.Errorf("hold %+v, want a fencing wait until %s", hold, t0.Add(5*time.Second))
	}
	for _, want := range []string{"a create of attempt 1 was sent to b", "moves at 2026-11-29T12:00:05Z"} {
		if !strings.Contains(hold.Message, want) {
			t.Errorf("message %q lacks %q", hold.Message, want)
		}
	}
	if h := HoldLateCreate(v, c, 1, &landed, t0.Add(5*time.Second), timing); h != nil {
		t.Errorf("still holds once the margin after the landing is over: %+v", h)
	}
	if h := HoldLateCreate(v, c, 1, nil, t0, timing); h != nil {
		t.Errorf("holds with no create sent: %+v", h)
	}
	// Verdicts that do not trust the fencing (the cluster answers, so the
	// old copy is deleted first; or a person confirmed it stopped) never
	// wait for a create.
	reachable := c
	reachable.Reachable = true
	confirmed := &v1alpha1.RunnableStatus{ConfirmedStopped: &v1alpha1.Confirmation{By: "alice", At: t0, Attempt: 1}}
	atLeastOne := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Consistency: v1alpha1.ConsistencyAtLeastOne}}
	for name, v := range map[string]Verdict{
		"reachable":  Decide(&v1alpha1.RunnableSpec{}, &v1alpha1.RunnableStatus{}, reachable, t0, timing),
		"confirmed":  Decide(&v1alpha1.RunnableSpec{}, confirmed, c, t0, timing),
		"AtLeastOne": Decide(atLeastOne, &v1alpha1.RunnableStatus{}, c, t0, timing),
	} {
		if !v.Evict || v.TrustsFencing || HoldLateCreate(v, c, 1, &landed, t0, timing) != nil {
			t.Errorf("%s: verdict %+v waits for a late create", name, v)
		}
	}
}
