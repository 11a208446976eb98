package farm

import (
	"slices"
	"strings"
	"testing"
)

// The farm builds purser with the image's own command line, read from
// deploy/Dockerfile.
func TestImageBuild(t *testing.T) {
	env, args, err := imageBuild("../../../deploy/Dockerfile", "/tmp/out")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("env %v: the image's binary is static (CGO_ENABLED=0)", env)
	}
	got := strings.Join(args, " | ")
	for _, want := range []string{"build", "-trimpath", "-ldflags | -s -w -X main.version=" + ImageVersion, "-o | /tmp/out", "./cmd/purser"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %s: want %q", got, want)
		}
	}
	if _, err := shellWords(`go build -ldflags "-s`); err == nil {
		t.Error("an unclosed quote was accepted")
	}
}
