package inventory

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// The snapshots pipeline: snapshotAssembler, then reconcileSnapshots (the
// zombie reconciliation), then, in the same transaction,
// touchAgentsBySnapshots; once committed, what was removed is logged.

// snapshotAssembler is the snapshots' converter: it assembles chunked
// snapshots and hands on each complete one. Chunks of an incomplete
// snapshot are held, unacknowledged, in memory: if this ingester dies the
// stream redelivers them to another, which is simpler and safer than
// staging them in the database.
type snapshotAssembler struct {
	log     *slog.Logger
	pending map[pendingKey]*pendingSnapshot
	now     func() time.Time
}

type pendingKey struct{ cluster, id string }

type pendingSnapshot struct {
	total    int
	takenAt  time.Time
	chunks   map[int]*stream.SnapshotChunk
	msgs     map[int]jetstream.Msg
	firstGot time.Time
}

// abandonAfter: a snapshot still incomplete this long after its first chunk
// arrived lost a chunk for good (its agent died mid-publish); the next
// snapshot supersedes it.
const abandonAfter = 2 * time.Minute

func newSnapshotAssembler(log *slog.Logger) *snapshotAssembler {
	return &snapshotAssembler{log: log, pending: map[pendingKey]*pendingSnapshot{}, now: time.Now}
}

// snapshotBatch is the complete snapshots of a batch, one per kind.
type snapshotBatch struct {
	snaps []store.InventorySnapshot
}

func (s *snapshotAssembler) convert(msgs []jetstream.Msg) (snapshotBatch, []jetstream.Msg) {
	var ready []jetstream.Msg
	for _, m := range msgs {
		c := &stream.SnapshotChunk{}
		cluster, ok := stream.ClusterOf(m.Subject())
		if err := json.Unmarshal(m.Data(), c); !ok || err != nil || c.ID == "" || c.Total < 1 ||
			c.Index < 0 || c.Index >= c.Total {
			s.log.Error("dropping malformed snapshot chunk", "subject", m.Subject(), "error", err)
			_ = m.Term()
			continue
		}
		c.Cluster = cluster
		k := pendingKey{cluster, c.ID}
		p := s.pending[k]
		if p == nil {
			p = &pendingSnapshot{total: c.Total, takenAt: c.TakenAt, chunks: map[int]*stream.SnapshotChunk{},
				msgs: map[int]jetstream.Msg{}, firstGot: s.now()}
			s.pending[k] = p
		}
		// A redelivered chunk replaces the earlier delivery, whose ack
		// would no longer count.
		p.chunks[c.Index], p.msgs[c.Index] = c, m
	}

	var b snapshotBatch
	var complete []pendingKey
	for k, p := range s.pending {
		switch {
		case len(p.chunks) == p.total:
			complete = append(complete, k)
		case s.now().Sub(p.firstGot) > abandonAfter:
			s.log.Warn("abandoning incomplete snapshot", "cluster", k.cluster, "id", k.id,
				"chunks", len(p.chunks), "total", p.total)
			for _, m := range p.msgs {
				_ = m.Term()
			}
			delete(s.pending, k)
		default:
			// Keep held chunks from being redelivered while we wait.
			for _, m := range p.msgs {
				_ = m.InProgress()
			}
		}
	}
	// Oldest first, so that a batch holding two snapshots of a cluster
	// leaves the newest one's view (each is safe on its own anyway).
	sort.Slice(complete, func(i, j int) bool {
		return s.pending[complete[i]].takenAt.Before(s.pending[complete[j]].takenAt)
	})
	for _, k := range complete {
		p := s.pending[k]
		b.snaps = append(b.snaps, assemble(k.cluster, p)...)
		for _, m := range p.msgs {
			ready = append(ready, m)
		}
		// Dropped now rather than after commit: if the commit fails the
		// messages are redelivered and assembled again.
		delete(s.pending, k)
	}
	return b, ready
}

// assemble joins a complete snapshot's chunks into one list per kind.
func assemble(cluster string, p *pendingSnapshot) []store.InventorySnapshot {
	byKind := map[[2]string]*store.InventorySnapshot{}
	var order [][2]string
	for i := range p.total {
		for _, l := range p.chunks[i].Kinds {
			k := [2]string{l.APIVersion, l.Kind}
			snap := byKind[k]
			if snap == nil {
				snap = &store.InventorySnapshot{Cluster: cluster, APIVersion: l.APIVersion, Kind: l.Kind,
					ListResourceVersion: l.ListResourceVersion, TakenAt: p.takenAt, Items: map[string]string{}}
				byKind[k] = snap
				order = append(order, k)
			}
			for _, it := range l.Items {
				snap.Items[it[0]] = it[1]
			}
		}
	}
	out := make([]store.InventorySnapshot, 0, len(order))
	for _, k := range order {
		out = append(out, *byKind[k])
	}
	return out
}

// reconcileSnapshots is the snapshots' sink: each kind of each complete
// snapshot is reconciled with the records, removing the zombies; it
// returns what each reconciliation found, in the order of b.snaps.
func reconcileSnapshots(ctx context.Context, tx *store.Tx, b snapshotBatch) ([]store.Reconciliation, error) {
	recs := make([]store.Reconciliation, 0, len(b.snaps))
	clusters := make([]string, len(b.snaps))
	for i, snap := range b.snaps {
		clusters[i] = snap.Cluster
	}
	if err := tx.Inventory().LockClusters(ctx, clusters); err != nil {
		return nil, err
	}
	for _, snap := range b.snaps {
		rec, err := tx.Inventory().Reconcile(ctx, snap)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// touchAgentsBySnapshots records, per cluster, the time of the snapshot
// just applied: a snapshot counts once the ingester has applied it, not
// when the agent sent it, so it is recorded with the records it removed.
func touchAgentsBySnapshots(ctx context.Context, tx *store.Tx, b snapshotBatch, _ []store.Reconciliation) error {
	// TouchAll writes them in the clusters' order, as every transaction
	// takes agents' rows.
	touches := make([]store.AgentFreshness, 0, len(b.snaps))
	for _, snap := range b.snaps {
		taken := snap.TakenAt
		touches = append(touches, store.AgentFreshness{Cluster: snap.Cluster, LastSnapshot: &taken})
	}
	return tx.Agents().TouchAll(ctx, touches)
}

// logReconciled says what committed reconciliations changed or found.
func (s *snapshotAssembler) logReconciled(b snapshotBatch, recs []store.Reconciliation) {
	for i, rec := range recs {
		snap := b.snaps[i]
		if rec.Removed > 0 || rec.Missing > 0 || rec.Stale > 0 {
			// Missing and stale records are brought by the agent's events
			// (or its resync after an overflow); a count that persists
			// across snapshots points at a lost event.
			s.log.Info("snapshot reconciled", "cluster", snap.Cluster, "kind", snap.Kind,
				"listResourceVersion", snap.ListResourceVersion, "removed", rec.Removed,
				"kept", rec.Kept, "missing", rec.Missing, "stale", rec.Stale)
		}
	}
}
