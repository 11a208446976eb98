package attempt

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

// standIn is the value of every preserved value and of the restore point
// when a runnable's mutations are rendered at accept, before anything is
// preserved.
const standIn = "stand-in"

// Renderings returns the template as each failover mutation alone would
// rewrite it for a later attempt, and as all of them together: what the
// API reviews at accept (admission.Review.Written), so that a mutation
// that would make a later attempt run what the template may not
// (hostPID, a node of its choosing, purser's own service account, a
// podSpecPatch) is refused before it is stored. A mutation's `when` is
// taken to hold, since nothing is preserved yet; its value is computed
// with every preserved value and the restore point set to a stand-in. A
// value that cannot be computed so (it reads a value no rule preserves)
// is left to the submitter, which reviews each attempt's object, with
// the values it really carries, before it creates it.
func Renderings(spec *v1alpha1.RunnableSpec) []v1alpha1.Rendering {
	f := spec.Failover
	if f == nil || len(f.Mutations) == 0 {
		return nil
	}
	preserved := map[string]string{}
	if a := f.Application; a != nil && a.StatePreservation != nil {
		for _, r := range a.StatePreservation.Rules {
			preserved[r.AliasLabelName] = standIn
		}
	}
	render := func(ms []v1alpha1.Mutation) (map[string]any, bool) {
		raw, err := json.Marshal(spec.Template)
		if err != nil {
			return nil, false
		}
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &obj.Object); err != nil {
			return nil, false
		}
		s := *spec
		fc := *f
		fc.Mutations = ms
		s.Failover = &fc
		if err := Prepare(obj, &s, preserved, standIn); err != nil {
			return nil, false
		}
		return obj.Object, true
	}
	var out []v1alpha1.Rendering
	var together []v1alpha1.Mutation
	for i, m := range f.Mutations {
		always := v1alpha1.Mutation{When: "true", Path: m.Path, Value: m.Value}
		obj, ok := render([]v1alpha1.Mutation{always})
		if !ok {
			continue
		}
		together = append(together, always)
		out = append(out, v1alpha1.Rendering{Cause: fmt.Sprintf("spec.failover.mutations[%d]", i), Object: obj})
	}
	if len(together) > 1 {
		if obj, ok := render(together); ok {
			out = append(out, v1alpha1.Rendering{Cause: "spec.failover.mutations together", Object: obj})
		}
	}
	return out
}
