package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestValidateDemand(t *testing.T) {
	r := validRunnable()
	r.Spec.Resources = map[string]string{"cpu": "2500m", "nvidia.com/gpu": "1"}
	r.Spec.DependsOn = []Dependency{{Deployable: "app-config"}}
	high := intstr.FromString("high")
	r.Spec.Priority = &high
	if errs := ValidateRunnable(r, testNow); len(errs) > 0 {
		t.Fatalf("valid demand refused: %v", errs)
	}
	r.Spec.Resources = map[string]string{"cpu": "lots", "memory": "-1Gi", "bad name!": "1"}
	r.Spec.DependsOn = []Dependency{{Deployable: ""}, {Deployable: "a"}, {Deployable: "a"}}
	bad := intstr.FromString("Not A Class")
	r.Spec.Priority = &bad
	got := ValidateRunnable(r, testNow).String()
	for _, want := range []string{"spec.resources[cpu]", "spec.resources[memory]: must not be negative", "spec.resources[bad name!]",
		"spec.dependsOn[0].deployable", `spec.dependsOn[2].deployable: "a" is named twice`, "spec.priority"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %q", got, want)
		}
	}
}
