package sandbox

import (
	"bytes"
	"context"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// toolsDir is the checkout's tools/ folder, from this package's folder.
const toolsDir = "../../tools"

// The pins built into purser are tools/ as it is: every module, every pin
// file, byte for byte.
func TestPinsMatchTools(t *testing.T) {
	t.Setenv("PURSER_TOOLS_DIR", "")
	embedded, err := pinsFrom("")
	if err != nil {
		t.Fatal(err)
	}
	checkout, err := pinsFrom(toolsDir)
	if err != nil {
		t.Fatal(err)
	}
	modules := func(s pinSource) []string {
		entries, err := fs.ReadDir(s.fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			}
		}
		return dirs
	}
	if got, want := modules(embedded), modules(checkout); !slices.Equal(got, want) {
		t.Fatalf("modules built into purser %v, under tools/ %v: run `make pins`", got, want)
	}
	for _, m := range modules(checkout) {
		got, err := embedded.moduleFiles(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := checkout.moduleFiles(m)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("pins of tools/%s built into purser differ from tools/%s: run `make pins`", m, m)
		}
	}
	for _, m := range toolModules {
		if !slices.Contains(modules(checkout), m.dir) {
			t.Errorf("tools module %s is built but not under tools/", m.dir)
		}
	}
}

// The versions printed by `purser version` and in build progress are the
// ones the tools modules really pin.
func TestPinnedVersionsMatchToolsModules(t *testing.T) {
	for _, m := range toolModules {
		data, err := os.ReadFile(filepath.Join(toolsDir, m.dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`\s` + regexp.QuoteMeta(m.version) + `(\s|$)`).Match(data) {
			t.Errorf("tools/%s/go.mod does not pin %s", m.dir, m.version)
		}
	}
	// Every staging module of k8s.io/kubernetes is replaced by its published
	// version, or the build reaches for local paths that do not exist.
	data, _ := os.ReadFile(filepath.Join(toolsDir, "kubernetes", "go.mod"))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "=>") && !strings.HasSuffix(strings.TrimSpace(line), "v0.37.2") {
			t.Errorf("replace not pinned to v0.37.2: %s", line)
		}
	}
}

// writeTools lays out a tools folder: module -> path -> content.
func writeTools(t *testing.T, dir string, modules map[string]map[string]string) pinSource {
	t.Helper()
	for m, files := range modules {
		for p, data := range files {
			f := filepath.Join(dir, m, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pinSource{fsys: os.DirFS(dir), where: dir}
}

// A module's cache folder follows its own pins only: changing another
// module, or adding one, leaves it where it is.
func TestModuleKeyFollowsItsOwnPins(t *testing.T) {
	kube := toolModule{dir: "kubernetes", version: KubernetesVersion}
	etcd := toolModule{dir: "etcd", version: EtcdVersion}
	key := func(src pinSource, m toolModule) string {
		t.Helper()
		files, err := src.moduleFiles(m.dir)
		if err != nil {
			t.Fatal(err)
		}
		return moduleKey(m, files)
	}
	dir := t.TempDir()
	tools := map[string]map[string]string{
		"kubernetes": {"go.mod": "module a\nrequire k8s.io/kubernetes v1.37.2\n", "go.sum": "x\n", "README": "not a pin"},
		"etcd":       {"go.mod": "module b\n", "cmd/etcd/main.go": "package main\n"},
	}
	src := writeTools(t, dir, tools)
	k1, e1 := key(src, kube), key(src, etcd)
	if !strings.HasPrefix(k1, "kubernetes-"+KubernetesVersion+"-") {
		t.Fatalf("cache key %s does not name the module and its version", k1)
	}

	writeTools(t, dir, map[string]map[string]string{
		"etcd":       {"cmd/etcd/main.go": "package main // changed\n"},
		"dex":        {"go.mod": "module c\n"},
		"kubernetes": {"README": "still not a pin"},
	})
	if k2 := key(src, kube); k2 != k1 {
		t.Errorf("kubernetes key moved from %s to %s when only other modules changed", k1, k2)
	}
	if e2 := key(src, etcd); e2 == e1 {
		t.Errorf("etcd key %s did not change with its main.go", e1)
	}
	writeTools(t, dir, map[string]map[string]string{"kubernetes": {"go.mod": "module a\nrequire k8s.io/kubernetes v1.37.3\n"}})
	if k3 := key(src, kube); k3 == k1 {
		t.Errorf("kubernetes key %s did not change with its go.mod", k1)
	}
}

// ensureModule builds a module once into its own folder, with its progress
// lines; a second call finds it built; a cache folder of the layout before
// per-module folders is linked from instead of built again.
func TestEnsureModuleBuildsOnceAndAdoptsLegacy(t *testing.T) {
	ctx := context.Background()
	src := writeTools(t, t.TempDir(), map[string]map[string]string{
		"hello": {"go.mod": "module hello\n\ngo 1.26.0\n", "main.go": "package main\n\nfunc main() { println(\"hello\") }\n"},
	})
	m := toolModule{dir: "hello", version: "v0", binaries: map[string]string{"hello": "."}, estimate: "a second"}
	cache := t.TempDir()

	var progress bytes.Buffer
	dir, err := ensureModule(ctx, src, cache, "", m, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "building hello v0 (first run only, a second on 2 cores)") || !strings.Contains(progress.String(), "built hello in") {
		t.Errorf("first build's progress:\n%s", progress.String())
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(dir, "bin", "hello")).CombinedOutput()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("built binary: %v %q", err, out)
	}
	if main, err := os.ReadFile(filepath.Join(dir, "src", "main.go")); err != nil || !strings.Contains(string(main), "println") {
		t.Errorf("the pins built from are not kept in src/: %v", err)
	}

	progress.Reset()
	again, err := ensureModule(ctx, src, cache, "", m, &progress)
	if err != nil || again != dir || progress.Len() != 0 {
		t.Fatalf("second ensure: %s %v, progress %q", again, err, progress.String())
	}

	// A legacy folder whose binary is not a Go build proves it was linked.
	legacy := filepath.Join(t.TempDir(), "k8s-old")
	if err := os.MkdirAll(filepath.Join(legacy, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "bin", "hello"), []byte("#!/bin/sh\necho legacy\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	progress.Reset()
	adopted, err := ensureModule(ctx, src, t.TempDir(), legacy, m, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), filepath.Join(adopted, "bin", "hello")).CombinedOutput(); err != nil || string(out) != "legacy\n" {
		t.Fatalf("adopted binary: %v %q", err, out)
	}
	if p := progress.String(); !strings.Contains(p, "reusing hello v0 from "+legacy) || strings.Contains(p, "building") {
		t.Errorf("adoption's progress:\n%s", p)
	}
}

// The cache folder of the layout before per-module folders was named after
// a hash of every pin file under tools/, by path from tools/: the key below
// is the one that layout gave these pins.
func TestLegacyKeyIsTheOldLayouts(t *testing.T) {
	tools := map[string]map[string]string{}
	for _, m := range legacyModules {
		tools[m] = map[string]string{"go.mod": "module " + m + "\n"}
	}
	tools["dex"] = map[string]string{"go.mod": "module dex\n"} // added later: not part of it
	key, err := legacyKey(writeTools(t, t.TempDir(), tools))
	if err != nil {
		t.Fatal(err)
	}
	if want := "k8s-" + KubernetesVersion + "-9aeb06a46afa"; key != want {
		t.Errorf("legacy key %s, want %s", key, want)
	}
}

func TestRetargetStageSelectsWorkflowPods(t *testing.T) {
	in := []byte(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: In
      values: [Running]
    - key: '.metadata.ownerReferences.[].kind'
      operator: In
      values: [Job]
`)
	out, err := retargetStage(in, "pod-complete-workflow", "Workflow")
	if err != nil {
		t.Fatal(err)
	}
	var stage struct {
		Metadata struct{ Name string }
		Spec     struct {
			Selector struct {
				MatchExpressions []struct {
					Key    string
					Values []string
				} `json:"matchExpressions"`
			}
		}
	}
	if err := yaml.Unmarshal(out, &stage); err != nil {
		t.Fatal(err)
	}
	if stage.Metadata.Name != "pod-complete-workflow" {
		t.Errorf("name %q", stage.Metadata.Name)
	}
	exprs := stage.Spec.Selector.MatchExpressions
	if len(exprs) != 2 || exprs[0].Values[0] != "Running" || exprs[1].Values[0] != "Workflow" {
		t.Errorf("selector %+v", exprs)
	}
	if _, err := retargetStage([]byte("metadata: {name: x}\nspec: {selector: {matchExpressions: []}}\n"), "y", "Workflow"); err == nil {
		t.Error("a stage without an owner selector was accepted")
	}
}
