package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// tools/karmada pins the release KarmadaVersion names, with no replace of
// its own (Karmada's go.mod has none to repeat).
func TestKarmadaPin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(toolsDir, "karmada", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^(require)?\s*github\.com/karmada-io/karmada ` + regexp.QuoteMeta(KarmadaVersion) + `\b`).Match(data) {
		t.Errorf("tools/karmada/go.mod does not require Karmada %s", KarmadaVersion)
	}
	if regexp.MustCompile(`(?m)^replace`).Match(data) {
		t.Error("tools/karmada/go.mod replaces a module")
	}
}
