package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A binary built into an empty folder outside the checkout, as a user
// would install it, starts its sandbox from that folder: the pins of the
// sandbox binaries travel inside it.
func TestUpFromAnEmptyFolderOutsideTheCheckout(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "purser")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if wd, err := os.Getwd(); err == nil && strings.HasPrefix(dir, filepath.Dir(filepath.Dir(wd))+string(filepath.Separator)) {
		t.Fatalf("%s is inside the checkout; the test needs a folder outside it", dir)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PURSER_TOOLS_DIR=") })
	env = append(env, "PURSER_CONFIG="+filepath.Join(t.TempDir(), "client.yaml"), "PURSER_SERVER=", "PURSER_TOKEN=")
	command := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), "./purser", args...)
		cmd.Dir = dir
		cmd.Env = env
		return cmd
	}

	up := startCommand(t, command("up", "--sandbox", "1", "--listen", "127.0.0.1:0"))
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	assertNodesReady(t, filepath.Join(dir, "purser-data", "sandbox", "sandbox-1", "kubeconfig"))
	out, err := command("get", "clusters").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sandbox-1") {
		t.Fatalf("get clusters from the same folder: %v\n%s", err, out)
	}

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(dir, "purser-data", "sandbox"))
}
