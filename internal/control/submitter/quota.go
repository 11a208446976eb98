package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// overQuota says why one more runnable of namespace asking for demand
// would pass its namespace's quota; "" when it has none or stays within.
// With a quota per cluster label value (spec.perLabel), a candidate whose
// value's share is used up is marked as lacking room there (its Lacks),
// so that placement goes elsewhere; when every labelled candidate is so,
// the runnable is over quota. It runs under the placing lock, so the
// runnables placed before it are counted (they are Scheduled by then).
func (s *Submitter) overQuota(ctx context.Context, namespace string, demand placement.Demand, cands []placement.Cluster) (string, error) {
	var q *store.Quota
	var byCluster map[string][][]byte
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if q, err = tx.Quotas().Get(ctx, namespace); err != nil {
			return err
		}
		byCluster, err = tx.Runnables().ActiveStatusesByCluster(ctx, namespace)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var spec v1alpha1.QuotaSpec
	if err := json.Unmarshal(q.Spec, &spec); err != nil {
		return "quota " + namespace + " does not decode: " + err.Error(), nil
	}
	var statuses [][]byte
	for _, sts := range byCluster {
		statuses = append(statuses, sts...)
	}
	if ok, why := placement.QuotaAllows(namespace, spec.Limits, placement.StoredUsage(statuses), demand); !ok {
		return why, nil
	}
	if spec.PerLabel == nil {
		return "", nil
	}
	return perLabelQuota(namespace, spec.PerLabel, byCluster, demand, cands), nil
}

// perLabelQuota marks the candidates whose label value has no room left
// in the namespace's quota for it, and says why when no labelled
// candidate has any.
func perLabelQuota(namespace string, pl *v1alpha1.QuotaPerLabel, byCluster map[string][][]byte, demand placement.Demand, cands []placement.Cluster) string {
	labels := map[string]map[string]string{}
	for _, c := range cands {
		labels[c.Name] = c.Labels
	}
	used := placement.StoredUsageByLabel(byCluster, func(cluster string) (string, bool) {
		v, ok := labels[cluster][pl.Label]
		return v, ok
	})
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
