package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// FluxKustomizeControllerVersion is the release of Flux's
// kustomize-controller that the GitOps test runs against purser, pinned by
// tools/flux.
const FluxKustomizeControllerVersion = "v1.9.6"

// BinKustomizeController is the controller's program in the folder
// EnsureFlux fills.
const BinKustomizeController = "kustomize-controller"

// fluxModule is built apart from the clusters' binaries, like Karmada's:
// only the GitOps test needs it, and a change of its pin rebuilds nothing
// else. Flux's source-controller is not built: the test serves its folder
// of manifests as an ExternalArtifact, the kind Flux reads from sources
// other than its own.
var fluxModule = toolModule{
	dir:      "flux",
	version:  FluxKustomizeControllerVersion,
	binaries: map[string]string{BinKustomizeController: "github.com/fluxcd/kustomize-controller"},
	estimate: "about 6 min",
	assets:   copyFluxCRDs,
}

// FluxBinaries are the kustomize-controller and the CRDs it needs: its
// own Kustomization and the source kinds it reads.
type FluxBinaries struct {
	dir string // the module's cache folder
}

// KustomizeController is the path of the controller's program.
func (f *FluxBinaries) KustomizeController() string {
	return filepath.Join(f.dir, "bin", BinKustomizeController)
}

// CRDs is the folder of the CustomResourceDefinitions: the
// Kustomization's, from the controller's module, and those of the source
// kinds it watches (ExternalArtifact, GitRepository, OCIRepository,
// Bucket), from source-controller's module at the version of the source
// API the controller is built with.
func (f *FluxBinaries) CRDs() string { return filepath.Join(f.dir, fluxCRDsDir) }

// EnsureFlux returns the kustomize-controller pinned by tools/flux,
// building it on first use into its module's cache folder, as Ensure does
// for the clusters' binaries.
func EnsureFlux(ctx context.Context, opts BuildConfig) (*FluxBinaries, error) {
	progress, src, cacheDir, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	dir, err := ensureModule(ctx, src, cacheDir, "", fluxModule, progress)
	if err != nil {
		return nil, err
	}
	return &FluxBinaries{dir: dir}, nil
}

const fluxCRDsDir = "flux-crds"

// copyFluxCRDs writes the Kustomization CRD of the pinned controller and
// the CRDs of the source kinds it reads, of the source API it is built
// with.
// source-controller's CRDs are in its own module, not its API's, so that
// module is downloaded (not built) at the API's version, as the
// controller's own test set-up fetches them.
func copyFluxCRDs(ctx context.Context, srcDir, cacheDir string) error {
	dest := filepath.Join(cacheDir, fluxCRDsDir)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("flux CRDs: %w", err)
	}
	kc, err := moduleDir(ctx, srcDir, "github.com/fluxcd/kustomize-controller")
	if err != nil {
		return err
	}
	version, err := moduleVersion(ctx, srcDir, "github.com/fluxcd/source-controller/api")
	if err != nil {
		return err
	}
	sc, err := downloadModule(ctx, "github.com/fluxcd/source-controller@"+version)
	if err != nil {
		return err
	}
	files := []string{filepath.Join(kc, "config", "crd", "bases", "kustomize.toolkit.fluxcd.io_kustomizations.yaml")}
	// Every source kind the controller watches must be served before it
	// starts, as in a Flux installation.
	for _, kind := range []string{"externalartifacts", "gitrepositories", "ocirepositories", "buckets"} {
		files = append(files, filepath.Join(sc, "config", "crd", "bases", "source.toolkit.fluxcd.io_"+kind+".yaml"))
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("flux CRDs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dest, filepath.Base(p)), data, 0o644); err != nil {
			return fmt.Errorf("flux CRDs: %w", err)
		}
	}
	return nil
}

// downloadModule fetches module@version into the module cache, outside
// any module, and returns its folder there.
func downloadModule(ctx context.Context, moduleAtVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var res struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &res); jerr == nil && res.Error != "" {
		return "", fmt.Errorf("download module %s: %s", moduleAtVersion, res.Error)
	}
	if err != nil {
		return "", fmt.Errorf("download module %s: %w", moduleAtVersion, err)
	}
	if res.Dir == "" {
		return "", fmt.Errorf("download module %s: no folder", moduleAtVersion)
	}
	return res.Dir, nil
}
