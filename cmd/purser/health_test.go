package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `purser health -f` prints one line per object, as docs/api.md says, and
// takes CEL rules for kinds it does not know.
func TestHealthCommand(t *testing.T) {
	dir := t.TempDir()
	objects := filepath.Join(dir, "objects.yaml")
	writeFile(t, objects, `apiVersion: batch/v1
kind: Job
metadata: {name: nightly}
status:
  failed: 1
  conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded, message: "Job has reached the specified backoff limit"}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
status: {ok: true}
`)
	rules := filepath.Join(dir, "rules.yaml")
	writeFile(t, rules, `healthRules:
- apiVersion: example.com/v1
  kind: Widget
  health: "object.status.ok ? 'Healthy' : 'Unhealthy'"
  phase: "'Running'"
`)

	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("purser %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	out := run("health", "-f", objects)
	if !strings.Contains(out, "Job/nightly Unhealthy Failed") || !strings.Contains(out, "Widget/w Unknown") {
		t.Fatalf("without rules:\n%s", out)
	}
	out = run("health", "-f", objects, "--rules", rules)
	if !strings.Contains(out, "Widget/w Healthy Running") {
		t.Fatalf("with rules:\n%s", out)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
