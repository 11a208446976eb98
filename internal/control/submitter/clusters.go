package submitter

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/dependson"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
)

// markUnreachable keeps a cluster out of placement for unreachableFor.
func (s *Submitter) markUnreachable(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable[cluster] = time.Now()
}

func (s *Submitter) markReachable(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unreachable, cluster)
}

// unreachableUntil is when cluster, marked unreachable, may take new
// work again; zero when it is not held out.
func (s *Submitter) unreachableUntil(cluster string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.unreachable[cluster]
	if !ok || time.Since(at) >= unreachableFor {
		return time.Time{}
	}
	return at.Add(unreachableFor)
}

// activePhases are the phases in which a runnable occupies its cluster.
var activePhases = []string{string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted), string(v1alpha1.PhaseRunning)}

// candidates describes every registered cluster for placement, and says
// when the first of those this submitter holds out of placement (and the
// controller judges Ready) returns; zero when it holds none.
func (s *Submitter) candidates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, deps []v1alpha1.Dependency) ([]placement.Cluster, time.Time, error) {
	cands, returns, _, err := s.gather(ctx, gvk, namespace, deps, false)
	return cands, returns, err
}

// gather is candidates, and with withQuota the namespace's quota (nil
// when it has none), read in the same transaction: a placement's reads
// are one round of the database.
func (s *Submitter) gather(ctx context.Context, gvk schema.GroupVersionKind, namespace string, deps []v1alpha1.Dependency,
	withQuota bool) ([]placement.Cluster, time.Time, *store.Quota, error) {
	var rows []*store.Cluster
	var quota *store.Quota
	var capacity map[string]store.Capacity
	var free map[string]*placement.Free
	var lacks map[string]string
	if err := s.ensureSums(ctx); err != nil {
		return nil, time.Time{}, nil, err
	}
	active := s.activeCounts()
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.Clusters().List(ctx); err != nil {
			return err
		}
		names := make([]string, len(rows))
		for i, row := range rows {
			names[i] = row.Name
		}
		if lacks, err = dependson.Lacks(ctx, tx, namespace, deps, names); err != nil {
			return err
		}
		if free, err = s.freeFigures(ctx, tx); err != nil {
			return err
		}
		// The nodes' capacity in the inventory weighs only the clusters
		// whose agent has not reported: not read when every one has.
		for _, row := range rows {
			if free[row.Name] == nil {
				if capacity, err = tx.Clusters().Capacity(ctx); err != nil {
					return err
				}
				break
			}
		}
		if withQuota {
			if quota, err = tx.Quotas().Get(ctx, namespace); errors.Is(err, store.ErrNotFound) {
				quota, err = nil, nil
			}
		}
		return err
	})
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	var returns time.Time
	out := make([]placement.Cluster, 0, len(rows))
	for _, row := range rows {
		c, err := clusters.Placement(row)
		if err != nil {
			s.log.Error("cluster skipped", "cluster", row.Name, "error", err)
			continue
		}
		c.Active, c.Free, c.Lacks = active[row.Name], free[row.Name], lacks[row.Name]
		if nodes, ok := capacity[row.Name]; ok {
			c.Capacity = &placement.Capacity{MilliCPU: nodes.MilliCPU}
		}
		if held := s.unreachableUntil(row.Name); c.Ready && !held.IsZero() {
			c.Ready = false
			if returns.IsZero() || held.Before(returns) {
				returns = held
			}
		}
		row := row
		c.Serves = func(string) bool {
			cc, err := s.clients.Get(row)
			if err != nil {
				return true // the create reports the real problem
			}
			return cc.Serves(gvk)
		}
		out = append(out, c)
	}
	return out, returns, quota, nil
}

// clusterRow reads one cluster; a removed cluster is ErrNotFound.
func (s *Submitter) clusterRow(ctx context.Context, name string) (*store.Cluster, error) {
	var row *store.Cluster
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		row, err = tx.Clusters().Get(ctx, name)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return row, err
}
