package v1alpha1

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOverrides(t *testing.T) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"endpoint": "default", "replicas": "1"}}
	dc := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"dc": v}}
	}
	os := []Override{
		{ClusterSelector: dc("dc-2"), Patch: json.RawMessage(`{"data":{"endpoint":"dc2.example","replicas":null}}`)},
		{ClusterSelector: dc("dc-3"), Patch: json.RawMessage(`[{"op":"replace","path":"/data/endpoint","value":"dc3.example"}]`)},
		{Patch: json.RawMessage(`{"data":{"everywhere":"yes"}}`)},
	}
	cases := []struct {
		dc   string
		want map[string]any
	}{
		{"dc-1", map[string]any{"endpoint": "default", "replicas": "1", "everywhere": "yes"}},
		{"dc-2", map[string]any{"endpoint": "dc2.example", "everywhere": "yes"}},
		{"dc-3", map[string]any{"endpoint": "dc3.example", "replicas": "1", "everywhere": "yes"}},
	}
	for _, c := range cases {
		got, err := ApplyOverrides(tmpl, os, OverridesFor(os, map[string]string{"dc": c.dc}))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got["data"])
		b, _ := json.Marshal(c.want)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: data %s, want %s", c.dc, a, b)
		}
	}
	if tmpl["data"].(map[string]any)["endpoint"] != "default" {
		t.Fatal("the template was changed")
	}

	// A patch that cannot apply is refused at validation, naming it.
	d := &Deployable{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindDeployable}, Metadata: ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: DeployableSpec{Template: tmpl, Overrides: []Override{
			{Patch: json.RawMessage(`[{"op":"add","path":"/nothere/x","value":"x"}]`)},
			{Patch: json.RawMessage(`"text"`)},
		}}}
	errs := ValidateDeployable(d)
	msg := errs.String()
	if !strings.Contains(msg, "spec.overrides[0].patch") || !strings.Contains(msg, "spec.overrides[1].patch") {
		t.Fatalf("validation: %v", errs)
	}
}
