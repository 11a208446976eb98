// Package inventory is the ingester: it keeps purser's inventory, the copy
// of every tracked object of every member cluster, from what the agents
// (internal/member/agent) publish on the stream. Events upsert and delete records
// in resourceVersion order and move the runnables whose objects they are;
// complete snapshots remove zombie records, sparing those newer than the
// snapshot's list; heartbeats and served kinds are copied from the
// stream's buckets. All go through one pipeline (a source, a converter to
// typed work, a sink that stores it and the steps that follow in its
// transaction, an ack after the commit: pipeline.go), so a crash anywhere
// loses nothing and a redelivery changes nothing.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Judge gives the health and phase of the objects the ingester records
// (internal/member/health's Interpreter). Without one, records are
// "Unknown" with no phase.
type Judge interface {
	// ByKind judges an object by its kind alone when its kind needs
	// nothing more (ok): its object is then never decoded.
	ByKind(apiVersion, kind string) (health, phase string, ok bool)
	// Judge judges a decoded object.
	Judge(obj map[string]any) (health, phase string)
}

// Store is the database as the ingester uses it: it only writes.
type Store interface {
	Tx(ctx context.Context, fn func(*store.Tx) error) error
}

// Config configures an Ingester.
type Config struct {
	Store  Store
	Stream *stream.Client
	Logger *slog.Logger
	// Batch is the most events applied in one transaction (400, the most).
	Batch int
	// TombstoneTTL is how long deletions are remembered against late
	// events (1h): far longer than any redelivery, since the consumer's
	// ack wait is 30s.
	TombstoneTTL time.Duration
	Health       Judge
	// Fingerprint is a keyed hash with a key only the hub holds
	// (seal.Sealer.Fingerprint). A Secret's record keeps, of its data,
	// only this hash of the digest its agent computed: a bare SHA-256 of a
	// short password is guessed offline by anyone who may read the
	// inventory, a keyed one is not. Nil keeps no trace of the data.
	Fingerprint func([]byte) string
}

// Ingester consumes events, snapshots, heartbeats and served kinds of
// every cluster.
type Ingester struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg; nothing runs until Run.
func New(cfg Config) (*Ingester, error) {
	if cfg.Store == nil || cfg.Stream == nil {
		return nil, errors.New("ingester: store and stream are required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = maxBatch
	}
	// A fetch cannot get more than the consumer's MaxAckPending (1,000 by
	// default) and would wait out its timeout for the rest every time.
	cfg.Batch = min(cfg.Batch, maxBatch)
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = time.Hour
	}
	if cfg.Health == nil {
		cfg.Health = unjudged{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ingester{cfg: cfg, log: log.With("component", "ingester")}, nil
}

// maxBatch stays under the consumers' MaxAckPending, with room for a
// prefetched batch and held snapshot chunks.
const maxBatch = 400

// snapshotBatchSize is smaller than an event batch: a chunk is up to 900 KiB.
const snapshotBatchSize = 16

// Run ingests until ctx is done and returns after its goroutines stop.
// Outages of the stream and the database are waited out.
func (in *Ingester) Run(ctx context.Context) error {
	var pipes []runner
	err := reconcile.Retry(ctx, reconcile.Backoff(fetchRetryBase, fetchRetryMax), func(ctx context.Context, _ int) error {
		err := in.cfg.Stream.Declare(ctx)
		if err == nil {
			pipes, err = in.pipelines(ctx)
		}
		if err != nil && ctx.Err() == nil {
			in.log.Warn("stream not ready", "error", err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ingester: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	for _, p := range pipes {
		wg.Go(func() { p.run(ctx) })
	}
	wg.Go(func() { reconcile.Every(ctx, max(in.cfg.TombstoneTTL/10, time.Second), in.prune) })
	wg.Wait()
	return nil
}

// runner is a pipeline, whatever its types.
type runner interface{ run(ctx context.Context) }

func (in *Ingester) pipelines(ctx context.Context) ([]runner, error) {
	js := in.cfg.Stream.JetStream()
	events, err := js.Consumer(ctx, stream.EventsStream, stream.IngesterConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind events consumer: %w", err)
	}
	snapshots, err := js.Consumer(ctx, stream.SnapshotsStream, stream.IngesterConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind snapshots consumer: %w", err)
	}
	assembler := newSnapshotAssembler(in.log)
	return []runner{
		&pipeline[jetstream.Msg, eventBatch, []store.InventoryRow]{
			name:    "events",
			src:     &consumerSource{consumer: events, batch: in.cfg.Batch, wait: 200 * time.Millisecond},
			convert: &eventConverter{health: in.cfg.Health, fingerprint: in.cfg.Fingerprint, log: in.log},
			sink:    storeEvents,
			// The runnables' moves and the clean-ups reopened must commit
			// with the rows: they act on the rows the sink stored, which a
			// redelivery after a failure would not store (nor hand on)
			// again. The agents' touches ride in the same transaction,
			// which costs nothing and never shows a cluster's records
			// fresher than they are.
			then: []step[eventBatch, []store.InventoryRow]{
				{"move runnables", moveRunnables},
				{"mark fenced deletions", markFencedDeletions},
				{"reopen clean-ups", reopenCleanups},
				{"touch agents", touchAgentsByEvents},
			},
			committed: func(b eventBatch, stored []store.InventoryRow) {
				if len(stored) > 0 || len(b.tombs) > 0 {
					in.cfg.Stream.NotifyInventoryChanged()
				}
			},
			store: in.cfg.Store, log: in.log,
		},
		&pipeline[jetstream.Msg, snapshotBatch, []store.Reconciliation]{
			name:    "snapshots",
			src:     &consumerSource{consumer: snapshots, batch: snapshotBatchSize, wait: 500 * time.Millisecond},
			convert: assembler,
			sink:    reconcileSnapshots,
			// The snapshot's time is its cluster's freshness: recorded with
			// the removals, so that a reader never sees it before the
			// records say what the snapshot said.
			then: []step[snapshotBatch, []store.Reconciliation]{{"touch agents", touchAgentsBySnapshots}},
			committed: func(b snapshotBatch, recs []store.Reconciliation) {
				assembler.logReconciled(b, recs)
				if slices.ContainsFunc(recs, func(r store.Reconciliation) bool { return r.Removed > 0 }) {
					in.cfg.Stream.NotifyInventoryChanged()
				}
			},
			store: in.cfg.Store, log: in.log,
		},
		&pipeline[jetstream.KeyValueEntry, []heartbeat, struct{}]{
			name:    "heartbeats",
			src:     &bucketSource{stream: in.cfg.Stream, bucket: stream.HeartbeatsBucket, batch: in.cfg.Batch},
			convert: &heartbeatConverter{log: in.log},
			sink:    recordHeartbeats,
			store:   in.cfg.Store, log: in.log,
		},
		&pipeline[jetstream.KeyValueEntry, []servedKinds, struct{}]{
			name:    "served kinds",
			src:     &bucketSource{stream: in.cfg.Stream, bucket: stream.KindsBucket, batch: in.cfg.Batch},
			convert: &kindsConverter{log: in.log},
			sink:    recordKinds,
			store:   in.cfg.Store, log: in.log,
		},
	}, nil
}

// prune forgets tombstones older than TombstoneTTL.
func (in *Ingester) prune(ctx context.Context) {
	cutoff := time.Now().Add(-in.cfg.TombstoneTTL)
	err := in.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Inventory().PruneTombstones(ctx, cutoff)
		return err
	})
	if err != nil && ctx.Err() == nil {
		in.log.Warn("prune tombstones", "error", err)
	}
}

// unjudged judges nothing: every record is Unknown, with no phase.
type unjudged struct{}

func (unjudged) ByKind(string, string) (string, string, bool) { return "Unknown", "", true }
func (unjudged) Judge(map[string]any) (string, string)        { return "Unknown", "" }
