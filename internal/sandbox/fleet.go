package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purser-io/purser/internal/platform/dirlock"
)

// FleetConfig describes a set of sandbox clusters in one folder.
type FleetConfig struct {
	Dir      string // clusters live in Dir/<name>
	Clusters int
	Nodes    int // kwok nodes per cluster; default 1
	Argo     bool
	Binaries *Binaries
	Progress io.Writer // one line per cluster started; nil: discarded
}

// Fleet is a running set of sandbox clusters named sandbox-1 .. sandbox-N,
// labelled dc: dc-1 .. dc-N.
type Fleet struct {
	dir      string
	clusters []*Cluster
	unlock   func()
}

// ClusterName is the name of the i-th (1-based) sandbox cluster.
func ClusterName(i int) string { return "sandbox-" + strconv.Itoa(i) }

// StartFleet starts the clusters side by side. One folder runs one fleet at
// a time: a second start in the same folder fails and names the first.
func StartFleet(ctx context.Context, cfg FleetConfig) (*Fleet, error) {
	if cfg.Clusters < 1 {
		return nil, fmt.Errorf("sandbox: need at least one cluster, got %d", cfg.Clusters)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	unlock, err := lockFleet(dir)
	if err != nil {
		return nil, err
	}
	f := &Fleet{dir: dir, unlock: unlock, clusters: make([]*Cluster, cfg.Clusters)}

	var wg sync.WaitGroup
	errs := make([]error, cfg.Clusters)
	for i := range cfg.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := ClusterName(i + 1)
			start := time.Now()
			c, err := Start(ctx, Config{
				Name:     name,
				Dir:      filepath.Join(dir, name),
				Binaries: cfg.Binaries,
				Nodes:    cfg.Nodes,
				Argo:     cfg.Argo,
				Labels:   map[string]string{"dc": "dc-" + strconv.Itoa(i+1)},
			})
			if err != nil {
				errs[i] = err
				return
			}
			f.clusters[i] = c
			fmt.Fprintf(progress, "%s ready in %s: kubeconfig %s\n", name, time.Since(start).Round(100*time.Millisecond), c.KubeconfigPath())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// Clusters returns the running clusters, sandbox-1 first.
func (f *Fleet) Clusters() []*Cluster { return f.clusters }

// Dir is the fleet's folder.
func (f *Fleet) Dir() string { return f.dir }

// Stop stops every cluster, each dependents first, and releases the folder.
func (f *Fleet) Stop() {
	var wg sync.WaitGroup
	for _, c := range f.clusters {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop()
		}()
	}
	wg.Wait()
	if f.unlock != nil {
		f.unlock()
		f.unlock = nil
	}
}

// lockFleet holds DIR for as long as the fleet runs; `purser sandbox down`
// finds our pid beside the lock.
func lockFleet(dir string) (func(), error) {
	l, err := dirlock.Acquire(dir, "sandbox")
	if errors.Is(err, dirlock.ErrHeld) {
		return nil, fmt.Errorf("sandbox: clusters are already running in %s (pid %d); stop them with `purser sandbox down --dir %s`",
			dir, dirlock.HolderPid(dir, "sandbox"), dir)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return l.Release, nil
}

// Down stops the clusters of a fleet running in dir from another process:
// it asks the process that started them to stop, waits for it, and then
// kills any sandbox process that is still left under dir.
func Down(ctx context.Context, dir string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("sandbox down: no sandbox folder at %s", dir)
	}
	if pid := dirlock.HolderPid(dir, "sandbox"); pid > 0 && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
		fmt.Fprintf(progress, "stopping the sandbox started by pid %d ...\n", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("sandbox down: stop pid %d: %w", pid, err)
		}
		if err := waitUntil(ctx, 90*time.Second, fmt.Sprintf("pid %d to exit", pid), func(context.Context) error {
			if syscall.Kill(pid, 0) == nil {
				return errors.New("still running")
			}
			return nil
		}); err != nil {
			fmt.Fprintf(progress, "pid %d did not stop in time; killing it\n", pid)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("sandbox down: kill pid %d: %w", pid, err)
			}
		}
	}
	left := Leftovers(dir)
	for _, p := range left {
		fmt.Fprintf(progress, "killing leftover %s (pid %d)\n", p.Command, p.Pid)
		if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("sandbox down: kill leftover pid %d: %w", p.Pid, err)
		}
	}
	if err := waitUntil(ctx, 30*time.Second, "sandbox processes to exit", func(context.Context) error {
		if left := Leftovers(dir); len(left) > 0 {
			return fmt.Errorf("%d still running", len(left))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("sandbox down: %w", err)
	}
	fmt.Fprintf(progress, "sandbox in %s is stopped (data kept; remove the folder to start afresh)\n", dir)
	return nil
}

// ProcessInfo names a running process.
type ProcessInfo struct {
	Pid     int
	Command string
}

// Leftovers lists the sandbox processes (etcd, kube-apiserver, ...) whose
// command line mentions dir: each names files in its cluster's folder.
func Leftovers(dir string) []ProcessInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	needle := []byte(dir + string(filepath.Separator))
	var found []ProcessInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, needle) {
			continue
		}
		// A zombie has an empty cmdline, so whatever matched is alive.
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if command := filepath.Base(args[0]); slices.Contains(stopOrder, command) {
			found = append(found, ProcessInfo{Pid: pid, Command: command})
		}
	}
	return found
}
