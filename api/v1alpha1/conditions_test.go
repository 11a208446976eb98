package v1alpha1

import (
	"strings"
	"testing"
)

// conds renders conditions as "Type=Status/Reason" for comparison.
func conds(cs []Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(out, " ")
}

func TestRunnableConditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Runnable
		want string
	}{
		{"queued", Runnable{Status: RunnableStatus{Phase: PhaseQueued, QueuePosition: 3}},
			"Ready=False/Queued Reconciling=True/Queued"},
		{"submitted", Runnable{Status: RunnableStatus{Phase: PhaseSubmitted, Cluster: "c1"}},
			"Ready=False/Submitted Reconciling=True/Submitted"},
		{"running healthy", Runnable{Status: RunnableStatus{Phase: PhaseRunning, Health: HealthHealthy}},
			"Ready=True/Running"},
		{"running, health not known", Runnable{Status: RunnableStatus{Phase: PhaseRunning}},
			"Ready=False/HealthUnknown"},
		{"running an older generation", Runnable{Metadata: ObjectMeta{Generation: 3}, Status: RunnableStatus{
			Phase: PhaseRunning, Health: HealthHealthy, Attempts: []Attempt{{Number: 1, Generation: 2}}}},
			"Ready=True/Running Reconciling=True/Updating"},
		{"failing over", Runnable{Status: RunnableStatus{Phase: PhaseFailingOver}},
			"Ready=False/FailingOver Reconciling=True/FailingOver"},
		{"succeeded", Runnable{Status: RunnableStatus{Phase: PhaseSucceeded}}, "Ready=True/Succeeded"},
		{"failed", Runnable{Status: RunnableStatus{Phase: PhaseFailed, Message: "BackoffLimitExceeded"}},
			"Ready=False/Failed Stalled=True/Failed"},
		{"suspended", Runnable{Status: RunnableStatus{Phase: PhaseSuspended}}, "Ready=False/Suspended"},
		{"a change waits", Runnable{Status: RunnableStatus{Phase: PhaseRunning, Health: HealthHealthy,
			PendingChange: &PendingChange[RunnableSpec]{Author: "alice", ResourceVersion: "7"}}},
			"Ready=True/Running PendingApproval=True/AwaitingApproval"},
	} {
		if got := conds(RunnableConditions(&tc.r)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDeployableConditions(t *testing.T) {
	synced := func(c string, g int64) DeployableClusterStatus {
		return DeployableClusterStatus{Cluster: c, State: StateSynced, SyncedGeneration: g}
	}
	for _, tc := range []struct {
		name string
		d    Deployable
		want string
	}{
		{"first spec waits", Deployable{}, "Ready=False/PendingApproval"},
		{"no copy yet", Deployable{Status: DeployableStatus{Generation: 1}}, "Ready=False/NotSynced Reconciling=True/NotSynced"},
		{"synced", Deployable{Status: DeployableStatus{Generation: 2, Clusters: []DeployableClusterStatus{synced("a", 2), synced("b", 2)}}},
			"Ready=True/Synced"},
		{"one behind", Deployable{Status: DeployableStatus{Generation: 2, Clusters: []DeployableClusterStatus{synced("a", 2), synced("b", 1)}}},
			"Ready=False/Syncing Reconciling=True/Syncing"},
		{"observed drift", Deployable{Spec: DeployableSpec{Mode: ModeObserve}, Status: DeployableStatus{Generation: 1,
			Clusters: []DeployableClusterStatus{{Cluster: "a", State: StateOutOfSync, SyncedGeneration: 1}}}},
			"Ready=False/Syncing"},
		{"admission refused", Deployable{Status: DeployableStatus{Generation: 1, Clusters: []DeployableClusterStatus{
			synced("a", 1), {Cluster: "b", State: StateError, Reason: "AdmissionDenied", Message: "privileged"}}}},
			"Ready=False/Failed Stalled=True/Failed"},
		{"rollout under way", Deployable{Status: DeployableStatus{Generation: 2, Clusters: []DeployableClusterStatus{synced("a", 2)},
			Rollout: &RolloutStatus{Generation: 2, State: RolloutProgressing, Wave: "canary"}}},
			"Ready=False/Syncing Reconciling=True/Syncing"},
		{"rollout halted", Deployable{Status: DeployableStatus{Generation: 2, Clusters: []DeployableClusterStatus{synced("a", 2)},
			Rollout: &RolloutStatus{Generation: 2, State: RolloutHalted, Message: "cluster a failed"}}},
			"Ready=False/Failed Stalled=True/Failed"},
	} {
		if got := conds(DeployableConditions(&tc.d)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
