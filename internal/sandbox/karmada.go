package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KarmadaVersion is the release of Karmada that the benchmark beside
// Karmada runs, pinned by tools/karmada.
const KarmadaVersion = "v1.18.2"

// Karmada's programs, by their names in the folder EnsureKarmada fills.
const (
	BinKarmadaAggregatedAPIServer = "karmada-aggregated-apiserver"
	BinKarmadaControllerManager   = "karmada-controller-manager"
	BinKarmadaScheduler           = "karmada-scheduler"
	BinKarmadaWebhook             = "karmada-webhook"
)

// karmadaModule is built apart from the clusters' binaries, like Dex: only
// the benchmark beside Karmada needs it, so neither `make test` nor
// `purser sandbox build` builds it, and a change of its pin rebuilds
// nothing else. The aggregated apiserver is built too: Karmada's Cluster
// kind is served by it, not by a CRD.
var karmadaModule = toolModule{
	dir:     "karmada",
	version: KarmadaVersion,
	binaries: map[string]string{
		BinKarmadaAggregatedAPIServer: "github.com/karmada-io/karmada/cmd/aggregated-apiserver",
		BinKarmadaControllerManager:   "github.com/karmada-io/karmada/cmd/controller-manager",
		BinKarmadaScheduler:           "github.com/karmada-io/karmada/cmd/scheduler",
		BinKarmadaWebhook:             "github.com/karmada-io/karmada/cmd/webhook",
	},
	estimate: "about 9 min",
	assets:   copyKarmadaCRDs,
}

// KarmadaBinaries are Karmada's programs and the CRDs of its module.
type KarmadaBinaries struct {
	dir string // the module's cache folder
}

// Path returns the path of one of Karmada's programs (BinKarmada...).
func (k *KarmadaBinaries) Path(name string) string { return filepath.Join(k.dir, "bin", name) }

// CRDs is the folder of the CustomResourceDefinitions Karmada's module
// ships (its Helm chart's _crds/bases), one file each.
func (k *KarmadaBinaries) CRDs() string { return filepath.Join(k.dir, karmadaCRDsDir) }

// EnsureKarmada returns Karmada's programs pinned by tools/karmada,
// building them on first use into their module's cache folder, as Ensure
// does for the clusters' binaries.
func EnsureKarmada(ctx context.Context, opts BuildConfig) (*KarmadaBinaries, error) {
	progress, src, cacheDir, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	dir, err := ensureModule(ctx, src, cacheDir, "", karmadaModule, progress)
	if err != nil {
		return nil, err
	}
	return &KarmadaBinaries{dir: dir}, nil
}

// karmadaCRDsDir is the folder, in the karmada module's cache folder, of
// its CRDs.
const karmadaCRDsDir = "karmada-crds"

// copyKarmadaCRDs copies the CRD manifests of the pinned Karmada module,
// from its chart's _crds/bases (one folder per API group). The chart's
// kustomize patches, which add a conversion webhook to the bindings, are
// left out: only one version of them is stored and served.
func copyKarmadaCRDs(ctx context.Context, srcDir, cacheDir string) error {
	dir, err := moduleDir(ctx, srcDir, "github.com/karmada-io/karmada")
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "charts", "karmada", "_crds", "bases")
	dest := filepath.Join(cacheDir, karmadaCRDsDir)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("karmada CRDs: %w", err)
	}
	n := 0
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		return os.WriteFile(filepath.Join(dest, d.Name()), data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("karmada CRDs: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("karmada CRDs: none found in %s", src)
	}
	return nil
}
