package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Placement policies through the command line against `purser up`:
// apply (created, unchanged), get with what each selects, describe,
// delete; the farm's are cluster-scoped.
func TestCLIPlacementPolicies(t *testing.T) {
	t.Parallel() // no clusters
	bin := buildPurser(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "client.yaml")
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	up, _ := startUp(t, bin, filepath.Join(dir, "farm"), config)
	defer stopUp(t, up)

	matches(t, "apply", me.ok("apply", "-f", "examples/placementpolicy-flink.yaml"), `^placementpolicy/team-a/streaming created`)
	matches(t, "apply again", me.ok("apply", "-f", "examples/placementpolicy-flink.yaml"), `^placementpolicy/team-a/streaming unchanged`)
	matches(t, "get", me.ok("get", "pp", "-n", "team-a"),
		`(?m)^NAME\s+SELECTS\s+PRIORITY\s+AGE$`, `(?m)^streaming\s+FlinkDeployment\.flink\.apache\.org \(labels\)\s+0\s+`)
	farm := `apiVersion: purser.io/v1alpha1
kind: ClusterPlacementPolicy
metadata: {name: jobs}
spec:
  resourceSelectors: [{apiVersion: batch/v1, kind: Job, name: nightly}]
  priority: 5
  runnable: {failover: {consistency: AtLeastOne}}
`
	matches(t, "apply the farm's", me.with(farm).ok("apply", "-f", "-"), `^clusterplacementpolicy/jobs created`)
	matches(t, "get the farm's", me.ok("get", "clusterplacementpolicies"), `(?m)^jobs\s+Job\.batch/nightly\s+5\s+`)
	if out := me.with(strings.Replace(farm, "apiVersion: batch/v1, kind: Job,", "apiVersion: purser.io/v1alpha1, kind: Runnable,", 1)).fail("apply", "-f", "-"); !strings.Contains(out, "spec.resourceSelectors[0]") {
		t.Fatalf("a policy of purser's own kind: %s", out)
	}
	matches(t, "delete", me.ok("delete", "pp", "streaming", "-n", "team-a"), `placementpolicy/team-a/streaming removed`)
	if out := me.fail("get", "pp", "streaming", "-n", "team-a"); !strings.Contains(out, "not found") {
		t.Fatalf("get after delete: %s", out)
	}
}
