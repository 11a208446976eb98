package failover

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

var (
	t0     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	timing = Timing{AgentLease: 30 * time.Second, FencingMargin: 10 * time.Second, NoExecuteGrace: 40 * time.Second}
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

// unobservedFor is an attempt whose object its controller has not taken
// up for d: health Unknown, the toleration's clock running.
func unobservedFor(d time.Duration) *v1alpha1.RunnableStatus {
	st := startingFor(d)
	st.Health = v1alpha1.HealthUnknown
	return st
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
		// An object no controller takes up (a cluster whose operator is
		// gone) is Unknown, not Unhealthy, yet moves once the initial
		// toleration is over, and says why.
		{"not taken up within the initial toleration stays", withInitial(appSpec("", v1alpha1.PurgeDirectly, 60), 90), unobservedFor(89 * time.Second),
			Cluster{Name: "b", Reachable: true}, Verdict{}},
		{"not taken up past the initial toleration moves", withInitial(appSpec("", v1alpha1.PurgeDirectly, 60), 90), unobservedFor(90 * time.Second),
			Cluster{Name: "b", Reachable: true},
			Verdict{Evict: true, Reason: ReasonApplicationUnhealthy, DeleteFirst: true, Purge: v1alpha1.PurgeDirectly, Grace: 600 * time.Second,
				Message: "not taken up by its controller on b (no status written) since 2026-11-29T11:58:30Z, longer than initialTolerationSeconds"}},
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
		// Not Ready, not tainted NoExecute yet: nothing moves, what it
		// does is not known, and the message says what purser waits for.
		{"not Ready within the grace: health unknown", appSpec(v1alpha1.ConsistencyAtLeastOne, "", 60), &v1alpha1.RunnableStatus{Health: v1alpha1.HealthHealthy},
			Cluster{Name: "b", Taints: []corev1.Taint{{Key: v1alpha1.TaintUnreachable, Effect: corev1.TaintEffectNoSchedule}},
				NotReady: &v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "APIServerUnreachable", LastTransitionTime: t0.Add(-10 * time.Second)}},
			Verdict{Waiting: v1alpha1.WaitingClusterNotReady, HealthUnknown: true,
				Message: "cluster b is not Ready (APIServerUnreachable) since 2026-11-29T11:59:50Z, so what the runnable does there is not known; if the cluster is still not Ready at 2026-11-29T12:00:30Z it is tainted NoExecute and the runnable moves"}},
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
