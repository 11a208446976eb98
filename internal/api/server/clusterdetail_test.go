package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// A tenant sees a cluster's condition, reason and times, never the member
// API's address or the transport's error; an admin sees both.
func TestClusterDetailForTenants(t *testing.T) {
	const leak = "dial tcp 10.0.0.7:6443: connect: connection refused"
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	beat := now.Add(-3 * time.Second)
	fresh := store.AgentFreshness{Cluster: "dc1", LastHeartbeat: &beat,
		KubeAPI: []byte(`{"connected": false, "synced": true, "error": "` + leak + `"}`)}
	since := now.Add(-time.Minute)
	status := func() v1alpha1.ClusterStatus {
		return v1alpha1.ClusterStatus{
			Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: "False", Reason: "Unreachable",
				LastTransitionTime: since, Message: "probe of https://10.0.0.7:6443/readyz: " + leak}},
			Views: []v1alpha1.ClusterView{{DC: "dc1", Outcome: "unreachable", Detail: leak, ObservedAt: now, FailingSince: &since}},
		}
	}
	for _, detail := range []bool{true, false} {
		st := status()
		st.Agent = agentStatus(fresh, now, detail)
		if !detail {
			hideClusterDetail(&st)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if shown := strings.Contains(string(b), "10.0.0.7"); shown != detail {
			t.Errorf("detail=%v: the address shown: %v in %s", detail, shown, b)
		}
		c := st.Conditions[0]
		if c.Type != v1alpha1.ConditionReady || c.Status != "False" || c.Reason != "Unreachable" || !c.LastTransitionTime.Equal(since) {
			t.Errorf("detail=%v: the condition lost its type, status, reason or time: %+v", detail, c)
		}
		v := st.Views[0]
		if v.Outcome != "unreachable" || !v.ObservedAt.Equal(now) || v.FailingSince == nil {
			t.Errorf("detail=%v: the view lost its outcome or times: %+v", detail, v)
		}
		f := st.Agent.Freshness
		if f.Fresh || f.Reason != v1alpha1.FreshKubeAPIUnreachable || !strings.Contains(f.Message, "cannot reach its kube-apiserver") {
			t.Errorf("detail=%v: the freshness lost its judgement: %+v", detail, f)
		}
	}
}
