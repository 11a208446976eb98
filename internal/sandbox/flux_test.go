package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// tools/flux pins the release FluxKustomizeControllerVersion names; its
// replacements are the controller's own (a dependency's replace
// directives apply only in its own module), its API module at the same
// release among them.
func TestFluxPin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(toolsDir, "flux", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.QuoteMeta(FluxKustomizeControllerVersion)
	if !regexp.MustCompile(`(?m)^(require)?\s*github\.com/fluxcd/kustomize-controller ` + v + `\b`).Match(data) {
		t.Errorf("tools/flux/go.mod does not require kustomize-controller %s", FluxKustomizeControllerVersion)
	}
	if !regexp.MustCompile(`(?m)^\s*github\.com/fluxcd/kustomize-controller/api => github\.com/fluxcd/kustomize-controller/api ` + v + `\b`).Match(data) {
		t.Errorf("tools/flux/go.mod does not take kustomize-controller's API at %s", FluxKustomizeControllerVersion)
	}
}
