package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The versions printed by `purser version` and in build progress are the
// ones the tools modules really pin.
func TestPinnedVersionsMatchToolsModules(t *testing.T) {
	tools, err := findToolsDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range toolModules {
		data, err := os.ReadFile(filepath.Join(tools, m.dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`\s` + regexp.QuoteMeta(m.version) + `(\s|$)`).Match(data) {
			t.Errorf("tools/%s/go.mod does not pin %s", m.dir, m.version)
		}
	}
	// Every staging module of k8s.io/kubernetes is replaced by its published
	// version, or the build reaches for local paths that do not exist.
	data, _ := os.ReadFile(filepath.Join(tools, "kubernetes", "go.mod"))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "=>") && !strings.HasSuffix(strings.TrimSpace(line), "v0.37.2") {
			t.Errorf("replace not pinned to v0.37.2: %s", line)
		}
	}
}

func TestPinKeyChangesWithPins(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "kubernetes"), 0o755)
	os.WriteFile(filepath.Join(dir, "kubernetes", "go.mod"), []byte("module a\nrequire k8s.io/kubernetes v1.37.2\n"), 0o644)
	k1, err := pinKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "kubernetes", "go.mod"), []byte("module a\nrequire k8s.io/kubernetes v1.37.3\n"), 0o644)
	k2, _ := pinKey(dir)
	if k1 == k2 {
		t.Fatalf("cache key %s did not change with the pins", k1)
	}
	if !strings.HasPrefix(k1, "k8s-"+KubernetesVersion+"-") {
		t.Fatalf("cache key %s does not name the Kubernetes version", k1)
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
