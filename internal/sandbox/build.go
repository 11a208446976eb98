package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The versions pinned by the modules under tools/. A test checks that they
// match the go.mod files there.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	KwokVersion       = "v0.8.0"
	ArgoVersion       = "v4.0.5"
)

// Binary names inside a Binaries directory.
const (
	binEtcd               = "etcd"
	binAPIServer          = "kube-apiserver"
	binControllerManager  = "kube-controller-manager"
	binScheduler          = "kube-scheduler"
	binKwok               = "kwok"
	binWorkflowController = "workflow-controller"
)

// toolModule is one Go module under tools/ and what is built from it.
type toolModule struct {
	dir      string            // folder under tools/
	version  string            // shown in progress output
	binaries map[string]string // binary name -> package path
	estimate string            // cold build time on 2 cores, for the progress line
	env      []string          // added to the go command's environment
}

var toolModules = []toolModule{
	{
		dir:     "kubernetes",
		version: KubernetesVersion,
		binaries: map[string]string{
			binAPIServer:         "k8s.io/kubernetes/cmd/kube-apiserver",
			binControllerManager: "k8s.io/kubernetes/cmd/kube-controller-manager",
			binScheduler:         "k8s.io/kubernetes/cmd/kube-scheduler",
		},
		estimate: "about 6 min",
	},
	{dir: "etcd", version: EtcdVersion, binaries: map[string]string{binEtcd: "./cmd/etcd"}, estimate: "about 30 s"},
	{dir: "kwok", version: KwokVersion, binaries: map[string]string{binKwok: "sigs.k8s.io/kwok/cmd/kwok"}, estimate: "about 30 s"},
	{dir: "argo", version: ArgoVersion, binaries: map[string]string{binWorkflowController: "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller"}, estimate: "about 3 min"},
}

// Binaries is a complete, built set of sandbox binaries and the assets that
// come with their modules (kwok stages, Argo CRDs).
type Binaries struct {
	Dir string
}

// Path returns the path of the named binary.
func (b *Binaries) Path(name string) string { return filepath.Join(b.Dir, "bin", name) }

// KwokStages is the kwok configuration with every stage the sandbox uses.
func (b *Binaries) KwokStages() string { return filepath.Join(b.Dir, "kwok-stages.yaml") }

// ArgoCRDs is the folder holding the Argo Workflows CRD manifests.
func (b *Binaries) ArgoCRDs() string { return filepath.Join(b.Dir, "argo-crds") }

// BuildOptions say where the sandbox binaries are built and cached.
type BuildOptions struct {
	// ToolsDir is the tools/ folder of a purser checkout. Empty: found from
	// $PURSER_TOOLS_DIR, the working directory or the executable's location.
	ToolsDir string
	// CacheDir holds one folder per set of pins. Empty: $PURSER_SANDBOX_CACHE,
	// else <user cache dir>/purser/sandbox.
	CacheDir string
	// Progress receives one line per step of a build. Nil: discarded.
	Progress io.Writer
}

// Ensure returns the sandbox binaries for the pins under tools/, building
// whatever is missing. Concurrent callers, in this process or another, wait
// for one build instead of building twice.
func Ensure(ctx context.Context, opts BuildOptions) (*Binaries, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	toolsDir, err := findToolsDir(opts.ToolsDir)
	if err != nil {
		return nil, err
	}
	cacheDir, err := cacheRoot(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	key, err := pinKey(toolsDir)
	if err != nil {
		return nil, err
	}
	b := &Binaries{Dir: filepath.Join(cacheDir, key)}
	marker := filepath.Join(b.Dir, "complete")
	if _, err := os.Stat(marker); err == nil {
		return b, nil
	}

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, key+".lock"), progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return b, nil // another process built it while we waited
	}

	if err := os.MkdirAll(filepath.Join(b.Dir, "bin"), 0o755); err != nil {
		return nil, fmt.Errorf("sandbox cache: %w", err)
	}
	for _, m := range toolModules {
		if err := buildModule(ctx, toolsDir, b, m, progress); err != nil {
			return nil, err
		}
	}
	if err := writeKwokStages(ctx, toolsDir, b.KwokStages()); err != nil {
		return nil, err
	}
	if err := copyArgoCRDs(ctx, toolsDir, b.ArgoCRDs()); err != nil {
		return nil, err
	}
	if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox cache: %w", err)
	}
	return b, nil
}

// buildModule builds the binaries of one tools module that are not in the
// cache yet, with one go build so that shared packages compile once.
func buildModule(ctx context.Context, toolsDir string, b *Binaries, m toolModule, progress io.Writer) error {
	var names, pkgs []string
	for name := range m.binaries {
		if _, err := os.Stat(b.Path(name)); err != nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	for _, name := range names {
		pkgs = append(pkgs, m.binaries[name])
	}
	what := strings.Join(names, ", ")
	fmt.Fprintf(progress, "building %s %s (first run only, %s on 2 cores) ...\n", what, m.version, m.estimate)

	tmp, err := os.MkdirTemp(b.Dir, "build-")
	if err != nil {
		return fmt.Errorf("build %s: %w", what, err)
	}
	defer os.RemoveAll(tmp)
	out := tmp + string(filepath.Separator)
	if len(pkgs) == 1 {
		out = filepath.Join(tmp, names[0])
	}
	args := append([]string{"build", "-o", out}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(toolsDir, m.dir)
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly"), m.env...)
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr

	start := time.Now()
	stop := tickProgress(progress, what, start)
	err = cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("build %s %s in %s: %w\n%s", what, m.version, cmd.Dir, err, lastLines(stderr.String(), 30))
	}
	for _, name := range names {
		if err := os.Rename(filepath.Join(tmp, name), b.Path(name)); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
	}
	fmt.Fprintf(progress, "built %s in %s\n", what, time.Since(start).Round(time.Second))
	return nil
}

// tickProgress prints a line every 30 s while a long build runs, so that a
// first run never looks hung. The returned func stops it.
func tickProgress(progress io.Writer, what string, start time.Time) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(progress, "  still building %s (%s) ...\n", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// findToolsDir locates tools/ in a purser checkout.
func findToolsDir(explicit string) (string, error) {
	isTools := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "kubernetes", "go.mod"))
		return err == nil
	}
	if explicit == "" {
		explicit = os.Getenv("PURSER_TOOLS_DIR")
	}
	if explicit != "" {
		if !isTools(explicit) {
			return "", fmt.Errorf("sandbox: %s is not purser's tools/ folder (no kubernetes/go.mod in it)", explicit)
		}
		return filepath.Abs(explicit)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			if isTools(filepath.Join(dir, "tools")) {
				return filepath.Join(dir, "tools"), nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("sandbox: cannot find purser's tools/ folder, which pins the Kubernetes binaries; run from a purser checkout or set PURSER_TOOLS_DIR")
}

func cacheRoot(explicit string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv("PURSER_SANDBOX_CACHE")
	}
	if explicit != "" {
		return filepath.Abs(explicit)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("sandbox cache: %w (set PURSER_SANDBOX_CACHE)", err)
	}
	return filepath.Join(base, "purser", "sandbox"), nil
}

// pinKey names a cache folder after the pins: the Kubernetes version for
// people, and a hash of every go.mod, go.sum and Go file under tools/ so
// that any change of pin or of our wrappers builds afresh.
func pinKey(toolsDir string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(toolsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path == filepath.Join(toolsDir, dexModule.dir) {
			return filepath.SkipDir // cached on its own (EnsureDex)
		}
		if !d.IsDir() && (name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("sandbox: read pins in %s: %w", toolsDir, err)
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("sandbox: read pins: %w", err)
		}
		rel, _ := filepath.Rel(toolsDir, f)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	return "k8s-" + KubernetesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// lockFile takes an exclusive flock, waiting for ctx. It says so when it
// has to wait, since another build can take minutes.
func lockFile(ctx context.Context, path string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sandbox cache lock: %w", err)
	}
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(progress, "waiting for another process that is building the sandbox binaries (%s) ...\n", path)
		for {
			if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("sandbox cache lock: %w", ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return func() {
		syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// moduleDir asks the go command where a module of a tools module's build
// list is, so that assets shipped inside it can be read.
func moduleDir(ctx context.Context, toolsDir, toolModule, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(toolsDir, toolModule)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("locate module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("locate module %s: not downloaded", module)
	}
	return dir, nil
}

// copyArgoCRDs copies the CRD manifests that ship with the pinned Argo
// Workflows module.
func copyArgoCRDs(ctx context.Context, toolsDir, dest string) error {
	dir, err := moduleDir(ctx, toolsDir, "argo", "github.com/argoproj/argo-workflows/v4")
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "manifests", "base", "crds", "minimal")
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("argo CRDs: %w", err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("argo CRDs: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "argoproj.io_") || !strings.HasSuffix(e.Name(), ".yaml") {
			continue // kustomization.yaml and the README are not CRDs
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("argo CRDs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dest, e.Name()), data, 0o644); err != nil {
			return fmt.Errorf("argo CRDs: %w", err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("argo CRDs: none found in %s", src)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
