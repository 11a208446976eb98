package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/compose/up"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/domain/placement"
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

// The caps per user under /k8s reach the API's configuration from purser
// api and purser up alike; a negative one is refused before anything
// starts.
func TestKubeLimitFlags(t *testing.T) {
	cfg := splitConfig(t, &apiFlags{}, "--kube-watches-per-user", "3", "--kube-requests-per-user", "7")
	if cfg.API.KubeWatchesPerUser != 3 || cfg.API.KubeRequestsPerUser != 7 {
		t.Errorf("purser api: %d watches, %d requests", cfg.API.KubeWatchesPerUser, cfg.API.KubeRequestsPerUser)
	}
	var f apiFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.ParseFlags([]string{"--kube-watches-per-user", "-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.config(); err == nil || !strings.Contains(err.Error(), "--kube-watches-per-user") {
		t.Errorf("purser api --kube-watches-per-user -1: %v", err)
	}
	if err := checkUpFlags(up.Config{KubeRequestsPerUser: -1}); err == nil || !strings.Contains(err.Error(), "--kube-requests-per-user") {
		t.Errorf("purser up --kube-requests-per-user -1: %v", err)
	}
	upCfg := up.Compose(up.Config{KubeWatchesPerUser: 3, KubeRequestsPerUser: 7}, t.TempDir())
	if upCfg.API.KubeWatchesPerUser != 3 || upCfg.API.KubeRequestsPerUser != 7 {
		t.Errorf("purser up: %d watches, %d requests", upCfg.API.KubeWatchesPerUser, upCfg.API.KubeRequestsPerUser)
	}
}

// TestDrillFlags: purser api weighs the drills' what-if as the controller
// and the submitter it runs beside are configured, and refuses a rate
// that would time nothing.
func TestDrillFlags(t *testing.T) {
	cfg := splitConfig(t, &apiFlags{}, "--drill-zone-label", "topology.kubernetes.io/region", "--drill-eviction-rate", "5",
		"--drill-secondary-eviction-rate", "0.5", "--drill-best-fit")
	d := cfg.API.Drill
	if d.ZoneLabel != "topology.kubernetes.io/region" || d.EvictionRate != 5 || d.ZoneRate != 0.5 || d.Score != placement.BestFit {
		t.Errorf("purser api: drill config %+v", d)
	}
	if d := splitConfig(t, &apiFlags{}).API.Drill; d.ZoneLabel != "dc" || d.EvictionRate != failover.DefaultEvictionRate ||
		d.ZoneRate != failover.DefaultSecondaryEvictionRate || d.Score != "" {
		t.Errorf("purser api: default drill config %+v", d)
	}
	var f apiFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.ParseFlags([]string{"--drill-eviction-rate", "0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.config(); err == nil || !strings.Contains(err.Error(), "--drill-eviction-rate") {
		t.Errorf("purser api --drill-eviction-rate 0: %v", err)
	}
}
