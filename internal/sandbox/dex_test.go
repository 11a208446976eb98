package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// tools/dex pins the release DexVersion names, by its commit's
// pseudo-version, and is left out of the cluster binaries' cache key.
func TestDexPin(t *testing.T) {
	tools, err := findToolsDir("")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tools, "dex", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^// Dex ` + regexp.QuoteMeta(DexVersion) + `,`).Match(data) {
		t.Errorf("tools/dex/go.mod does not say it pins Dex %s", DexVersion)
	}
	if !regexp.MustCompile(`(?m)^require github\.com/dexidp/dex v0\.0\.0-\d{14}-[0-9a-f]{12}$`).Match(data) {
		t.Errorf("tools/dex/go.mod does not require Dex by a pseudo-version")
	}
	// On a copy: other test binaries read the real folder meanwhile.
	dir := t.TempDir()
	for _, f := range []string{"kubernetes/go.mod", "dex/go.mod"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, err := pinKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dex", "go.mod"), []byte("module y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, err := pinKey(dir); err != nil || after != before {
		t.Errorf("a change of tools/dex changed the cluster binaries' key: %s -> %s (%v)", before, after, err)
	}
}
