package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
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
// building it on first use into a cache folder of its own, named after
// those pins, with the same lock as Ensure.
func EnsureDex(ctx context.Context, opts BuildOptions) (string, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	toolsDir, err := findToolsDir(opts.ToolsDir)
	if err != nil {
		return "", err
	}
	cacheDir, err := cacheRoot(opts.CacheDir)
	if err != nil {
		return "", err
	}
	sum, err := pinKey(filepath.Join(toolsDir, dexModule.dir))
	if err != nil {
		return "", err
	}
	// pinKey's name starts with the Kubernetes version; only its hash
	// of the folder's files matters here.
	key := "dex-" + DexVersion + "-" + sum[strings.LastIndex(sum, "-")+1:]
	b := &Binaries{Dir: filepath.Join(cacheDir, key)}
	marker := filepath.Join(b.Dir, "complete")
	if _, err := os.Stat(marker); err == nil {
		return b.Path(BinDex), nil
	}
	if err := os.MkdirAll(filepath.Join(b.Dir, "bin"), 0o755); err != nil {
		return "", fmt.Errorf("dex cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, key+".lock"), progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return b.Path(BinDex), nil // built by another process while we waited
	}
	if err := buildModule(ctx, toolsDir, b, dexModule, progress); err != nil {
		return "", err
	}
	if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("dex cache: %w", err)
	}
	return b.Path(BinDex), nil
}
