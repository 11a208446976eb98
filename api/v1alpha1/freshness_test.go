package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestJudgeFreshness(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(secondsAgo int) *time.Time {
		v := now.Add(-time.Duration(secondsAgo) * time.Second)
		return &v
	}
	for _, c := range []struct {
		name   string
		agent  *AgentStatus
		fresh  bool
		reason string
		text   string // part of the message
	}{
		{"never reported", nil, false, FreshNoAgent, "no agent"},
		{"no heartbeat yet", &AgentStatus{LastEvent: at(1)}, false, FreshNoAgent, "no agent"},
		{"old agent, recent beat", &AgentStatus{LastHeartbeat: at(5)}, true, FreshAgentReporting, "heartbeat 5s ago"},
		{"quiet but reporting: old events and snapshot do not matter",
			&AgentStatus{LastHeartbeat: at(5), LastEvent: at(3600), LastSnapshot: at(65),
				KubeAPI: &AgentKubeAPI{Connected: true, Synced: true}}, true, FreshAgentReporting, "caches current"},
		{"exactly at the limit", &AgentStatus{LastHeartbeat: at(AgentFreshSeconds)}, true, FreshAgentReporting, ""},
		{"silent", &AgentStatus{LastHeartbeat: at(AgentFreshSeconds + 1), KubeAPI: &AgentKubeAPI{Connected: true, Synced: true}},
			false, FreshAgentSilent, "last heartbeat 31s ago"},
		{"silent outweighs unreachable", &AgentStatus{LastHeartbeat: at(300), KubeAPI: &AgentKubeAPI{}}, false, FreshAgentSilent, "5m ago"},
		{"kube-apiserver gone", &AgentStatus{LastHeartbeat: at(2),
			KubeAPI: &AgentKubeAPI{Synced: true, LastContact: at(40), Error: "connection refused"}},
			false, FreshKubeAPIUnreachable, "last answered 40s ago: connection refused"},
		{"kube-apiserver never answered", &AgentStatus{LastHeartbeat: at(2), KubeAPI: &AgentKubeAPI{}},
			false, FreshKubeAPIUnreachable, "since it started"},
		{"starting", &AgentStatus{LastHeartbeat: at(1), KubeAPI: &AgentKubeAPI{Connected: true}}, false, FreshCachesNotSynced, "listing its objects after a restart"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := JudgeFreshness(c.agent, now)
			if f.Fresh != c.fresh || f.Reason != c.reason || !strings.Contains(f.Message, c.text) {
				t.Errorf("got %+v, want fresh %v, reason %s, message with %q", f, c.fresh, c.reason, c.text)
			}
			if f.StaleAfterSeconds != AgentFreshSeconds {
				t.Errorf("staleAfterSeconds %d", f.StaleAfterSeconds)
			}
		})
	}
}

func TestClusterState(t *testing.T) {
	with := func(status metav1.ConditionStatus, reason string) ClusterStatus {
		return ClusterStatus{Conditions: []Condition{{Type: "Other", Status: "True"}, {Type: ConditionReady, Status: status, Reason: reason}}}
	}
	for _, c := range []struct {
		status ClusterStatus
		want   string
	}{
		{ClusterStatus{}, ClusterUnknown},
		{with("True", "ClusterReady"), ClusterReady},
		{with("Unknown", ReasonNotProbedYet), ClusterUnknown},
		{with("Unknown", "APIServerUnreachable"), ClusterNotReady},
		{with("False", "AgentLeaseExpired"), ClusterNotReady},
	} {
		if got := ClusterState(c.status); got != c.want {
			t.Errorf("ClusterState(%+v) = %s, want %s", c.status.Conditions, got, c.want)
		}
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59 * time.Second: "59s", 119 * time.Second: "119s", 2 * time.Minute: "2m",
		119 * time.Minute: "119m", 2 * time.Hour: "2h", 47 * time.Hour: "47h", 72 * time.Hour: "3d",
	} {
		if got := Ago(d); got != want {
			t.Errorf("Ago(%s) = %s, want %s", d, got, want)
		}
	}
}
