package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/api/server"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// TestDrillDryRunCommand: `purser drill dc NAME --dry-run` prints the
// what-if as tables, -o json as the API's report; a DC the farm does not
// have, or no --dry-run, is refused. The API is the real one over a real
// database, the farm written as the agents and the submitter write it.
func TestDrillDryRunCommand(t *testing.T) {
	ctx := context.Background()
	api := newAdminAPI(t, server.Config{DrillSnapshot: controldrill.Snapshotter(controldrill.Options{})})
	st, srv, token := api.st, api.srv, api.token
	for _, c := range []struct{ name, dc string }{{"east-1", "east"}, {"west-1", "west"}} {
		api.post(t, "/api/v1/clusters", strings.NewReplacer("far-away", c.name, "dc-9", c.dc).Replace(unreachableCluster))
	}
	report := func(free string) []byte {
		b, _ := json.Marshal(stream.Capacity{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(free)}})
		return b
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error {
		// Reported after the runnables started: they count in the reports.
		reported := time.Now().Add(time.Minute)
		if err := tx.Agents().RecordCapacity(ctx, "east-1", reported, report("4")); err != nil {
			return err
		}
		if err := tx.Agents().RecordCapacity(ctx, "west-1", reported, report("6")); err != nil {
			return err
		}
		for _, r := range []struct{ name, cluster, cpu string }{{"ingest", "east-1", "2"}, {"score", "east-1", "2"}, {"train", "west-1", "5"}} {
			if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: "team-a", Name: r.name, UID: "uid-" + r.name, Generation: 1,
				Spec: []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job"}}}`), SpecHash: "h", Phase: "Running",
				Cluster: r.cluster, Status: []byte(`{"phase":"Running","cluster":"` + r.cluster + `","requests":{"cpu":"` + r.cpu + `"}}`)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	drill := func(args ...string) (string, error) {
		t.Helper()
		cmd := newDrillCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "--server", srv.URL, "--token", token))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := drill("dc", "east", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^Absorbed: losing dc east is absorbed: 2 runnables move, the last in 1s$`,
		`(?m)^RUNNABLE\s+FROM\s+TO\s+DOWNTIME\s+RESTORE POINT$`,
		`(?m)^team-a/ingest\s+east-1\s+west-1\s+0.5s\s+<none>$`,
		`(?m)^team-a/score\s+east-1\s+west-1\s+1s\s+<none>$`,
		`(?m)^east-1\s+2 -> lost\s+`,
		`(?m)^west-1\s+1 -> 3\s+6 -> 2\s+Unknown -> Unknown$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("purser drill dc east --dry-run: no line matching %s:\n%s", want, out)
		}
	}
	out, err = drill("cluster", "west-1", "--dry-run", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Target      map[string]string
		Verdict     string
		Unplaceable []struct{ Runnable, Reason string }
	}
	// east-1 has 4 CPUs free: train's 5 do not fit.
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Verdict != "Partial" || rep.Target["name"] != "west-1" ||
		len(rep.Unplaceable) != 1 || rep.Unplaceable[0].Runnable != "team-a/train" {
		t.Errorf("purser drill cluster west-1 --dry-run -o json: %v\n%s", err, out)
	}
	get := func(args ...string) string {
		t.Helper()
		cmd := newGetCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "--server", srv.URL, "--token", token))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("purser get %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	out = get("dcs", "-o", "wide")
	for _, want := range []string{
		`(?m)^NAME\s+CLUSTERS\s+ABSORBABLE\s+SHORT\s+VERDICT\s+CLUSTER-LIST\s+MESSAGE$`,
		`(?m)^east\s+1\s+yes\s+<none>\s+Absorbed\s+east-1\s+losing dc east is absorbed`,
		`(?m)^west\s+1\s+no\s+1 runnable \(cpu 5\)\s+Partial\s+west-1\s+losing dc west is not absorbed: 1 of 1 runnables left queued`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("purser get dcs -o wide: no line matching %s:\n%s", want, out)
		}
	}
	if out = get("dc", "-o", "name"); out != "dc/east\ndc/west\n" {
		t.Errorf("purser get dc -o name: %q", out)
	}
	if _, err := drill("dc", "north", "--dry-run"); err == nil || !strings.Contains(err.Error(), "dc=north") {
		t.Errorf("a DC the farm does not have: %v", err)
	}
	// A real drill of a DC whose loss is not absorbed is refused, naming
	// the verdict and the shortage, and nothing is started.
	if _, err := drill("dc", "west"); err == nil || !strings.Contains(err.Error(), "409 Partial") || !strings.Contains(err.Error(), "team-a/train") ||
		!strings.Contains(err.Error(), "force") {
		t.Errorf("a real drill of dc west: %v", err)
	}
	if _, err := drill("dc", "west", "--dry-run", "--force"); err == nil || !strings.Contains(err.Error(), "--force is for a real drill") {
		t.Errorf("--dry-run --force: %v", err)
	}
	if out, err := drill("list"); err != nil || strings.Count(out, "\n") != 1 {
		t.Errorf("purser drill list after a refusal: %v\n%s", err, out)
	}
}
