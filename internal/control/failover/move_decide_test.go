package failover_test

import (
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/failover"
)

func TestDecideMove(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	asked := now.Add(-time.Minute)
	long := now.Add(-10 * time.Minute)
	status := func(job, upgradeSP, err string) map[string]any {
		s := map[string]any{"jobStatus": map[string]any{"state": job, "jobId": "0123456789abcdef0123456789abcdef",
			"upgradeSavepointPath": upgradeSP}}
		if err != "" {
			s["error"] = err
		}
		return s
	}
	st := func(step string, at *time.Time, result map[string]any) *v1alpha1.RunnableStatus {
		return &v1alpha1.RunnableStatus{Result: result,
			Move: &v1alpha1.Move{From: "a", To: "b", Step: step, SavepointBefore: "s3://sp/savepoint-012345-old", SavepointAskedAt: at}}
	}
	healthy := now
	failed := `{"type":"org.apache.flink.kubernetes.operator.exception.UpgradeFailureException","message":"Savepoint Error","additionalMetadata":{"reason":"SavepointError"}}`
	cases := []struct {
		name      string
		st        *v1alpha1.RunnableStatus
		phase     v1alpha1.Phase
		cluster   string
		savepoint bool
		want      failover.MoveStep
		path      string
	}{
		{"no move", &v1alpha1.RunnableStatus{}, v1alpha1.PhaseRunning, "a", true, failover.MoveNotMine, ""},
		{"a move that ended", &v1alpha1.RunnableStatus{Move: &v1alpha1.Move{Step: v1alpha1.MoveDone}}, v1alpha1.PhaseRunning, "b", true, failover.MoveNotMine, ""},
		{"asked: a Flink job stops with a savepoint", st(v1alpha1.MoveAsked, nil, nil), v1alpha1.PhaseRunning, "a", true, failover.MoveAskStop, ""},
		{"asked: another kind leaves as a failover does", st(v1alpha1.MoveAsked, nil, nil), v1alpha1.PhaseRunning, "a", false, failover.MoveEvict, ""},
		{"asked, but it left meanwhile", st(v1alpha1.MoveAsked, nil, nil), v1alpha1.PhaseQueued, "", true, failover.MoveAbandon, ""},
		{"the job still runs: wait", st(v1alpha1.MoveSavepointAsked, &asked, status("RUNNING", "s3://sp/savepoint-012345-old", "")), v1alpha1.PhaseRunning, "a", true, failover.MoveWait, ""},
		{"stopped, but only the old savepoint known: wait", st(v1alpha1.MoveSavepointAsked, &asked, status("FINISHED", "s3://sp/savepoint-012345-old", "")), v1alpha1.PhaseRunning, "a", true, failover.MoveWait, ""},
		{"a new savepoint, the job still RUNNING: wait", st(v1alpha1.MoveSavepointAsked, &asked, status("RUNNING", "s3://sp/savepoint-012345-new", "")), v1alpha1.PhaseRunning, "a", true, failover.MoveWait, ""},
		{"stopped with a new savepoint: hand over exactly it", st(v1alpha1.MoveSavepointAsked, &asked, status("FINISHED", "s3://sp/savepoint-012345-new", "")), v1alpha1.PhaseRunning, "a", true, failover.MoveHandOver, "s3://sp/savepoint-012345-new"},
		{"the last-state placeholder is no savepoint", st(v1alpha1.MoveSavepointAsked, &asked, status("FINISHED", "KUBERNETES_OPERATOR_LAST_STATE", "")), v1alpha1.PhaseRunning, "a", true, failover.MoveWait, ""},
		{"the savepoint failed, the job runs: put back", st(v1alpha1.MoveSavepointAsked, &asked, status("RUNNING", "s3://sp/savepoint-012345-old", failed)), v1alpha1.PhaseRunning, "a", true, failover.MovePutBack, ""},
		{"no savepoint in time: put back", st(v1alpha1.MoveSavepointAsked, &long, status("RUNNING", "", "")), v1alpha1.PhaseRunning, "a", true, failover.MovePutBack, ""},
		{"the copy is not running yet", st(v1alpha1.MoveCopyStarting, &asked, nil), v1alpha1.PhaseSubmitted, "b", true, failover.MoveWait, ""},
		{"the copy runs on the target", &v1alpha1.RunnableStatus{HealthySince: &healthy, Move: &v1alpha1.Move{From: "a", To: "b", Step: v1alpha1.MoveCopyStarting}}, v1alpha1.PhaseRunning, "b", true, failover.MoveFinish, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := failover.DecideMove(c.st, c.phase, c.cluster, c.savepoint, now, 5*time.Minute)
			if d.Step != c.want || d.Savepoint != c.path {
				t.Errorf("DecideMove = %+v, want step %d, savepoint %q", d, c.want, c.path)
			}
			if d.Step == failover.MovePutBack && d.Why == "" {
				t.Error("a put-back without a reason")
			}
		})
	}
}
