package flink

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The operator's merge: objects by field, lists by index (or by name),
// the role's values winning; the inputs are left as they were.
func TestPodTemplate(t *testing.T) {
	obj := decode(t, `
spec:
  podTemplate: {spec: {containers: [{name: a, image: x, env: [{name: E, value: "1"}]}, {name: b, image: b}], hostPID: false}}
  jobManager:
    podTemplate: {spec: {containers: [{name: b, image: y}], hostPID: true}}
`)
	for _, tc := range []struct {
		byName bool
		want   string
	}{
		{false, `{spec: {containers: [{name: b, image: y, env: [{name: E, value: "1"}]}, {name: b, image: b}], hostPID: true}}`},
		{true, `{spec: {containers: [{name: a, image: x, env: [{name: E, value: "1"}]}, {name: b, image: y}], hostPID: true}}`},
	} {
		got, _ := yaml.Marshal(PodTemplate(obj, "jobManager", tc.byName))
		want, _ := yaml.Marshal(decode(t, tc.want))
		if !bytes.Equal(got, want) {
			t.Errorf("byName %v:\n%s\nwant:\n%s", tc.byName, got, want)
		}
	}
	if common, _ := yaml.Marshal(obj["spec"].(map[string]any)["podTemplate"]); strings.Contains(string(common), "image: y") {
		t.Errorf("the common template was changed:\n%s", common)
	}
}
