package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// demand checks what a runnable declares it needs: spec.resources and
// spec.dependsOn.
func (v *validator) demand(spec *RunnableSpec) {
	for name, q := range spec.Resources {
		path := fmt.Sprintf("spec.resources[%s]", name)
		// A resource name is a qualified name, as in a container's
		// resources (cpu, memory, nvidia.com/gpu).
		if errs := utilvalidation.IsQualifiedName(name); len(errs) > 0 {
			v.add(path, "is not a resource name: %s", errs[0])
			continue
		}
		parsed, err := resource.ParseQuantity(q)
		if err != nil {
			v.add(path, "%q is not a Kubernetes quantity (e.g. 2500m, 3Gi, 1)", q)
			continue
		}
		if parsed.Sign() < 0 {
			v.add(path, "must not be negative")
		}
	}
	if p := spec.Priority; p != nil && p.Type == intstr.String {
		if errs := utilvalidation.IsDNS1123Label(p.StrVal); len(errs) > 0 {
			v.add("spec.priority", "%q is neither an integer nor a priority class name", p.StrVal)
		}
	}
	seen := map[string]bool{}
	for i, d := range spec.DependsOn {
		path := fmt.Sprintf("spec.dependsOn[%d].deployable", i)
		switch {
		case d.Deployable == "":
			v.add(path, "must name a deployable of the runnable's namespace")
		case len(utilvalidation.IsDNS1123Subdomain(d.Deployable)) > 0:
			v.add(path, "%q is not a deployable name", d.Deployable)
		case seen[d.Deployable]:
			v.add(path, "%q is named twice", d.Deployable)
		}
		seen[d.Deployable] = true
	}
}
