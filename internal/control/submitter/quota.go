package submitter

import (
	"encoding/json"
	"slices"
	"strings"

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
// per cluster; labels gives each cluster's labels.
func quotaVerdict(namespace string, q *store.Quota, usage map[string]corev1.ResourceList, labels map[string]map[string]string,
	demand placement.Demand, cands []placement.Cluster) string {
	var spec v1alpha1.QuotaSpec
	if err := json.Unmarshal(q.Spec, &spec); err != nil {
		return "quota " + namespace + " does not decode: " + err.Error()
	}
	total := corev1.ResourceList{}
	for _, u := range usage {
		placement.AddTo(total, u)
	}
	if ok, why := placement.QuotaAllows(namespace, spec.Limits, total, demand); !ok {
		return why
	}
	if spec.PerLabel == nil {
		return ""
	}
	return perLabelQuota(namespace, spec.PerLabel, usage, labels, demand, cands)
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

// perLabelQuota marks the candidates whose label value has no room left
// in the namespace's quota for it, and says why when no labelled
// candidate has any.
func perLabelQuota(namespace string, pl *v1alpha1.QuotaPerLabel, usage map[string]corev1.ResourceList, labels map[string]map[string]string,
	demand placement.Demand, cands []placement.Cluster) string {
	used := map[string]corev1.ResourceList{}
	for cluster, u := range usage {
		v, ok := labels[cluster][pl.Label]
		if !ok {
			continue
		}
		if used[v] == nil {
			used[v] = corev1.ResourceList{}
		}
		placement.AddTo(used[v], u)
	}
	var whys []string
	open := false
	for i := range cands {
		v, ok := cands[i].Labels[pl.Label]
		if !ok {
			open = true // not bounded by the per-label quota
			continue
		}
		if fits, why := placement.QuotaAllows(namespace+" for "+pl.Label+"="+v, pl.Limits, used[v], demand); !fits {
			if cands[i].Lacks == "" {
				cands[i].Lacks = "room in its " + strings.TrimPrefix(why, "over ")
			}
			whys = append(whys, why)
			continue
		}
		open = true
	}
	if open || len(whys) == 0 {
		return ""
	}
	slices.Sort(whys)
	return strings.Join(slices.Compact(whys), "; ")
}
