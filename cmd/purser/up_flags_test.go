package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/compose/up"
)

// --flink runs in the sandbox clusters, so it needs --sandbox; --help says
// that the operator is a simulator.
func TestUpFlinkFlag(t *testing.T) {
	if err := checkUpFlags(up.Config{Flink: true}); err == nil || !strings.Contains(err.Error(), "give --sandbox N too") {
		t.Fatalf("--flink without --sandbox: %v", err)
	}
	if err := checkUpFlags(up.Config{Flink: true, Sandbox: 2}); err != nil {
		t.Fatal(err)
	}
	if err := checkUpFlags(up.Config{Sandbox: -1}); err == nil {
		t.Fatal("--sandbox -1 accepted")
	}
	for _, args := range [][]string{{"up", "--help"}, {"sandbox", "flink", "fail", "--help"}, {"sandbox", "stop", "--help"}} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{
			"up":      {"--flink", "SIMULATOR of the Apache Flink Kubernetes Operator", "DIR/flink-storage", "purser sandbox stop NAME"},
			"sandbox": {"control.sock"},
		}[args[0]]
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("purser %s lacks %q:\n%s", strings.Join(args, " "), w, out.String())
			}
		}
	}
	root := newRootCommand()
	root.SetArgs([]string{"sandbox", "flink", "fail", "clickstream", "--data-dir", t.TempDir()})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "want NAMESPACE/NAME") {
		t.Fatalf("flink fail without a namespace: %v", err)
	}
	root = newRootCommand()
	root.SetArgs([]string{"sandbox", "flink", "fail", "team-a/clickstream", "--fault", "Boom", "--data-dir", t.TempDir()})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "known: Reconciling, ImagePullBackOff, FailedJob") {
		t.Fatalf("an unknown fault: %v", err)
	}
}
