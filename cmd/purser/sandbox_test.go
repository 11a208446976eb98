package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/internal/sandbox"
)

// buildPurser builds the binary under test, as a user would run it.
func buildPurser(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "purser")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// running is a `purser` process whose output a test reads line by line.
type running struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
	done  chan struct{}
}

func startPurser(t *testing.T, bin string, args ...string) *running {
	t.Helper()
	return startCommand(t, exec.CommandContext(t.Context(), bin, args...))
}

// startCommand starts a purser command prepared by the caller (its folder,
// its environment).
func startCommand(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	r := &running{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	pr, pw := io.Pipe()
	r.cmd.Stdout = pw
	r.cmd.Stderr = pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		// The exit is read from r.cmd.ProcessState by whoever waits on done.
		_ = r.cmd.Wait()
		_ = pw.Close() // a pipe's writer always closes
		close(r.done)
	}()
	t.Cleanup(func() {
		if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill purser: %v", err)
		}
		<-r.done
	})
	return r
}

func (r *running) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitLine waits for a line containing want; building the binaries on a
// fresh machine takes minutes, hence the long limit.
func (r *running) waitLine(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-r.lines:
			if strings.Contains(line, want) {
				return
			}
		case <-r.done:
			t.Fatalf("purser exited before printing %q:\n%s", want, r.output())
		case <-deadline:
			t.Fatalf("no %q after %s:\n%s", want, timeout, r.output())
		}
	}
}

func (r *running) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("purser still running %s after being asked to stop:\n%s", timeout, r.output())
	}
}

func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func assertNodesReady(t *testing.T, kubeconfig string) {
	t.Helper()
	nodes, err := kubeClient(t, kubeconfig).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: list nodes: %v", kubeconfig, err)
	}
	if len(nodes.Items) == 0 {
		t.Fatalf("%s: no nodes", kubeconfig)
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			t.Errorf("%s: node %s not Ready", kubeconfig, n.Name)
		}
	}
}

func assertNoSandboxProcess(t *testing.T, dir string) {
	t.Helper()
	if left := sandbox.Leftovers(dir); len(left) > 0 {
		t.Fatalf("sandbox processes left in %s: %v", dir, left)
	}
}

// The README's promise: `purser sandbox up` leaves clusters that kubectl
// sees Ready, Ctrl-C leaves no process, the data survives a restart, and
// `purser sandbox down` stops it from another shell.
func TestSandboxUpCtrlCAndDown(t *testing.T) {
	bin := buildPurser(t)
	dir := filepath.Join(t.TempDir(), "x")
	ctx := t.Context()

	up := startPurser(t, bin, "sandbox", "up", "--clusters", "2", "--dir", dir)
	up.waitLine(t, "press Ctrl-C to stop", 30*time.Minute)
	for _, name := range []string{"sandbox-1", "sandbox-2"} {
		assertNodesReady(t, filepath.Join(dir, name, "kubeconfig"))
	}
	if !strings.Contains(up.output(), "sandbox-1 ready in") {
		t.Errorf("no progress line for sandbox-1:\n%s", up.output())
	}

	// A second sandbox in the same folder is refused with a clear reason.
	second, err := exec.CommandContext(ctx, bin, "sandbox", "up", "--clusters", "1", "--dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(second), "already running in") {
		t.Fatalf("second up on a folder in use: err %v, output:\n%s", err, second)
	}

	client := kubeClient(t, filepath.Join(dir, "sandbox-1", "kubeconfig"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	if !strings.Contains(up.output(), "no sandbox process is left") {
		t.Errorf("Ctrl-C did not report a clean stop:\n%s", up.output())
	}
	assertNoSandboxProcess(t, dir)

	again := startPurser(t, bin, "sandbox", "up", "--clusters", "1", "--dir", dir, "--argo=false")
	again.waitLine(t, "press Ctrl-C to stop", 5*time.Minute)
	client = kubeClient(t, filepath.Join(dir, "sandbox-1", "kubeconfig"))
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survives-restart", metav1.GetOptions{}); err != nil {
		t.Fatalf("object lost across a restart of the sandbox: %v", err)
	}

	down, err := exec.CommandContext(ctx, bin, "sandbox", "down", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("sandbox down: %v\n%s", err, down)
	}
	again.waitExit(t, 30*time.Second)
	assertNoSandboxProcess(t, dir)
}

func TestSandboxUpRejectsBadFlags(t *testing.T) {
	bin := buildPurser(t)
	out, err := exec.CommandContext(t.Context(), bin, "sandbox", "up", "--clusters", "0", "--dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--clusters must be at least 1") {
		t.Fatalf("--clusters 0: err %v, output:\n%s", err, out)
	}
	out, err = exec.CommandContext(t.Context(), bin, "sandbox", "down", "--dir", filepath.Join(t.TempDir(), "missing")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no sandbox folder at") {
		t.Fatalf("down on a missing folder: err %v, output:\n%s", err, out)
	}
}

func TestVersionNamesPins(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"purser ", "kubernetes " + sandbox.KubernetesVersion, "etcd " + sandbox.EtcdVersion} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version output lacks %q:\n%s", want, out.String())
		}
	}
}

// The controller needs the key that opens kubeconfigs; without it, it
// says which file it looked for instead of starting half-blind.
func TestControllerWithoutKeySaysSo(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	missing := filepath.Join(t.TempDir(), "secret.key")
	cmd.SetArgs([]string{"controller", "--database", filepath.Join(t.TempDir(), "purser.db"), "--key-file", missing})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("purser controller without its key: %v", err)
	}
}
