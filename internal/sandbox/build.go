package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The versions pinned by the modules under tools/. A test checks that they
// match the go.mod files there.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	KwokVersion       = "v0.8.0"
	ArgoVersion       = "v4.0.5"
	// KubectlVersion is k8s.io/kubectl's version of KubernetesVersion.
	KubectlVersion = "v0.37.2"
)

// Binary names inside a Binaries directory.
const (
	binEtcd               = "etcd"
	binAPIServer          = "kube-apiserver"
	binControllerManager  = "kube-controller-manager"
	binScheduler          = "kube-scheduler"
	binKwok               = "kwok"
	binWorkflowController = "workflow-controller"
	binKubectl            = "kubectl"
)

// toolModule is one Go module under tools/ and what is built from it.
type toolModule struct {
	dir      string            // folder under tools/
	version  string            // shown in progress output
	binaries map[string]string // binary name -> package path
	estimate string            // cold build time on 2 cores, for the progress line
	env      []string          // added to the go command's environment
	// assets, if set, writes files the module ships (kwok's stages, Argo's
	// CRDs) into the module's cache folder, from the module's source folder.
	assets func(ctx context.Context, srcDir, dir string) error
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
	{dir: "kwok", version: KwokVersion, binaries: map[string]string{binKwok: "sigs.k8s.io/kwok/cmd/kwok"}, estimate: "about 30 s", assets: writeKwokStages},
	{dir: "argo", version: ArgoVersion, binaries: map[string]string{binWorkflowController: "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller"}, estimate: "about 3 min", assets: copyArgoCRDs},
	// kubectl, for the tests that read purser's Kubernetes-shaped API as
	// users do; a module of its own, so that adding it rebuilt nothing else.
	{dir: "kubectl", version: KubectlVersion, binaries: map[string]string{binKubectl: "./cmd/kubectl"}, estimate: "about 3 min"},
}

// Binaries is a complete, built set of sandbox binaries and the assets that
// come with their modules (kwok stages, Argo CRDs).
type Binaries struct {
	// Dir is the cache folder: one folder per tools module in it.
	Dir     string
	paths   map[string]string // binary name -> path
	modules map[string]string // tools module -> its cache folder
}

// Path returns the path of the named binary.
func (b *Binaries) Path(name string) string { return b.paths[name] }

// Kubectl returns the path of the kubectl binary built at the pinned
// version (never the machine's own, which a fresh machine lacks).
func (b *Binaries) Kubectl() string { return b.paths[binKubectl] }

// KwokStages is the kwok configuration with every stage the sandbox uses.
func (b *Binaries) KwokStages() string { return filepath.Join(b.modules["kwok"], kwokStagesFile) }

// ArgoCRDs is the folder holding the Argo Workflows CRD manifests.
func (b *Binaries) ArgoCRDs() string { return filepath.Join(b.modules["argo"], argoCRDsDir) }

// BuildConfig say where the sandbox binaries are built and cached.
type BuildConfig struct {
	// ToolsDir is a tools/ folder laid out as purser's, whose pins replace
	// the ones built into purser. Empty: $PURSER_TOOLS_DIR, else the
	// built-in pins.
	ToolsDir string
	// CacheDir holds one folder per tools module and set of pins. Empty:
	// $PURSER_SANDBOX_CACHE, else <user cache dir>/purser/sandbox.
	CacheDir string
	// Progress receives one line per step of a build. Nil: discarded.
	Progress io.Writer
}

// resolve is where a build reports its progress (nowhere by default),
// the folder of the pins it builds and the cache it builds into.
func (opts BuildConfig) resolve() (progress io.Writer, src pinSource, cacheDir string, err error) {
	progress = opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if src, err = pinsFrom(opts.ToolsDir); err != nil {
		return nil, pinSource{}, "", err
	}
	if cacheDir, err = cacheRoot(opts.CacheDir); err != nil {
		return nil, pinSource{}, "", err
	}
	return progress, src, cacheDir, nil
}

// Ensure returns the sandbox binaries for the pins, building whatever is
// missing. Each tools module has its own cache folder, keyed by its own
// pins, so that changing or adding one module builds that module alone.
// Concurrent callers, in this process or another, wait for one build
// instead of building twice.
func Ensure(ctx context.Context, opts BuildConfig) (*Binaries, error) {
	progress, src, cacheDir, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	// A tools folder that lacks one of the legacy modules has no cache of
	// the old layout to reuse.
	legacyDir := ""
	if key, err := legacyKey(src); err == nil {
		legacyDir = filepath.Join(cacheDir, key)
	}
	b := &Binaries{Dir: cacheDir, paths: map[string]string{}, modules: map[string]string{}}
	for _, m := range toolModules {
		dir, err := ensureModule(ctx, src, cacheDir, legacyDir, m, progress)
		if err != nil {
			return nil, err
		}
		b.modules[m.dir] = dir
		for name := range m.binaries {
			b.paths[name] = filepath.Join(dir, "bin", name)
		}
	}
	return b, nil
}

// ensureModule returns the cache folder of one tools module, complete:
// its binaries, its assets, and the pins they came from in src/.
func ensureModule(ctx context.Context, src pinSource, cacheDir, legacyDir string, m toolModule, progress io.Writer) (string, error) {
	files, err := src.moduleFiles(m.dir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, moduleKey(m, files))
	marker := filepath.Join(dir, "complete")
	if _, err := os.Stat(marker); err == nil {
		return dir, nil
	}

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("sandbox cache: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock", progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return dir, nil // another process built it while we waited
	}

	srcDir := filepath.Join(dir, "src")
	if err := writeModuleFiles(srcDir, files); err != nil {
		return "", fmt.Errorf("sandbox cache: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", fmt.Errorf("sandbox cache: %w", err)
	}
	if legacyDir != "" {
		adoptLegacy(legacyDir, dir, m, progress)
	}
	if err := buildModule(ctx, srcDir, dir, m, progress); err != nil {
		return "", err
	}
	if m.assets != nil {
		if err := m.assets(ctx, srcDir, dir); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("sandbox cache: %w", err)
	}
	return dir, nil
}

// writeModuleFiles writes a module's pins afresh into dir, for the go
// command to build from.
func writeModuleFiles(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for p, data := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// adoptLegacy links into dir the binaries of m that a cache folder of the
// layout before per-module folders holds. Its key covers every module's
// pins, so a match means they were built from the same pins as m's. A
// binary that cannot be linked is built instead.
func adoptLegacy(legacyDir, dir string, m toolModule, progress io.Writer) {
	for name := range m.binaries {
		old := filepath.Join(legacyDir, "bin", name)
		if _, err := os.Stat(old); err != nil {
			continue
		}
		if err := os.Link(old, filepath.Join(dir, "bin", name)); err == nil {
			fmt.Fprintf(progress, "reusing %s %s from %s\n", name, m.version, legacyDir)
		}
	}
}

// buildModule builds the binaries of one tools module that are not in its
// cache folder yet, with one go build so that shared packages compile once.
func buildModule(ctx context.Context, srcDir, dir string, m toolModule, progress io.Writer) error {
	var names, pkgs []string
	for name := range m.binaries {
		if _, err := os.Stat(filepath.Join(dir, "bin", name)); err != nil {
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

	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("build %s: %w", what, err)
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			fmt.Fprintf(progress, "cannot remove the build folder %s: %v\n", tmp, err)
		}
	}()
	out := tmp + string(filepath.Separator)
	if len(pkgs) == 1 {
		out = filepath.Join(tmp, names[0])
	}
	args := append([]string{"build", "-o", out}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = srcDir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly"), m.env...)
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr

	start := time.Now()
	stop := tickProgress(ctx, progress, what, start)
	err = cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("build %s %s in %s: %w\n%s", what, m.version, cmd.Dir, err, lastLines(stderr.String(), 30))
	}
	for _, name := range names {
		// go build -o DIR/ names each binary after its package's folder,
		// which may differ from the name it is kept under
		// (cmd/scheduler as karmada-scheduler).
		built := name
		if len(pkgs) > 1 {
			built = filepath.Base(filepath.FromSlash(m.binaries[name]))
		}
		if err := os.Rename(filepath.Join(tmp, built), filepath.Join(dir, "bin", name)); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
	}
	fmt.Fprintf(progress, "built %s in %s\n", what, time.Since(start).Round(time.Second))
	return nil
}

// tickProgress prints a line every 30 s while a long build runs, so that a
// first run never looks hung. The returned func stops it.
func tickProgress(ctx context.Context, progress io.Writer, what string, start time.Time) func() {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_ = wait.PollUntilContextCancel(ctx, 30*time.Second, false, func(context.Context) (bool, error) {
			fmt.Fprintf(progress, "  still building %s (%s) ...\n", what, time.Since(start).Round(time.Second))
			return false, nil
		})
	}()
	return func() { cancel(); <-finished }
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
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}

// moduleDir asks the go command where a module of a tools module's build
// list is, so that assets shipped inside it can be read.
func moduleDir(ctx context.Context, srcDir, module string) (string, error) {
	dir, err := listModule(ctx, srcDir, module, "{{.Dir}}")
	if err == nil && dir == "" {
		err = fmt.Errorf("locate module %s: not downloaded", module)
	}
	return dir, err
}

// moduleVersion is the version of a module in a tools module's build
// list.
func moduleVersion(ctx context.Context, srcDir, module string) (string, error) {
	return listModule(ctx, srcDir, module, "{{.Version}}")
}

// listModule is what `go list -m -f format module` says in the tools
// module at srcDir.
func listModule(ctx context.Context, srcDir, module, format string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", format, module)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("locate module %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// argoCRDsDir is the folder, in the argo module's cache folder, of the CRDs.
const argoCRDsDir = "argo-crds"

// copyArgoCRDs copies the CRD manifests that ship with the pinned Argo
// Workflows module.
func copyArgoCRDs(ctx context.Context, srcDir, cacheDir string) error {
	dir, err := moduleDir(ctx, srcDir, "github.com/argoproj/argo-workflows/v4")
	if err != nil {
		return err
	}
	dest := filepath.Join(cacheDir, argoCRDsDir)
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
