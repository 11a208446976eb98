package sandbox_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/sandbox"
)

// TestSuperviseAPIServers: a kube-apiserver killed by hand is restarted,
// and said so; one stopped on purpose is left alone, and supervised again
// once whoever stopped it started it again.
func TestSuperviseAPIServers(t *testing.T) {
	ctx := t.Context()
	f, err := sandbox.StartFleet(ctx, sandbox.FleetConfig{Dir: t.TempDir(), Clusters: 1, Binaries: env.Binaries(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	c := f.Clusters()[0]

	events := make(chan sandbox.SupervisorEvent, 16)
	supervising, stop := context.WithCancel(ctx)
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		f.SuperviseAPIServers(supervising, func(e sandbox.SupervisorEvent) { events <- e })
	}()
	// Before the fleet stops, as SuperviseAPIServers asks.
	t.Cleanup(func() { stop(); <-supervised })

	next := func() sandbox.SupervisorEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(3 * time.Minute):
			t.Fatal("the supervisor said nothing for 3 minutes")
			return sandbox.SupervisorEvent{}
		}
	}
	killed := func() {
		t.Helper()
		pid := 0
		for _, p := range sandbox.Leftovers(f.Dir()) {
			if p.Command == "kube-apiserver" {
				pid = p.Pid
			}
		}
		if pid == 0 {
			t.Fatal("no kube-apiserver runs")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The next event is this exit: a stop on purpose before it was
		// left alone.
		if e := next(); e.Cluster != c.Name() || !strings.Contains(e.Exited, "killed") {
			t.Fatalf("after a kill by hand the supervisor said %q, want its exit", e)
		}
		for e := next(); !e.Restarted; e = next() {
			if e.Err == nil {
				t.Fatalf("while restarting the supervisor said %q", e)
			}
			t.Log(e) // a failed restart is tried again
		}
		client, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Discovery().ServerVersion(); err != nil {
			t.Fatalf("the restarted kube-apiserver does not serve: %v", err)
		}
	}

	killed()
	c.StopAPIServer()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	killed()
}
