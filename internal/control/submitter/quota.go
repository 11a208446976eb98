package submitter

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// overQuota says why one more runnable of namespace asking for demand
// would pass its namespace's quota; "" when it has none or stays within.
// It runs under the placing lock, so the runnables placed before it are
// counted (they are Scheduled by then).
func (s *Submitter) overQuota(ctx context.Context, namespace string, demand placement.Demand) (string, error) {
	var q *store.Quota
	var statuses [][]byte
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if q, err = tx.Quotas().Get(ctx, namespace); err != nil {
			return err
		}
		statuses, err = tx.Runnables().ActiveStatuses(ctx, namespace)
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
	ok, why := placement.QuotaAllows(namespace, spec.Limits, placement.StoredUsage(statuses), demand)
	if ok {
		return "", nil
	}
	return why, nil
}
