package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// drillDeployment is a Deployment of team-a; pinned ones may run on
// sandbox-1 only.
func drillDeployment(name string, pinned bool) string {
	placement := ""
	if pinned {
		placement = "  placement: {clusterAffinity: {clusterNames: [sandbox-1]}}\n"
	}
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %[1]s, namespace: team-a}
spec:
%[2]s  template:
    apiVersion: apps/v1
    kind: Deployment
    spec:
      selector: {matchLabels: {app: %[1]s}}
      template:
        metadata: {labels: {app: %[1]s}}
        spec:
          containers: [{name: web, image: nginx, resources: {requests: {cpu: 100m}}}]
`, name, placement)
}

// drillFlinkJob is a Flink job of team-a that a planned move hands over
// by a savepoint.
const drillFlinkJob = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: clicks, namespace: team-a}
spec:
  template:
    apiVersion: flink.apache.org/v1beta1
    kind: FlinkDeployment
    spec:
      image: flink:1.20
      flinkVersion: v1_20
      flinkConfiguration:
        state.checkpoints.dir: s3://checkpoints/clicks
        state.savepoints.dir: s3://savepoints/clicks
      jobManager: {resource: {memory: 1024m, cpu: 0.5}}
      taskManager: {resource: {memory: 1024m, cpu: 0.5}}
      job:
        jarURI: local:///opt/flink/examples/streaming/StateMachineExample.jar
        parallelism: 1
        upgradeMode: savepoint
`

// TestDrillReal is the prediction checked by reality, on three sandbox
// clusters (dc-1, dc-2, dc-3): the what-if of losing dc-1 (two
// Deployments and a Flink job that can go elsewhere, one Deployment
// pinned to sandbox-1) is
// NotAbsorbed, and the real drill refuses to start without --force,
// changing nothing; with --force it cordons sandbox-1 and moves the three
// exactly where the dry run said (the Flink job restored from the
// savepoint its stop wrote), leaving the pinned one where it is, and its
// report says so; its end uncordons sandbox-1 and --move-back brings the
// three back. Every step is in the history.
func TestDrillReal(t *testing.T) {
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	config := filepath.Join(t.TempDir(), "client.yaml")
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "3", "--flink", "--client-config", config)
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	clusterOf := func(name string) string {
		return strings.TrimSpace(me.ok("get", "runnable", name, "-n", "team-a", "-o", "jsonpath={.status.phase} {.status.cluster}"))
	}
	waitOn := func(what string, want map[string]string) {
		t.Helper()
		sandboxtest.Eventually(t, 3*time.Minute, what, func(context.Context) error {
			for name, cluster := range want {
				if got := clusterOf(name); got != "Running "+cluster {
					return fmt.Errorf("%s is %q, want Running on %s", name, got, cluster)
				}
			}
			return nil
		})
	}
	taints := func(cluster string) string {
		return strings.TrimSpace(me.ok("get", "cluster", cluster, "-o", "jsonpath={.spec.taints[*].key}={.spec.taints[*].effect}"))
	}

	// Everything starts on sandbox-1: the others cordoned meanwhile.
	me.ok("cordon", "sandbox-2")
	me.ok("cordon", "sandbox-3")
	for _, n := range []string{"web-1", "web-2", "pinned"} {
		me.with(drillDeployment(n, n == "pinned")).ok("apply", "-f", "-")
	}
	me.with(drillFlinkJob).ok("apply", "-f", "-")
	waitOn("everything runs on sandbox-1", map[string]string{"web-1": "sandbox-1", "web-2": "sandbox-1", "pinned": "sandbox-1", "clicks": "sandbox-1"})
	me.ok("uncordon", "sandbox-2")
	me.ok("uncordon", "sandbox-3")

	var plan v1alpha1.DrillReport
	if err := json.Unmarshal([]byte(me.ok("drill", "dc", "dc-1", "--dry-run", "-o", "json")), &plan); err != nil {
		t.Fatal(err)
	}
	planned := map[string]string{}
	for _, m := range plan.Moves {
		planned[strings.TrimPrefix(m.Runnable, "team-a/")] = m.To
	}
	if plan.Verdict != v1alpha1.DrillNotAbsorbed || len(plan.Moves) != 3 || planned["web-1"] == "" || planned["web-2"] == "" || planned["clicks"] == "" ||
		len(plan.Unplaceable) != 1 || plan.Unplaceable[0].Runnable != "team-a/pinned" || !plan.Unplaceable[0].Never {
		t.Fatalf("the dry run: %+v", plan)
	}

	// Not absorbed: refused without --force, nothing changed.
	matches(t, "a drill without --force", me.fail("drill", "dc", "dc-1"), `409 NotAbsorbed: losing dc dc-1 is not absorbed: .*team-a/pinned.*start it with force`)
	if got := me.ok("drill", "list", "--no-headers"); got != "" {
		t.Fatalf("drills after a refusal: %q", got)
	}
	if got := taints("sandbox-1"); got != "=" {
		t.Fatalf("sandbox-1's taints after a refusal: %q", got)
	}

	out := me.ok("drill", "dc", "dc-1", "--force")
	t.Logf("purser drill dc dc-1 --force:\n%s", out)
	matches(t, "the drill", out, `(?m)^drill 1 started: dc dc-1; cordoned sandbox-1; 3 planned moves, 1 left where they are$`,
		`(?m)^\d moved: team-a/web-1 to `+planned["web-1"]+`, downtime \d+\.\d s$`,
		`(?m)^\d moved: team-a/web-2 to `+planned["web-2"]+`, downtime \d+\.\d s$`,
		`(?m)^\d moved: team-a/clicks to `+planned["clicks"]+`, downtime \d+\.\d s$`,
		`(?m)^drill 1: dc dc-1, Ended`, `(?m)^team-a/pinned\s+sandbox-1\s+<none>\s+<none>\s+NotMoved\s+`,
		`(?m)^3 of 3 planned moves done, 0 failed, 0 under way; 1 unplaceable; 4 as planned;`)
	waitOn("the moves as planned", map[string]string{"web-1": planned["web-1"], "web-2": planned["web-2"], "clicks": planned["clicks"], "pinned": "sandbox-1"})
	if got := taints("sandbox-1"); got != v1alpha1.TaintCordon+"=NoSchedule" {
		t.Fatalf("sandbox-1's taints during the drill: %q", got)
	}

	var d v1alpha1.Drill
	if err := json.Unmarshal([]byte(me.ok("drill", "get", "1", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	actual, stayed := map[string]string{}, []string{}
	for _, o := range d.Status.Runnables {
		n := strings.TrimPrefix(o.Runnable, "team-a/")
		switch o.Step {
		case v1alpha1.MoveDone:
			actual[n] = o.To
			if o.DowntimeSeconds == nil || o.From != "sandbox-1" || (n == "clicks") != (o.RestorePoint != "") {
				t.Errorf("%s's outcome: %+v", n, o)
			}
		case v1alpha1.DrillNotMoved:
			stayed = append(stayed, o.Runnable)
		default:
			t.Errorf("%s's outcome: %+v", n, o)
		}
	}
	if !maps.Equal(actual, planned) || !slices.Equal(stayed, []string{"team-a/pinned"}) || d.Status.State != v1alpha1.DrillEnded ||
		d.Status.Totals.AsPlanned != 4 || d.Status.DurationSeconds <= 0 || d.Spec.Force != true {
		t.Fatalf("the report: moved %v (planned %v), stayed %v: %+v", actual, planned, stayed, d.Status)
	}
	matches(t, "drill list", me.ok("drill", "list"), `(?m)^ID\s+TARGET\s+STATE`, `(?m)^1\s+dc dc-1\s+Ended\s+NotAbsorbed\s+3/3\s+0\s+1\s+`)

	out = me.ok("drill", "end", "1", "--move-back")
	t.Logf("purser drill end 1 --move-back:\n%s", out)
	matches(t, "the end", out, `(?m)^drill 1 ended: uncordoned sandbox-1$`, `(?m)^3 moves back asked$`,
		`(?m)^\d moved: team-a/web-1 to sandbox-1`, `(?m)^moved back 3, 0 failed$`)
	waitOn("the work back", map[string]string{"web-1": "sandbox-1", "web-2": "sandbox-1", "clicks": "sandbox-1", "pinned": "sandbox-1"})
	if got := taints("sandbox-1"); got != "=" {
		t.Fatalf("sandbox-1's taints after the end: %q", got)
	}
	matches(t, "a second end", me.fail("drill", "end", "1"), `409 Conflict: drill 1 was ended already`)
	matches(t, "the history", me.ok("history", "--limit", "200"), `\s+drill-start\s+Drill/1`, `\s+drill-move\s+Runnable/team-a/web-1`,
		`\s+drill-ended\s+Drill/1`, `\s+drill-end\s+Drill/1`, `\s+drill-move-back\s+Runnable/team-a/web-2`)
	stopUp(t, up)
}
