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

// The Flux assets are found where copyFluxCRDs looks: the controller's
// module, and the version of the source API it is built with.
func TestFluxModules(t *testing.T) {
	dir := filepath.Join(toolsDir, "flux")
	if v, err := moduleVersion(t.Context(), dir, "github.com/fluxcd/source-controller/api"); err != nil || !regexp.MustCompile(`^v1\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("the source API's version: %q, %v", v, err)
	}
	if _, err := moduleDir(t.Context(), dir, "github.com/fluxcd/kustomize-controller"); err != nil {
		t.Fatal(err)
	}
}
