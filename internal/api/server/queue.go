package server

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// maxQueueRead bounds the queued runnables one answer orders; beyond it
// the later ones get no position.
const maxQueueRead = 20000

// queuePositions numbers the farm's Queued runnables in the order the
// submitter places them (placement.Ahead: priority, then the namespace's
// dominant share of the farm over its weight, then age), by UID. It is
// read only when an answer holds a Queued runnable.
func (s *Server) queuePositions(ctx context.Context, tx *store.Tx) (map[string]int, error) {
	pol := s.policy()
	var entries []placement.QueueEntry
	byNamespace := map[string][]int{}
	var after int64
	for len(entries) < maxQueueRead {
		page, err := tx.Runnables().ListInPhases(ctx, []string{string(v1alpha1.PhaseQueued)}, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, rec := range page {
			var doc storedRunnable
			if err := json.Unmarshal(rec.Spec, &doc); err != nil {
				continue // no position for what does not decode
			}
			byNamespace[rec.Namespace] = append(byNamespace[rec.Namespace], len(entries))
			entries = append(entries, placement.QueueEntry{UID: rec.UID, Namespace: rec.Namespace,
				Priority: pol.Priority(userOf(doc.Author, rec.Submitter), rec.Namespace, doc.Spec.Priority), Since: rec.CreatedAt})
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(byNamespace) > 1 {
		total, err := farmAllocatable(ctx, tx)
		if err != nil {
			return nil, err
		}
		for ns, idx := range byNamespace {
			statuses, err := tx.Runnables().ActiveStatuses(ctx, ns)
			if err != nil {
				return nil, err
			}
			share := placement.DominantShare(placement.StoredUsage(statuses), total)
			if w := pol.FairShareWeight(ns); w > 0 {
				share /= w
			}
			for _, i := range idx {
				entries[i].Share = share
			}
		}
	}
	return placement.QueuePositions(entries), nil
}

// farmAllocatable is the allocatable of every cluster whose agent reports
// capacity, summed: the total of the fair share.
func farmAllocatable(ctx context.Context, tx *store.Tx) (corev1.ResourceList, error) {
	reports, err := tx.Agents().Capacities(ctx)
	if err != nil {
		return nil, err
	}
	total := corev1.ResourceList{}
	for _, r := range reports {
		var c stream.Capacity
		if json.Unmarshal(r.Report, &c) != nil {
			continue
		}
		placement.AddTo(total, c.Allocatable)
	}
	return total, nil
}

// anyQueued says whether an answer holds a Queued runnable.
func anyQueued(recs ...*store.Runnable) bool {
	for _, r := range recs {
		if r.Phase == string(v1alpha1.PhaseQueued) {
			return true
		}
	}
	return false
}
