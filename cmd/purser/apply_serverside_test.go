package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIServerSideApply: `purser apply --server-side` writes through
// /k8s by server-side apply: the objects it applies belong to its field
// manager, another manager's change of the same field is a conflict naming
// the owner until --force-conflicts, and a kind /k8s does not serve so is
// refused naming the way that works.
func TestCLIServerSideApply(t *testing.T) {
	t.Parallel() // no clusters
	bin := buildPurser(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "client.yaml")
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	up, _ := startUp(t, bin, filepath.Join(dir, "farm"), config)
	defer stopUp(t, up)

	cm := `apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: settings, namespace: team-a}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings}
    data: {level: info}
`
	matches(t, "apply", me.with(cm).ok("apply", "--server-side", "--field-manager", "ci", "-f", "-"),
		`^deployable/team-a/settings serverside-applied`)
	debug := strings.Replace(cm, "level: info", "level: debug", 1)
	if out := me.with(debug).fail("apply", "--server-side", "--field-manager", "ops", "-f", "-"); !strings.Contains(out, `conflict with "ci"`) {
		t.Fatalf("another manager's change: %s", out)
	}
	if out := me.ok("get", "deployable", "settings", "-n", "team-a", "-o", "yaml"); !strings.Contains(out, "level: info") {
		t.Fatalf("the deployable after the conflict:\n%s", out)
	}
	matches(t, "forced", me.with(debug).ok("apply", "--server-side", "--field-manager", "ops", "--force-conflicts", "-f", "-"),
		`^deployable/team-a/settings serverside-applied`)
	if out := me.ok("get", "deployable", "settings", "-n", "team-a", "-o", "yaml"); !strings.Contains(out, "level: debug") {
		t.Fatalf("the deployable after the forced apply:\n%s", out)
	}
	if out := me.with(cm).fail("apply", "--force-conflicts", "-f", "-"); !strings.Contains(out, "go with --server-side") {
		t.Fatalf("--force-conflicts alone: %s", out)
	}
	schedule := `apiVersion: purser.io/v1alpha1
kind: Schedule
metadata: {name: nightly, namespace: team-a}
spec: {schedule: "0 2 * * *"}
`
	if out := me.with(schedule).fail("apply", "--server-side", "-f", "-"); !strings.Contains(out, "apply it without --server-side") {
		t.Fatalf("a schedule by server-side apply: %s", out)
	}
}
