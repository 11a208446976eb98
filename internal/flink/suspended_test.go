package flink

import (
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
)

// A FlinkDeployment the user suspended, whose status is minimal (no
// lifecycleState, no JobManager status, no reconciliation status: older
// operators, or a status written by hand), is judged by its spec and its
// job state as the operator's CommonStatus.getLifecycleState would judge
// it: suspended, which is what was asked, not Unhealthy. A job that
// still runs, or a spec that asks for running, is not taken for one.
func TestSuspendedWithMinimalStatus(t *testing.T) {
	obj := func(state string, status map[string]any) map[string]any {
		job := map[string]any{"jarURI": "local:///opt/flink/job.jar", "upgradeMode": "savepoint"}
		if state != "" {
			job["state"] = state
		}
		return map[string]any{
			"apiVersion": APIVersion, "kind": KindDeployment,
			"spec":   map[string]any{"job": job},
			"status": status,
		}
	}
	jobState := func(s string) map[string]any { return map[string]any{"jobStatus": map[string]any{"state": s}} }
	cases := []struct {
		name   string
		obj    map[string]any
		health v1alpha1.Health
	}{
		{"suspended, job SUSPENDED", obj("suspended", jobState("SUSPENDED")), v1alpha1.HealthHealthy},
		{"suspended, job FINISHED", obj("suspended", jobState("FINISHED")), v1alpha1.HealthHealthy},
		{"suspended, job CANCELED", obj("suspended", jobState("CANCELED")), v1alpha1.HealthHealthy},
		{"running asked, job SUSPENDED", obj("", jobState("SUSPENDED")), v1alpha1.HealthUnhealthy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := JudgeDeployment(c.obj)
			if got.Health != c.health {
				t.Fatalf("JudgeDeployment = %+v, want health %s", got, c.health)
			}
			if c.health == v1alpha1.HealthHealthy && got.Phase != PhasePending {
				t.Fatalf("JudgeDeployment = %+v, want phase %s", got, PhasePending)
			}
		})
	}
}
