package sandbox_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/sandbox"
)

// clusterSwitch is a Control over named on/off switches, which is what
// the socket carries; purser up's is tested in cmd/purser.
type clusterSwitch struct {
	stopped map[string]bool
	faults  []string
}

func (c *clusterSwitch) StopCluster(_ context.Context, name string) (string, error) {
	if _, ok := c.stopped[name]; !ok {
		return "", fmt.Errorf("%w %q", sandbox.ErrNoCluster, name)
	}
	if c.stopped[name] {
		return "", fmt.Errorf("%s is %w: already stopped", name, sandbox.ErrWrongState)
	}
	c.stopped[name] = true
	return name + " stopped", nil
}

func (c *clusterSwitch) StartCluster(_ context.Context, name string) (string, error) {
	c.stopped[name] = false
	return name + " started", nil
}

func (c *clusterSwitch) Clusters() []sandbox.ClusterStatus {
	return []sandbox.ClusterStatus{{Name: "sandbox-1", Running: !c.stopped["sandbox-1"]}}
}

func (c *clusterSwitch) FlinkFault(_ context.Context, ns, name, fault, cluster string) (string, error) {
	c.faults = append(c.faults, strings.Join([]string{ns, name, fault, cluster}, "|"))
	return "ok", nil
}

// The control socket carries each request to the Control and its answer
// back, refusals as errors with their reasons; it is the owner's only,
// and gone once stopped.
func TestControlSocket(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := sandbox.CallControl(ctx, dir, http.MethodGet, "/clusters"); err == nil || !strings.Contains(err.Error(), "is `purser up --sandbox N` running") {
		t.Fatalf("a call with nothing serving: %v", err)
	}
	sw := &clusterSwitch{stopped: map[string]bool{"sandbox-1": false}}
	stop, err := sandbox.ServeControl(ctx, dir, sw)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, sandbox.ControlSocket)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	call := func(method, path string) (string, error) { return sandbox.CallControl(ctx, dir, method, path) }
	if out, err := call(http.MethodPost, "/clusters/sandbox-1/stop"); err != nil || out != "sandbox-1 stopped" {
		t.Fatalf("stop: %q, %v", out, err)
	}
	if _, err := call(http.MethodPost, "/clusters/sandbox-1/stop"); err == nil || err.Error() != "sandbox-1 is not in a state for this: already stopped" {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := call(http.MethodPost, "/clusters/nope/stop"); err == nil || !strings.Contains(err.Error(), `no such sandbox cluster "nope"`) {
		t.Fatalf("stop of an unknown cluster: %v", err)
	}
	if out, err := call(http.MethodGet, "/clusters"); err != nil || out != "sandbox-1\tstopped" {
		t.Fatalf("list: %q, %v", out, err)
	}
	if _, err := call(http.MethodPut, sandbox.FlinkFaultPath("team-a", "clickstream", "", "")); err == nil || !strings.Contains(err.Error(), "no fault named") {
		t.Fatalf("a fault without its name: %v", err)
	}
	if _, err := call(http.MethodPut, sandbox.FlinkFaultPath("team-a", "clickstream", "FailedJob", "sandbox-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := call(http.MethodDelete, sandbox.FlinkFaultPath("team-a", "clickstream", "", "")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sw.faults, " "); got != "team-a|clickstream|FailedJob|sandbox-1 team-a|clickstream||" {
		t.Fatalf("faults asked: %s", got)
	}
	stop()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after stop: %v", err)
	}
	long := filepath.Join(dir, strings.Repeat("d", 110))
	if _, err := sandbox.ServeControl(ctx, long, sw); err == nil || !strings.Contains(err.Error(), "use a shorter data folder") {
		t.Fatalf("a socket path too long: %v", err)
	}
}
