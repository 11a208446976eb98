// Package soak runs purser split into its components, as it is deployed
// beyond one machine (test/soak/farm), under a steady load while a fault
// injector kills its processes, NATS nodes, kube-apiservers and agents,
// and then checks the invariants of docs/architecture.md. `make soak` runs it alone
// and verbose; -soak.duration=30m makes a long run.
package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

var (
	soakDuration = flag.Duration("soak.duration", 3*time.Minute, "how long the load and the faults last")
	soakSeed     = flag.Int64("soak.seed", 0, "seed of the load and the faults; 0 takes one from the clock")
	soakRate     = flag.Float64("soak.rate", 2, "runnables submitted per second")
	// Long enough for the slowest convergence the invariants allow, the
	// deployables' one resync period (the syncer's 5 minutes); a run stops
	// waiting as soon as everything has converged.
	soakSettle = flag.Duration("soak.settle", 6*time.Minute, "longest wait, once the faults stop, for the farm to converge")
	soakFaults = flag.String("soak.faults", "kill-purser,kill-nats,apiserver-stop,agent-cut,postgres-restart",
		"the kinds of fault to inject, comma separated")
	soakKeep = flag.Bool("soak.keep", false, "keep the farm's folder (logs) after a passing run too")
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 3})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// The namespaces the soak uses on every cluster; the inventory is
// compared with the clusters' truth in these only.
var namespaces = []string{"soak-a", "soak-b"}

// Farm timings: short enough that a fault of a few tens of seconds moves
// work, so that failover runs during the soak.
var (
	controllerArgs = []string{"--noexecute-grace", "10s"}
	agentArgs      = []string{"--lease-duration", "30s"}
)

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak test takes minutes")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	t.Logf("soak: %s of load and faults, seed %d (rerun with -soak.seed=%d)", *soakDuration, seed, seed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir := keptDir(t)
	// The binaries build while the clusters start.
	type built struct {
		bins *farm.Binaries
		err  error
	}
	binsc := make(chan built, 1)
	go func() {
		bins, err := farm.Build(ctx)
		binsc <- built{bins, err}
	}()
	setupStart := time.Now()
	clusters := env.Clusters(t)
	b := <-binsc
	if b.err != nil {
		t.Fatal(b.err)
	}

	// The farm runs a PostgreSQL server of its own, which the soak
	// restarts; a machine without PostgreSQL's server binaries uses the
	// tests' server, without restarts (never under CI).
	cfg := farm.Config{Dir: dir, Binaries: b.bins, ControllerArgs: controllerArgs, AgentArgs: agentArgs, Logf: t.Logf}
	f, err := farm.Start(ctx, cfg)
	if errors.Is(err, farm.ErrNoPostgres) && os.Getenv("CI") == "" {
		t.Logf("soak: %v; using the tests' PostgreSQL, which the soak does not restart", err)
		cfg.Database = storetest.NewPostgresDatabase(t)
		f, err = farm.Start(ctx, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, c := range clusters {
		for _, ns := range namespaces {
			if err := c.EnsureNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.AddCluster(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	waitClustersReady(t, f, clusters)
	t.Logf("soak: farm of %d processes up in %s, logs in %s", len(f.Processes()), time.Since(setupStart).Round(time.Second), dir)

	w := newWorkload(f.API, seed, namespaces)
	inj := newInjector(t, f, clusters, seed, strings.Split(*soakFaults, ","))

	rep := loadAndSettle(ctx, t, "soak", f, clusters, w, inj, seed)
	summary := rep.String()
	t.Log("\n" + summary)
	fmt.Println(summary)
	writeArtifact(t, summary)
	for _, v := range rep.Violations() {
		t.Error(v)
	}
}

// keptDir is the farm's folder: removed after a passing test, kept (and
// named) after a failing one, for its logs.
func keptDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "purser-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *soakKeep {
			t.Logf("soak: logs kept in %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("soak: remove %s: %v", dir, err)
		}
	})
	return dir
}

// writeArtifact keeps the summary beside the other tests' artifacts, since
// `go test ./...` shows a passing package's output only with -v.
func writeArtifact(t *testing.T, summary string) {
	dir := os.Getenv("PURSER_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "purser-test-artifacts")
	}
	dir = filepath.Join(dir, "soak")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("soak: cannot keep the summary: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary+"\n"), 0o644); err != nil {
		t.Logf("soak: cannot keep the summary: %v", err)
	}
}

// waitClustersReady waits until purser has judged every cluster Ready, so
// that the load starts on a healthy farm.
func waitClustersReady(t *testing.T, f *farm.Farm, clusters []*sandbox.Cluster) {
	t.Helper()
	waitClustersReadyVia(t, f.API, clusters)
}

// A farm the soak runs on: Farm or DCFarm.
type soakFarm interface {
	EnsureRunning(ctx context.Context) error
	Crashes() []farm.Crash
}

// A fault injector of the soak: injector or dcInjector.
type faultInjector interface {
	run(ctx context.Context)
	counts() map[string]int
}

// loadAndSettle runs the workload for -soak.duration while inj injects
// faults, then brings every process and kube-apiserver back and settles:
// the report of what the run left. name starts its log line.
func loadAndSettle(ctx context.Context, t *testing.T, name string, f soakFarm, clusters []*sandbox.Cluster, w *workload, inj faultInjector, seed int64) *report {
	t.Helper()
	loadCtx, stopLoad := context.WithTimeout(ctx, *soakDuration)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inj.run(loadCtx)
	}()
	w.run(loadCtx, *soakRate)
	stopLoad()
	<-done
	t.Logf("%s %s: load and faults stopped; settling (at most %s)", stamp(), name, *soakSettle)
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
		err := c.StartAPIServer(sctx)
		scancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	rep := settle(ctx, t, clusters, w, *soakSettle)
	rep.Duration, rep.Seed, rep.Faults = *soakDuration, seed, inj.counts()
	rep.Crashes = f.Crashes()
	return rep
}
