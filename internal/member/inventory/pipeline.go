package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The ingester's one pipeline, the shape of every stream it consumes
// (events, snapshots, heartbeats, served kinds):
//
//	source -> convert -> sink, then its steps, in one transaction -> ack
//
// A source delivers messages in batches; a converter turns a batch into
// typed work; the sink stores the records of the work in one transaction
// and hands what it stored to the steps that follow it there; the source
// acknowledges the messages only once that transaction has committed. A
// crash between commit and ack redelivers the batch, which the sinks
// apply idempotently (resourceVersion ordering, snapshots by uid, the
// latest time of a heartbeat).

// source delivers the messages of one stream and settles them.
type source[M any] interface {
	// fetch returns the next messages, waiting a short while for the
	// first; none is not an error.
	fetch(ctx context.Context) ([]M, error)
	// ack settles messages whose work was committed.
	ack(msgs []M)
	// retry hands back messages whose work failed to commit, to be
	// delivered again no sooner than retryDelay.
	retry(msgs []M)
	// release hands back, at once, messages fetched and never applied.
	release(msgs []M)
	// stop ends the source once the pipeline no longer fetches.
	stop()
}

// converter turns fetched messages into typed work, deciding nothing
// about the database. ready are the messages to acknowledge once the
// work is committed: a converter may hold messages back (the chunks of an
// incomplete snapshot) and release them with a later batch, and it
// settles itself the messages that can never be applied.
type converter[M, W any] interface {
	convert(msgs []M) (work W, ready []M)
}

// sink stores the records of work in tx and returns what it stored, which
// the steps after it act on.
type sink[W, S any] func(ctx context.Context, tx *store.Tx, work W) (stored S, err error)

// step follows the sink in its transaction. A step and the sink may run
// more than once for one batch (store.Tx runs its function again on
// contention), so neither changes anything outside tx.
type step[W, S any] struct {
	name string
	do   func(ctx context.Context, tx *store.Tx, work W, stored S) error
}

// retryDelay is how long a batch whose transaction failed waits before it
// is delivered again, and how long its pipeline waits before the next.
const retryDelay = time.Second

// fetchRetryBase and fetchRetryMax bound the backoff of a source that
// cannot be read (the stream restarting, a server lost).
const (
	fetchRetryBase = 100 * time.Millisecond
	fetchRetryMax  = 5 * time.Second
)

// pipeline consumes one stream: messages M, work W, stored records S.
type pipeline[M, W, S any] struct {
	name    string
	src     source[M]
	convert converter[M, W]
	sink    sink[W, S]
	then    []step[W, S]
	// committed, when set, is told what was stored once it is committed
	// (to log what a snapshot removed, once it is true, and to wake the
	// API's watches).
	committed func(work W, stored S)
	store     Store
	log       *slog.Logger
}

// run ingests until ctx is done.
func (p *pipeline[M, W, S]) run(ctx context.Context) {
	// One batch is fetched while the previous one is being applied, so
	// that the stream's round trip overlaps the database's; batches are
	// still applied one at a time, in order.
	batches := make(chan []M, 1)
	var fetcher sync.WaitGroup
	fetcher.Go(func() { p.fetchLoop(ctx, batches) })
	defer func() {
		fetcher.Wait()
		// Fetched but never applied: hand them back now rather than
		// after the consumer's ack wait.
		for len(batches) > 0 {
			p.src.release(<-batches)
		}
		p.src.stop()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case msgs := <-batches:
			p.ingest(ctx, msgs)
		}
	}
}

// fetchLoop feeds batches until ctx is done, waiting out outages of the
// stream.
func (p *pipeline[M, W, S]) fetchLoop(ctx context.Context, batches chan<- []M) {
	for ctx.Err() == nil {
		var msgs []M
		err := reconcile.Retry(ctx, reconcile.Backoff(fetchRetryBase, fetchRetryMax), func(ctx context.Context, _ int) error {
			var err error
			msgs, err = p.src.fetch(ctx)
			if err != nil && ctx.Err() == nil {
				p.log.Warn("fetch failed; retrying", "pipeline", p.name, "error", err)
			}
			return err
		})
		if err != nil {
			return // ctx is done: fetch errors are never terminal
		}
		if len(msgs) == 0 {
			continue
		}
		select {
		case batches <- msgs:
		case <-ctx.Done():
			p.src.release(msgs)
			return
		}
	}
}

// ingest converts one batch, stores it in one transaction and settles its
// messages.
func (p *pipeline[M, W, S]) ingest(ctx context.Context, msgs []M) {
	work, ready := p.convert.convert(msgs)
	if len(ready) == 0 {
		return
	}
	var stored S
	err := p.store.Tx(ctx, func(tx *store.Tx) (err error) {
		stored, err = p.apply(ctx, tx, work)
		return err
	})
	switch {
	case err == nil:
		// A lost ack means one more redelivery, which is harmless.
		p.src.ack(ready)
		if p.committed != nil {
			p.committed(work, stored)
		}
	case ctx.Err() != nil:
		p.src.release(ready)
	default:
		// Nothing was committed. The batch's retry is its redelivery,
		// to this ingester or another that reaches the database;
		// waiting as long here keeps the batches behind it from failing
		// in a burst against a database that is down.
		p.log.Warn("apply failed; batch will be redelivered", "pipeline", p.name, "messages", len(ready), "error", err)
		p.src.retry(ready)
		reconcile.Sleep(ctx, retryDelay)
	}
}

// apply is the sink and then each step, in tx.
func (p *pipeline[M, W, S]) apply(ctx context.Context, tx *store.Tx, work W) (S, error) {
	stored, err := p.sink(ctx, tx, work)
	if err != nil {
		return stored, fmt.Errorf("%s: store: %w", p.name, err)
	}
	for _, s := range p.then {
		if err := s.do(ctx, tx, work, stored); err != nil {
			return stored, fmt.Errorf("%s: %s: %w", p.name, s.name, err)
		}
	}
	return stored, nil
}
