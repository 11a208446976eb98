package placement

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
)

// QuotaUsage sums what a namespace's active runnables request (their
// status.requests) and counts them under "runnables".
func QuotaUsage(requests []map[string]string) corev1.ResourceList {
	used := corev1.ResourceList{v1alpha1.QuotaRunnables: *resource.NewQuantity(int64(len(requests)), resource.DecimalSI)}
	for _, r := range requests {
		l, err := ParseList(r)
		if err != nil {
			continue // written by the submitter from a valid list
		}
		AddTo(used, l)
	}
	return used
}

// AddTo adds each quantity of l to into's.
func AddTo(into, l corev1.ResourceList) {
	for name, q := range l {
		cur := into[name]
		cur.Add(q)
		into[name] = cur
	}
}

// SubFrom takes each quantity of l off into's: AddTo undone.
func SubFrom(into, l corev1.ResourceList) {
	for name, q := range l {
		cur := into[name]
		cur.Sub(q)
		into[name] = cur
	}
}

// StoredUsage is QuotaUsage of the stored statuses of a namespace's
// active runnables (store.Runnables.ActiveStatuses): their
// status.requests, nothing for a status that has none or does not decode.
func StoredUsage(statuses [][]byte) corev1.ResourceList {
	requests := make([]map[string]string, len(statuses))
	for i, b := range statuses {
		var st v1alpha1.RunnableStatus
		if len(b) > 0 && json.Unmarshal(b, &st) == nil {
			requests[i] = st.Requests
		}
	}
	return QuotaUsage(requests)
}

// StoredUsageByLabel is StoredUsage per value of a cluster label: the
// active runnables' stored statuses by cluster
// (store.Runnables.ActiveStatusesByCluster) count for the value valueOf
// gives their cluster, and not at all when it has none.
func StoredUsageByLabel(byCluster map[string][][]byte, valueOf func(cluster string) (string, bool)) map[string]corev1.ResourceList {
	byValue := map[string][][]byte{}
	for cluster, sts := range byCluster {
		if v, ok := valueOf(cluster); ok {
			byValue[v] = append(byValue[v], sts...)
		}
	}
	out := make(map[string]corev1.ResourceList, len(byValue))
	for v, sts := range byValue {
		out[v] = StoredUsage(sts)
	}
	return out
}

// QuotaAllows reports whether one more runnable asking for demand keeps
// namespace within limits, given what it uses; when not, why, naming the
// quota and the figures of every limit it would pass.
func QuotaAllows(namespace string, limits map[string]string, used corev1.ResourceList, demand Demand) (bool, string) {
	ask := demand.Total.DeepCopy()
	if ask == nil {
		ask = corev1.ResourceList{}
	}
	ask[v1alpha1.QuotaRunnables] = *resource.NewQuantity(1, resource.DecimalSI)
	lim, err := ParseList(limits)
	if err != nil {
		return false, fmt.Sprintf("quota %s does not parse: %v", namespace, err)
	}
	var over []string
	for _, name := range sortedNames(lim) {
		want, asks := ask[name]
		if !asks || want.Sign() <= 0 {
			continue
		}
		after := used[name].DeepCopy()
		after.Add(want)
		if l := lim[name]; after.Cmp(l) > 0 {
			u := used[name]
			over = append(over, fmt.Sprintf("%s %s of %s used, asks for %s", name, u.String(), l.String(), want.String()))
		}
	}
	if len(over) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("over quota %s: %s", namespace, strings.Join(over, "; "))
}

// DominantShare is the largest, over the resources total has, of used
// over total: the dominant resource share of dominant-resource fairness
// (Ghodsi et al.; Armada's and Kueue's fair sharing).
func DominantShare(used, total corev1.ResourceList) float64 {
	var most float64
	for name, t := range total {
		if t.Sign() <= 0 {
			continue
		}
		u, ok := used[name]
		if !ok {
			continue
		}
		if share := float64(u.MilliValue()) / float64(t.MilliValue()); share > most {
			most = share
		}
	}
	return most
}

// QuotaVerdict says why one more runnable of namespace asking for demand
// would pass the namespace's quota spec, given its usage per cluster;
// "" when it stays within. With a quota per cluster label value
// (spec.perLabel), a candidate whose value's share is used up is marked
// as lacking room there (its Lacks), so that placement goes elsewhere;
// when every labelled candidate is so, the runnable is over quota.
// labels gives each cluster's labels. The submitter decides with it, and
// the drill's what-if asks it the same question.
func QuotaVerdict(namespace string, spec v1alpha1.QuotaSpec, usage map[string]corev1.ResourceList, labels map[string]map[string]string,
	demand Demand, cands []Cluster) string {
	total := corev1.ResourceList{}
	for _, u := range usage {
		AddTo(total, u)
	}
	if ok, why := QuotaAllows(namespace, spec.Limits, total, demand); !ok {
		return why
	}
	if spec.PerLabel == nil {
		return ""
	}
	return perLabelQuota(namespace, spec.PerLabel, usage, labels, demand, cands)
}

// perLabelQuota marks the candidates whose label value has no room left
// in the namespace's quota for it, and says why when no labelled
// candidate has any.
func perLabelQuota(namespace string, pl *v1alpha1.QuotaPerLabel, usage map[string]corev1.ResourceList, labels map[string]map[string]string,
	demand Demand, cands []Cluster) string {
	used := map[string]corev1.ResourceList{}
	for cluster, u := range usage {
		v, ok := labels[cluster][pl.Label]
		if !ok {
			continue
		}
		if used[v] == nil {
			used[v] = corev1.ResourceList{}
		}
		AddTo(used[v], u)
	}
	var whys []string
	open := false
	for i := range cands {
		v, ok := cands[i].Labels[pl.Label]
		if !ok {
			open = true // not bounded by the per-label quota
			continue
		}
		if fits, why := QuotaAllows(namespace+" for "+pl.Label+"="+v, pl.Limits, used[v], demand); !fits {
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
