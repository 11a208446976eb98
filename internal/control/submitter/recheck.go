package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// errSumsStale: the store does not let the placement the kept sums chose
// in; the sums catch up and the runnable is placed again.
var errSumsStale = errors.New("the kept sums are behind the store")

// chosen is the candidate called name.
func chosen(cands []placement.Cluster, name string) placement.Cluster {
	for _, c := range cands {
		if c.Name == name {
			return c
		}
	}
	return placement.Cluster{Name: name}
}

// recheck returns the check the transaction that writes a placement on
// c runs first: the one cluster's room and the one namespace's quota,
// counted from the store as the sums stand for them, with their rows
// held (on PostgreSQL) so that two replicas' placements there are
// checked one after the other. The kept sums chose among all clusters;
// the store decides for the chosen one, in a few small reads.
func (s *Submitter) recheck(c placement.Cluster, p v1alpha1.Placement, gvk string, demand placement.Demand, namespace string,
	labels map[string]map[string]string) func(ctx context.Context, tx *store.Tx) error {
	return func(ctx context.Context, tx *store.Tx) error {
		if err := tx.Clusters().LockForPlacement(ctx, c.Name); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("cluster %s was removed: %w", c.Name, errSumsStale)
			}
			return err
		}
		if c.Free != nil {
			if err := s.recheckRoom(ctx, tx, c, p, gvk, demand); err != nil {
				return err
			}
		}
		q, err := tx.Quotas().GetForPlacement(ctx, namespace)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		byCluster, err := tx.Runnables().ActiveStatusesByCluster(ctx, namespace)
		if err != nil {
			return err
		}
		if why := quotaVerdict(namespace, q, storedUsage(byCluster), labels, demand, []placement.Cluster{c}); why != "" {
			return fmt.Errorf("placing on %s: %s: %w", c.Name, why, errSumsStale)
		}
		return nil
	}
}

// recheckRoom checks that demand still fits c by its latest report less
// what the store has in flight there.
func (s *Submitter) recheckRoom(ctx context.Context, tx *store.Tx, c placement.Cluster, p v1alpha1.Placement, gvk string, demand placement.Demand) error {
	r, err := tx.Agents().CapacityOf(ctx, c.Name)
	if err != nil {
		return err
	}
	fig, ok := s.figures.report(c.Name, r.Report)
	if !ok {
		return fmt.Errorf("capacity report of %s does not decode: %w", c.Name, errSumsStale)
	}
	// As the sums count it (sumsState.free): by time, or every active
	// runnable against a report that says what it counted of purser's.
	since, free := r.At.Add(-s.cfg.InFlightMargin), fig.Free
	if fig.Runnables != nil {
		since, free = time.Time{}, reportFigure{Allocatable: fig.Allocatable, Free: fig.Free, Runnables: fig.Runnables}.freeOfPurser()
	}
	placed, err := tx.Runnables().PlacedOn(ctx, c.Name, since)
	if err != nil {
		return err
	}
	f := &placement.Free{Allocatable: fig.Allocatable, Free: free, NodeMax: fig.NodeMax, InFlight: corev1.ResourceList{}}
	for _, pl := range placed {
		var st v1alpha1.RunnableStatus
		if len(pl.Status) == 0 || json.Unmarshal(pl.Status, &st) != nil {
			continue
		}
		if req, err := placement.ParseList(st.Requests); err == nil {
			placement.AddTo(f.InFlight, req)
			f.InFlightCount++
		}
	}
	// Eligibility was decided with the rest (the kind served, the
	// dependencies): only the room is weighed again.
	c.Free, c.Serves, c.Lacks = f, nil, ""
	if d := placement.ChooseFor(p, gvk, demand, s.cfg.Score, []placement.Cluster{c}); d.Cluster != c.Name {
		return fmt.Errorf("placing on %s: %s: %w", c.Name, d.Reason, errSumsStale)
	}
	return nil
}
