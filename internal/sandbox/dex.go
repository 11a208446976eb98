package sandbox

import (
	"context"
	"io"
	"path/filepath"
)

// DexVersion is the release of Dex, the OpenID Connect provider the tests
// of single sign-on run, pinned by tools/dex.
const DexVersion = "v2.45.1"

// BinDex is the name of Dex's binary in the folder EnsureDex fills.
const BinDex = "dex"

// dexModule is built apart from the clusters' binaries: only tests need
// it, so neither `purser up` nor a change of its pin rebuilds the others.
// Without cgo, Dex's SQLite storage is left out (the tests use its
// in-memory storage), which saves compiling SQLite's C code.
var dexModule = toolModule{
	dir:      "dex",
	version:  DexVersion,
	binaries: map[string]string{BinDex: "github.com/dexidp/dex/cmd/dex"},
	estimate: "about 3 min",
	env:      []string{"CGO_ENABLED=0"},
}

// EnsureDex returns the path of the Dex binary pinned by tools/dex,
// building it on first use into its module's cache folder, as Ensure does
// for the clusters' binaries.
func EnsureDex(ctx context.Context, opts BuildConfig) (string, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	src, err := pinsFrom(opts.ToolsDir)
	if err != nil {
		return "", err
	}
	cacheDir, err := cacheRoot(opts.CacheDir)
	if err != nil {
		return "", err
	}
	dir, err := ensureModule(ctx, src, cacheDir, "", dexModule, progress)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "bin", BinDex), nil
}
