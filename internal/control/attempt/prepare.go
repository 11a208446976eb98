package attempt

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Prepare carries failover onto the object of an attempt: the
// consistency label that tells the cluster's agent what to fence, each
// preserved value as a label named after its rule's aliasLabelName, and
// the spec's mutations, each applied when its `when` holds; mutations see
// `preserved` and `restorePath`, the path of the restore point carried
// ("" for none). An error means the runnable's own expressions cannot be
// applied, which is permanent.
func Prepare(obj *unstructured.Unstructured, spec *v1alpha1.RunnableSpec, preserved map[string]string, restorePath string) error {
	_, err := prepare(obj, spec, preserved, restorePath, nil)
	return err
}

// PrepareOnly is Prepare with only the mutations named by only (none
// when it is empty), each still applied only when its `when` holds. It
// returns the indices of the mutations it applied: a writer whose
// admission refuses the object renders each of them alone to name the
// one to blame.
func PrepareOnly(obj *unstructured.Unstructured, spec *v1alpha1.RunnableSpec, preserved map[string]string, restorePath string, only []int) ([]int, error) {
	if only == nil {
		only = []int{}
	}
	return prepare(obj, spec, preserved, restorePath, only)
}

// prepare applies the mutations named by only, every one when only is nil.
func prepare(obj *unstructured.Unstructured, spec *v1alpha1.RunnableSpec, preserved map[string]string, restorePath string, only []int) ([]int, error) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelConsistency] = Consistency(spec)
	for name, value := range preserved {
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			continue // kept in status.preserved and usable by mutations, but not a label value
		}
		labels[name] = value
	}
	obj.SetLabels(labels)
	if spec.Failover == nil {
		return nil, nil
	}
	vars := map[string]any{v1alpha1.MutationVariable: nonNil(preserved), v1alpha1.RestorePathVariable: restorePath}
	var applied []int
	for i, m := range spec.Failover.Mutations {
		if only != nil && !slices.Contains(only, i) {
			continue
		}
		apply, err := evalMutation(m.When, vars)
		if err != nil {
			return nil, fmt.Errorf("spec.failover.mutations[%d].when: %w", i, err)
		}
		if b, ok := apply.(bool); !ok {
			return nil, fmt.Errorf("spec.failover.mutations[%d].when gave %T, not a bool", i, apply)
		} else if !b {
			continue
		}
		value, err := evalMutation(m.Value, vars)
		if err != nil {
			return nil, fmt.Errorf("spec.failover.mutations[%d].value: %w", i, err)
		}
		path := strings.Split(m.Path, ".")
		if err := unstructured.SetNestedField(obj.Object, value, path...); err != nil {
			return nil, fmt.Errorf("spec.failover.mutations[%d]: set %s: %w", i, m.Path, err)
		}
		applied = append(applied, i)
	}
	return applied, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// programs caches compiled mutation expressions: the same few expressions
// run on every attempt of every runnable that uses them.
var programs sync.Map // expression -> cel.Program

func evalMutation(expr string, vars map[string]any) (any, error) {
	p, ok := programs.Load(expr)
	if !ok {
		env, err := v1alpha1.NewMutationEnv()
		if err != nil {
			return nil, err
		}
		ast, iss := env.Compile(expr)
		if iss != nil && iss.Err() != nil {
			return nil, iss.Err()
		}
		prg, err := env.Program(ast, cel.CostLimit(100000))
		if err != nil {
			return nil, err
		}
		p, _ = programs.LoadOrStore(expr, prg)
	}
	out, _, err := p.(cel.Program).Eval(vars)
	if err != nil {
		return nil, err
	}
	v := out.Value()
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case int64:
		return x, nil
	case float64:
		return x, nil
	}
	return nil, fmt.Errorf("gives %s, which cannot go into an object (want a string, number or bool)", out.Type().TypeName())
}
