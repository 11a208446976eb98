// Package inventory is the ingester: it keeps purser's inventory, the copy
// of every tracked object of every member cluster, from what the agents
// (internal/member/agent) publish on the stream. Events upsert and delete records
// in resourceVersion order; complete snapshots remove zombie records,
// sparing those newer than the snapshot's list. Both go through one
// pipeline (fetch a batch, apply it in one transaction, ack after commit),
// so a crash anywhere loses nothing and a redelivery changes nothing.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/backoff"
)

// HealthFunc interprets a trimmed object (JSON) as its health and phase;
// see internal/member/health. Without one, records are "Unknown" with no phase.
type HealthFunc func(apiVersion, kind string, object []byte) (health, phase string)

// Config configures an Ingester.
type Config struct {
	Store  *store.Store
	Stream *stream.Client
	Logger *slog.Logger
	// Batch is the most events applied in one transaction (400, the most).
	Batch int
	// TombstoneTTL is how long deletions are remembered against late
	// events (1h): far longer than any redelivery, since the consumer's
	// ack wait is 30s.
	TombstoneTTL time.Duration
	Health       HealthFunc
	// Fingerprint is a keyed hash with a key only the hub holds
	// (seal.Sealer.Fingerprint). A Secret's record keeps, of its data,
	// only this hash of the digest its agent computed: a bare SHA-256 of a
	// short password is guessed offline by anyone who may read the
	// inventory, a keyed one is not. Nil keeps no trace of the data.
	Fingerprint func([]byte) string
}

// Ingester consumes events and snapshots of every cluster.
type Ingester struct {
	cfg Config
	log *slog.Logger

	skewWarnings throttle // agents' clocks far from the NATS server's
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
		cfg.Health = func(string, string, []byte) (string, string) { return "Unknown", "" }
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

// snapshotBatch is smaller than an event batch: a chunk is up to 900 KiB.
const snapshotBatch = 16

// Run ingests until ctx is done and returns after its goroutines stop.
// Outages of the stream and the database are waited out.
func (in *Ingester) Run(ctx context.Context) error {
	var pipes []*pipeline
	for attempt := 0; ; attempt++ {
		err := in.cfg.Stream.Declare(ctx)
		if err == nil {
			pipes, err = in.pipelines(ctx)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ingester: %w", ctx.Err())
		}
		in.log.Warn("stream not ready", "error", err)
		backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second))
	}
	var wg sync.WaitGroup
	for _, p := range pipes {
		wg.Go(func() { p.run(ctx) })
	}
	wg.Go(func() { in.pruneLoop(ctx) })
	wg.Go(func() { in.heartbeatLoop(ctx) })
	wg.Go(func() { in.kindsLoop(ctx) })
	wg.Wait()
	return nil
}

func (in *Ingester) pipelines(ctx context.Context) ([]*pipeline, error) {
	js := in.cfg.Stream.JetStream()
	events, err := js.Consumer(ctx, stream.EventsStream, stream.IngesterConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind events consumer: %w", err)
	}
	snapshots, err := js.Consumer(ctx, stream.SnapshotsStream, stream.IngesterConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind snapshots consumer: %w", err)
	}
	return []*pipeline{
		{name: "events", consumer: events, store: in.cfg.Store, batch: in.cfg.Batch, wait: 200 * time.Millisecond,
			stage: &eventStage{health: in.cfg.Health, fingerprint: in.cfg.Fingerprint, log: in.log}, log: in.log},
		{name: "snapshots", consumer: snapshots, store: in.cfg.Store, batch: snapshotBatch, wait: 500 * time.Millisecond,
			stage: newSnapshotStage(in.log), log: in.log},
	}, nil
}

// pruneLoop forgets old tombstones.
func (in *Ingester) pruneLoop(ctx context.Context) {
	t := time.NewTicker(max(in.cfg.TombstoneTTL/10, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-in.cfg.TombstoneTTL)
		err := in.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
			_, err := tx.PruneInventoryTombstones(ctx, cutoff)
			return err
		})
		if err != nil && ctx.Err() == nil {
			in.log.Warn("prune tombstones", "error", err)
		}
	}
}
