// Package attempt is what one attempt of a runnable carries from the one
// before it, and how it goes onto its cluster: the consistency label the
// cluster's agent fences by, the preserved values and restore point
// (Preserve decides what travels, Prepare writes it into the object with
// the runnable's mutations), and the cluster an evicted attempt must not
// return to. The failover controller ends attempts with it and the
// submitter starts the next ones with it, so neither links the other.
package attempt

import (
	"slices"

	"github.com/purser-io/purser/api/v1alpha1"
)

// ResultEvicted ends an attempt that the failover controller moved away.
const ResultEvicted = "Evicted"

// RestorePathKey is the key of the restore point's path in an attempt's
// carriedIn and reported.
const RestorePathKey = v1alpha1.RestorePathVariable

// Consistency is the runnable's consistency, AtMostOne unless it asks for
// AtLeastOne: a runnable without a failover section gets the safe choice
// too, since cluster failover moves every runnable.
func Consistency(spec *v1alpha1.RunnableSpec) string {
	if f := spec.Failover; f != nil && f.Consistency == v1alpha1.ConsistencyAtLeastOne {
		return v1alpha1.ConsistencyAtLeastOne
	}
	return v1alpha1.ConsistencyAtMostOne
}

// Excluding adds cluster to the placement's exclusions: the cluster an
// attempt was evicted from is never the next attempt's.
func Excluding(p v1alpha1.Placement, cluster string) v1alpha1.Placement {
	aff := v1alpha1.ClusterAffinity{}
	if p.ClusterAffinity != nil {
		aff = *p.ClusterAffinity
	}
	aff.Exclude = append(slices.Clone(aff.Exclude), cluster)
	p.ClusterAffinity = &aff
	return p
}
