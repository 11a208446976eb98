package syncer

import (
	"context"
	"errors"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// maxMessage bounds a status message; API errors can be long.
const maxMessage = 512

// currentStatus returns the status row of uid on this cluster, reading
// the store only the first time.
func (w *clusterWorker) currentStatus(ctx context.Context, uid string) (*store.DeployableClusterStatus, error) {
	w.mu.Lock()
	st, ok := w.status[uid]
	w.mu.Unlock()
	if ok {
		return st, nil
	}
	var found *store.DeployableClusterStatus
	err := w.s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		found = nil
		all, err := tx.Deployables().ListStatus(ctx, uid)
		for _, x := range all {
			if x.Cluster == w.name {
				found = x
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.status[uid] = found
	w.mu.Unlock()
	return found, nil
}

// record writes the status row of d on this cluster that out calls for,
// and returns whether it wrote one and the error that sends the key back
// to the queue: out's own error first (a status that could not be written
// alongside it is written on the retry), else the write's. It is the only
// writer of the syncer's status rows.
//
// It writes only when state, generation or message change, so an idle
// resync writes nothing. A non-Synced state keeps the generation and time
// of the last success, which is what the cluster still holds.
func (w *clusterWorker) record(ctx context.Context, d *deployable, out outcome) (bool, error) {
	if out.state == "" {
		return false, out.err
	}
	written, err := w.writeStatus(ctx, d, out.state, out.reason, out.message)
	if out.err != nil {
		return written, out.err
	}
	return written, err
}

func (w *clusterWorker) writeStatus(ctx context.Context, d *deployable, state v1alpha1.SyncState, reason, msg string) (bool, error) {
	cur, err := w.currentStatus(ctx, d.rec.UID)
	if err != nil {
		return false, err
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	next := &store.DeployableClusterStatus{DeployableUID: d.rec.UID, Cluster: w.name, State: stateOf(state), Message: msg,
		StateGeneration: d.rec.Generation, Reason: reason}
	if cur != nil {
		next.SyncedGeneration, next.LastSyncedAt = cur.SyncedGeneration, cur.LastSyncedAt
	}
	if state == v1alpha1.StateSynced {
		next.SyncedGeneration = d.rec.Generation
	}
	if cur != nil && cur.State == next.State && cur.SyncedGeneration == next.SyncedGeneration && cur.Message == next.Message &&
		cur.StateGeneration == next.StateGeneration && cur.Reason == next.Reason {
		return false, nil
	}
	if state == v1alpha1.StateSynced {
		now := time.Now().UTC()
		next.LastSyncedAt = &now
	}
	w.s.statusWrites.Add(1)
	err = w.s.cfg.Store.Tx(ctx, func(tx *store.Tx) error { return tx.Deployables().PutStatus(ctx, next) })
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // purged or deregistered meanwhile: nothing to report on
	}
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.status[d.rec.UID] = next
	w.mu.Unlock()
	return true, nil
}
