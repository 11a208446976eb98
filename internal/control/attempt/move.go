package attempt

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/flink"
)

// What a planned move hands the next attempt: its target, and for a
// Flink job the savepoint it stopped with.

// Moving is the planned move whose next attempt is being placed after
// the attempt number ended for reason, or nil: a move that ended that very
// attempt and has not placed its copy yet.
func Moving(m *v1alpha1.Move, number int, reason string) *v1alpha1.Move {
	if m == nil || m.Step != v1alpha1.MoveCopyStarting || reason != v1alpha1.ReasonPlannedMove || number != m.Attempt {
		return nil
	}
	return m
}

// Toward restricts the placement to the move's target, which the API
// found eligible under it.
func Toward(p v1alpha1.Placement, cluster string) v1alpha1.Placement {
	aff := v1alpha1.ClusterAffinity{}
	if p.ClusterAffinity != nil {
		aff = *p.ClusterAffinity
	}
	aff.ClusterNames = []string{cluster}
	aff.Exclude = slices.DeleteFunc(slices.Clone(aff.Exclude), func(s string) bool { return s == cluster })
	p.ClusterAffinity = &aff
	return p
}

// HandOver makes the object of attempt number restore the savepoint a
// planned move stopped its job with: spec.job.initialSavepointPath set to
// exactly that savepoint, whatever the runnable's mutations say. It
// reports whether it did.
func HandOver(obj *unstructured.Unstructured, m *v1alpha1.Move, number int) bool {
	if m == nil || m.Savepoint == "" || m.Step != v1alpha1.MoveCopyStarting || number <= m.Attempt {
		return false
	}
	return flink.RestoreFrom(obj.Object, m.Savepoint)
}
