package inventory

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/backoff"
)

// stage is what a pipeline does with the messages of one stream. The
// pipeline owns fetching, the transaction, acks and retries; a stage owns
// only the decision.
type stage interface {
	// collect decodes fetched messages. It returns the work to apply now
	// and the messages to acknowledge once that work is committed; a
	// stage may hold messages back (an incomplete snapshot) and release
	// them with a later batch. Messages that can never be applied are
	// terminated by the stage itself.
	collect(msgs []jetstream.Msg) (work any, ready []jetstream.Msg)
	// apply writes work in tx. It may run more than once (store.Tx
	// retries on contention), so it must not change the stage's state.
	apply(ctx context.Context, tx *store.Tx, work any) error
}

// pipeline is the one ingestion loop: fetch a batch from a durable pull
// consumer, apply it in one transaction, ack only after the commit. A
// crash between commit and ack redelivers the batch, which the stages
// apply idempotently (resourceVersion ordering, snapshots by uid).
type pipeline struct {
	name     string
	consumer jetstream.Consumer
	store    *store.Store
	batch    int
	wait     time.Duration
	stage    stage
	log      *slog.Logger
}

func (p *pipeline) run(ctx context.Context) {
	// One batch is fetched while the previous one is being applied, so
	// that the stream's round trip overlaps the database's; batches are
	// still applied one at a time, in order.
	batches := make(chan []jetstream.Msg, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.fetchLoop(ctx, batches)
	}()
	defer func() {
		<-done
		// Fetched but never applied: hand them back now rather than
		// after the consumer's ack wait.
		for {
			select {
			case msgs := <-batches:
				nakAll(msgs)
			default:
				return
			}
		}
	}()
	for {
		var msgs []jetstream.Msg
		select {
		case <-ctx.Done():
			return
		case msgs = <-batches:
		}
		work, ready := p.stage.collect(msgs)
		if len(ready) == 0 {
			continue
		}
		if err := p.store.Tx(ctx, func(tx *store.Tx) error { return p.stage.apply(ctx, tx, work) }); err != nil {
			if ctx.Err() != nil {
				nakAll(ready)
				return
			}
			// Nothing was committed: hand the batch back for redelivery
			// after a pause, rather than spin on a database that is down.
			p.log.Warn("apply failed; batch will be redelivered", "pipeline", p.name, "messages", len(ready), "error", err)
			for _, m := range ready {
				_ = m.NakWithDelay(time.Second)
			}
			backoff.Sleep(ctx, time.Second)
			continue
		}
		for _, m := range ready {
			// A lost ack means one more redelivery, which is harmless.
			_ = m.Ack()
		}
	}
}

// fetchLoop feeds batches until ctx is done, waiting out stream outages.
func (p *pipeline) fetchLoop(ctx context.Context, batches chan<- []jetstream.Msg) {
	for attempt := 0; ctx.Err() == nil; {
		msgs, err := p.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("fetch failed; retrying", "pipeline", p.name, "error", err)
			backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second))
			attempt++
			continue
		}
		attempt = 0
		if len(msgs) == 0 {
			continue
		}
		select {
		case batches <- msgs:
		case <-ctx.Done():
			nakAll(msgs)
			return
		}
	}
}

func nakAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// fetch returns up to batch messages, waiting at most p.wait for the
// first: a short wait keeps latency low when traffic is light, a full batch
// returns at once when it is heavy.
func (p *pipeline) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	wait := p.wait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	b, err := p.consumer.Fetch(p.batch, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && len(msgs) == 0 {
		return nil, err
	}
	return msgs, nil
}
