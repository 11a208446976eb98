// Package sandboxtest gives tests real Kubernetes clusters. A test binary
// creates one Env in TestMain; the shared clusters start on first use and
// are stopped, with a check that no sandbox process is left, when the
// binary ends:
//
//	var env = sandboxtest.New(sandboxtest.Config{Clusters: 2, Argo: true})
//
//	func TestMain(m *testing.M) { os.Exit(env.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		clusters := env.Clusters(t)
//		...
//	}
package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/sandbox"
)

// Config say what the shared clusters of a test binary look like.
type Config struct {
	Clusters int  // default 1
	Argo     bool // install Argo Workflows in each
}

// Env owns the sandbox clusters of one test binary.
type Env struct {
	opts Config

	mu       sync.Mutex
	root     string // every cluster of this binary lives under it
	bins     *sandbox.Binaries
	fleet    *sandbox.Fleet
	fleetErr error
	started  bool
}

// New returns an Env; nothing starts until a test asks for clusters.
func New(opts Config) *Env {
	if opts.Clusters < 1 {
		opts.Clusters = 1
	}
	return &Env{opts: opts}
}

// Run runs the tests, stops every cluster, and fails the binary if any
// sandbox process outlives it. Logs are kept when a test failed.
func (e *Env) Run(m *testing.M) int {
	code := m.Run()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fleet != nil {
		e.fleet.Stop()
	}
	if e.root == "" {
		return code
	}
	if left := sandbox.Leftovers(e.root); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: sandbox processes outlived the tests: %v\n", left)
		for _, p := range left {
			if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil {
				fmt.Fprintf(os.Stderr, "kill pid %d: %v\n", p.Pid, err)
			}
		}
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "sandbox logs kept in %s\n", e.root)
		return code
	}
	if err := os.RemoveAll(e.root); err != nil {
		fmt.Fprintf(os.Stderr, "remove the sandbox folder: %v\n", err)
	}
	return code
}

// Binaries returns the sandbox binaries, building them on first use.
func (e *Env) Binaries(t testing.TB) *sandbox.Binaries {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.prepareLocked(); err != nil {
		t.Fatal(err)
	}
	return e.bins
}

func (e *Env) prepareLocked() error {
	if e.bins != nil {
		return nil
	}
	if e.root == "" {
		root, err := os.MkdirTemp("", "purser-sandbox-")
		if err != nil {
			return err
		}
		e.root = root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bins, err := sandbox.Ensure(ctx, sandbox.BuildConfig{Progress: os.Stderr})
	if err != nil {
		return err
	}
	e.bins = bins
	return nil
}

// Clusters returns the shared clusters, starting them on the first call.
// Tests that share them must leave them as they found them.
func (e *Env) Clusters(t testing.TB) []*sandbox.Cluster {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		e.started = true
		e.fleetErr = e.prepareLocked()
		if e.fleetErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			e.fleet, e.fleetErr = sandbox.StartFleet(ctx, sandbox.FleetConfig{
				Dir:      filepath.Join(e.root, "shared"),
				Clusters: e.opts.Clusters,
				Argo:     e.opts.Argo,
				Binaries: e.bins,
			})
		}
	}
	if e.fleetErr != nil {
		t.Fatalf("start shared sandbox clusters: %v", e.fleetErr)
	}
	return e.fleet.Clusters()
}

// Dedicated starts a cluster for this test alone, for tests that break or
// wipe it; it is stopped when the test ends.
func (e *Env) Dedicated(t testing.TB, argo bool) *sandbox.Cluster {
	t.Helper()
	bins := e.Binaries(t)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := sandbox.Start(ctx, sandbox.Config{
		Name:     name,
		Dir:      filepath.Join(e.root, "dedicated", name),
		Binaries: bins,
		Argo:     argo,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Eventually polls cond until it returns nil, failing the test with cond's
// last error once timeout passes. It is how every test of purser waits for
// something to happen, with or without a sandbox. The timeout bounds a
// wait for the system to act, not a performance expectation: keep it
// generous. Polls start 10 ms apart, so that a quick condition costs no
// time, and slow down to 250 ms, so that a long wait does not load what it
// waits for. Each call of cond gets a context that ends after 10 s.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := reconcile.Backoff(10*time.Millisecond, 250*time.Millisecond).DelayFunc()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %s: %v", what, timeout, err)
		}
		time.Sleep(delay())
	}
}
