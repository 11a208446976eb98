package sandbox

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// embeddedPins is a copy of the files under tools/ that decide what is
// built (see isPinFile), so that a purser binary built or installed
// anywhere can build its sandbox: go:embed cannot reach tools/, which holds
// modules of their own. Each file carries pinSuffix, since a go.mod under
// pins/ would make it a module go:embed cannot read, and a Go file would be
// compiled into purser. `make pins` refreshes the copy; TestPinsMatchTools
// keeps it identical to tools/.
//
//go:embed pins
var embeddedPins embed.FS

const pinSuffix = ".pin"

// isPinFile says which files of a tools module decide its binaries.
func isPinFile(name string) bool {
	return name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go")
}

// pinSource is a tree laid out as tools/: one folder per module.
type pinSource struct {
	fsys   fs.FS
	suffix string // carried by every pin file's name: pinSuffix when embedded
	where  string // for messages
}

// pinsFrom returns the tools/ folder named explicitly or by
// $PURSER_TOOLS_DIR, for trying new pins without rebuilding purser, else
// the copy inside the binary.
func pinsFrom(explicit string) (pinSource, error) {
	if explicit == "" {
		explicit = os.Getenv("PURSER_TOOLS_DIR")
	}
	if explicit == "" {
		sub, err := fs.Sub(embeddedPins, "pins")
		if err != nil {
			return pinSource{}, fmt.Errorf("sandbox pins: %w", err)
		}
		return pinSource{fsys: sub, suffix: pinSuffix, where: "the pins built into purser"}, nil
	}
	abs, err := filepath.Abs(explicit)
	if err != nil {
		return pinSource{}, fmt.Errorf("sandbox: tools folder %s: %w", explicit, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "kubernetes", "go.mod")); err != nil {
		return pinSource{}, fmt.Errorf("sandbox: %s is not purser's tools/ folder (no kubernetes/go.mod in it)", abs)
	}
	return pinSource{fsys: os.DirFS(abs), where: abs}, nil
}

// moduleFiles returns the pin files of one module, keyed by their slash
// path inside it.
func (s pinSource) moduleFiles(module string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(s.fsys, module, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, ok := strings.CutSuffix(d.Name(), s.suffix)
		if d.IsDir() || !ok || !isPinFile(name) {
			return nil
		}
		data, err := fs.ReadFile(s.fsys, p)
		if err != nil {
			return err
		}
		files[strings.TrimSuffix(strings.TrimPrefix(p, module+"/"), s.suffix)] = data
		return nil
	})
	if err == nil && files["go.mod"] == nil {
		err = errors.New("no go.mod")
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: pins of tools module %s in %s: %w", module, s.where, err)
	}
	return files, nil
}

// pinHash hashes files in path order, each with its path and length, so
// that moving bytes from one file to the next changes the hash.
func pinHash(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// moduleKey names a module's cache folder: the module and its version for
// people, and the hash of its own pins, so that a change to one module, or
// a new module, builds that module alone.
func moduleKey(m toolModule, files map[string][]byte) string {
	return m.dir + "-" + m.version + "-" + pinHash(files)
}

// legacyModules are the modules a cache folder was keyed by before each
// module had its own folder.
var legacyModules = []string{"argo", "etcd", "kubernetes", "kwok"}

// legacyKey names the folder in which purser kept every sandbox binary
// before each module had its own: a hash of the pins of all of tools/, as
// it was then. Binaries found there are linked, not built again (see
// adoptLegacy); once no such cache is left, this can go.
func legacyKey(src pinSource) (string, error) {
	all := map[string][]byte{}
	for _, m := range legacyModules {
		files, err := src.moduleFiles(m)
		if err != nil {
			return "", err
		}
		for p, data := range files {
			all[path.Join(m, p)] = data
		}
	}
	return "k8s-" + KubernetesVersion + "-" + pinHash(all), nil
}
