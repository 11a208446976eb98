package purser_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// The README's layout is where a newcomer learns where things are: every
// package is in it, by its path or, indented, by its name under its parent.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Layout\n\n```\n")
	layout, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("README.md has no Layout block")
	}
	named := map[string]bool{}
	parent := ""
	for _, line := range strings.Split(layout, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasSuffix(fields[0], "/") {
			continue
		}
		dir := strings.TrimSuffix(fields[0], "/")
		if strings.HasPrefix(line, " ") {
			dir = path.Join(parent, dir)
		} else {
			parent = dir
		}
		named[dir] = true
	}
	// Each package under internal/ is named; elsewhere a named folder
	// covers what is in it (cmd/purser/, test/soak/farm/).
	covered := func(dir string) bool {
		if strings.HasPrefix(dir, "internal/") {
			return named[dir]
		}
		for d := dir; d != "."; d = path.Dir(d) {
			if named[d] {
				return true
			}
		}
		return false
	}
	packages, missing := map[string]bool{}, map[string]bool{}
	root := os.DirFS(".")
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || p == "tools") {
			return fs.SkipDir // hidden, fixtures, or separate modules named as one
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		if dir == "." {
			return nil // this package, about the repository as a whole
		}
		if !covered(dir) && !missing[dir] {
			missing[dir] = true
			t.Errorf("README.md's layout does not name %s/", dir)
		}
		packages[dir] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !packages["internal/sandbox/sandboxtest"] || !packages["cmd/purser"] {
		t.Fatalf("the walk missed packages: found %d", len(packages))
	}
}
