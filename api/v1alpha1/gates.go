package v1alpha1

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Gate is a health gate of a rollout beyond Synced: the objects it
// selects in the deployable's namespace on each cluster of a wave, as
// the inventory records them, must not turn unhealthy after the new
// generation landed there. Runnables are judged through their objects
// (until spec.dependsOn names the deployables they use): select them by
// their labels.
type Gate struct {
	Name string `json:"name"`
	// APIVersion and Kind narrow the objects (both optional).
	APIVersion string                `json:"apiVersion,omitempty"`
	Kind       string                `json:"kind,omitempty"`
	Selector   *metav1.LabelSelector `json:"selector,omitempty"`
	// Unhealthy is a CEL expression over `object` (the recorded object),
	// true when it is unhealthy, e.g. for Deployments losing availability:
	// object.?status.?availableReplicas.orValue(0) < object.spec.replicas.
	// Without it, an object is unhealthy when purser's health judgement
	// of it is Unhealthy.
	Unhealthy string `json:"unhealthy,omitempty"`
}

// GateVariable is the CEL variable holding the object a gate judges.
const GateVariable = "object"

// gateCostLimit bounds one evaluation of a gate's rule: it runs for every
// selected object each time a rollout is decided.
const gateCostLimit = 100_000

// CompileGate compiles a gate's Unhealthy expression to a program giving
// a bool.
func CompileGate(expr string) (cel.Program, error) {
	env, err := cel.NewEnv(
		cel.Variable(GateVariable, cel.MapType(cel.StringType, cel.DynType)),
		cel.OptionalTypes(),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(4096),
	)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must give a bool, gives %s", ast.OutputType())
	}
	return env.Program(ast, cel.CostLimit(gateCostLimit))
}

func (v *validator) gates(path string, gs []Gate) {
	names := map[string]bool{}
	for i, g := range gs {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case g.Name == "":
			v.add(p+".name", "is required")
		case names[g.Name]:
			v.add(p+".name", "%q names another gate already", g.Name)
		}
		names[g.Name] = true
		if g.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(g.Selector); err != nil {
				v.add(p+".selector", "%s", err.Error())
			}
		}
		if g.Unhealthy != "" {
			if _, err := CompileGate(g.Unhealthy); err != nil {
				v.add(p+".unhealthy", "%s", err.Error())
			}
		}
	}
}
