package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// tools/dex pins the release DexVersion names, by its commit's
// pseudo-version. (Its cache folder is its own: TestModuleKeyFollowsItsOwnPins.)
func TestDexPin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(toolsDir, "dex", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^// Dex ` + regexp.QuoteMeta(DexVersion) + `,`).Match(data) {
		t.Errorf("tools/dex/go.mod does not say it pins Dex %s", DexVersion)
	}
	if !regexp.MustCompile(`(?m)^require github\.com/dexidp/dex v0\.0\.0-\d{14}-[0-9a-f]{12}$`).Match(data) {
		t.Errorf("tools/dex/go.mod does not require Dex by a pseudo-version")
	}
}
