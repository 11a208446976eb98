package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name, release string
		info          debug.BuildInfo
		want          string
	}{
		{"release", "v1.2.3", debug.BuildInfo{}, "v1.2.3"},
		{"a checkout", "", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201081249-a123c38c5f76"},
			Settings: vcs("vcs.revision", "a123c38c5f7601d04cc1e06ced961d7d81821ad9", "vcs.time", "2026-12-01T08:12:49Z", "vcs.modified", "false")},
			"v0.0.0-20261201081249-a123c38c5f76 (commit a123c38c5f76 of 2026-12-01T08:12:49Z)"},
		{"a changed checkout", "", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "a123c38c5f7601d0", "vcs.modified", "true")},
			"devel (commit a123c38c5f76, with uncommitted changes)"},
		{"go install", "", debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
		{"nothing recorded", "", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel (no commit recorded: built with -buildvcs=false"},
	} {
		if got := buildVersion(tc.release, &tc.info, true); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// `go build` in a git checkout (a clone, as a user has it) gives a binary
// whose version names the commit it was built from.
func TestVersionOfACheckout(t *testing.T) {
	t.Parallel()
	head, err := exec.CommandContext(t.Context(), "git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "purser")
	if out, err := exec.CommandContext(t.Context(), "git", "clone", "-q", "--no-hardlinks", "../..", clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "purser")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/purser")
	build.Dir = clone
	// -buildvcs=auto, go's default, whatever this machine's GOFLAGS say.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("purser version: %v\n%s", err, out)
	}
	// The clone holds what is committed, so only the commit is checked
	// here; TestBuildVersion checks the wording.
	if want := strings.TrimSpace(string(head))[:12]; !strings.Contains(strings.SplitN(string(out), "\n", 2)[0], want) {
		t.Fatalf("purser version of a checkout at %s:\n%s", head, out)
	}
}
