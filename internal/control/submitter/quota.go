package submitter

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// overQuota says why one more runnable of namespace asking for demand
// would pass its namespace's quota q; "" when it has none (nil) or stays
// within. With a quota per cluster label value (spec.perLabel), a
// candidate whose value's share is used up is marked as lacking room
// there (its Lacks), so that placement goes elsewhere; when every
// labelled candidate is so, the runnable is over quota. The quota is
// read with the clusters (one row, so an edit counts at once); the usage
// is the kept sums', which count the runnables placed before this one
// (placements are serialised), and the placement's transaction checks
// it again against the store (recheck).
func (s *Submitter) overQuota(q *store.Quota, namespace string, demand placement.Demand, cands []placement.Cluster) string {
	if q == nil {
		return ""
	}
	return quotaVerdict(namespace, q, s.usageByCluster(namespace), labelsOf(cands), demand, cands)
}

// quotaVerdict is overQuota's decision on usage, the namespace's usage
// per cluster; labels gives each cluster's labels (placement.QuotaVerdict,
// which the drill's what-if applies too).
func quotaVerdict(namespace string, q *store.Quota, usage map[string]corev1.ResourceList, labels map[string]map[string]string,
	demand placement.Demand, cands []placement.Cluster) string {
	var spec v1alpha1.QuotaSpec
	if err := json.Unmarshal(q.Spec, &spec); err != nil {
		return "quota " + namespace + " does not decode: " + err.Error()
	}
	return placement.QuotaVerdict(namespace, spec, usage, labels, demand, cands)
}

func labelsOf(cands []placement.Cluster) map[string]map[string]string {
	out := make(map[string]map[string]string, len(cands))
	for _, c := range cands {
		out[c.Name] = c.Labels
	}
	return out
}

// storedUsage is the namespace's usage per cluster as the store counts
// it: the recount the kept sums stand for.
func storedUsage(byCluster map[string][][]byte) map[string]corev1.ResourceList {
	out := make(map[string]corev1.ResourceList, len(byCluster))
	for c, sts := range byCluster {
		out[c] = placement.StoredUsage(sts)
	}
	return out
}
