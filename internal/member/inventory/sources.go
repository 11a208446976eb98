package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/stream"
)

// consumerSource is a durable pull consumer: events and snapshots.
type consumerSource struct {
	consumer jetstream.Consumer
	batch    int
	wait     time.Duration
}

// fetch returns up to batch messages, waiting at most wait for the
// first: a short wait keeps latency low when traffic is light, a full
// batch returns at once when it is heavy. A pull request of batch
// messages would instead wait out its whole expiry whenever fewer than
// batch arrive, which delayed every event of a steady trickle by up to
// wait and every snapshot by its full wait (docs/benchmarks.md, "The
// inventory at design size"); so what is there is taken without waiting,
// and only when nothing is there does the fetch wait, for one message,
// then take what came with it.
func (c *consumerSource) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	msgs, err := c.pull(c.batch, 0)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	wait := c.wait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	if msgs, err = c.pull(1, wait); err != nil || len(msgs) == 0 || c.batch == 1 {
		return msgs, err
	}
	rest, err := c.pull(c.batch-1, 0)
	if err != nil {
		// The first message is still good; the rest comes next time.
		return msgs, nil
	}
	return append(msgs, rest...), nil
}

// pull sends one pull request (nats.go takes no context for it: wait
// bounds it) for up to n messages, waiting up to wait
// for them, or taking only those already there when wait is zero.
func (c *consumerSource) pull(n int, wait time.Duration) ([]jetstream.Msg, error) {
	var b jetstream.MessageBatch
	var err error
	if wait == 0 {
		b, err = c.consumer.FetchNoWait(n)
	} else {
		b, err = c.consumer.Fetch(n, jetstream.FetchMaxWait(wait))
	}
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

func (c *consumerSource) ack(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Ack()
	}
}

func (c *consumerSource) retry(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.NakWithDelay(retryDelay)
	}
}

func (c *consumerSource) release(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

func (c *consumerSource) stop() {}

// bucketSource follows a KV bucket of the stream: its current entries
// first, then each change. Nothing is acknowledged: an entry is the
// latest value of its key, and writing it again changes nothing. So a
// batch that failed is retried by watching the bucket again, which gives
// the current values again, as does a watch that failed (the stream
// restarting, a server lost).
type bucketSource struct {
	stream *stream.Client
	bucket string
	batch  int

	mu sync.Mutex
	w  jetstream.KeyWatcher // nil until opened, and after retry or stop
}

func (b *bucketSource) fetch(ctx context.Context) ([]jetstream.KeyValueEntry, error) {
	w, err := b.watcher(ctx)
	if err != nil {
		return nil, err
	}
	var out []jetstream.KeyValueEntry
	for len(out) < b.batch {
		var e jetstream.KeyValueEntry
		var open bool
		if len(out) == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case e, open = <-w.Updates():
			}
		} else {
			select {
			case e, open = <-w.Updates():
			default:
				return out, nil // all that is there now
			}
		}
		if !open {
			if len(out) > 0 {
				return out, nil // the next fetch finds the watch ended
			}
			return nil, b.ended(w)
		}
		if e != nil { // nil marks the end of the initial values
			out = append(out, e)
		}
	}
	return out, nil
}

// watcher returns the open watch, opening one if there is none.
func (b *bucketSource) watcher(ctx context.Context) (jetstream.KeyWatcher, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		return b.w, nil
	}
	kv, err := b.stream.JetStream().KeyValue(ctx, b.bucket)
	if err != nil {
		return nil, fmt.Errorf("bind bucket %s: %w", b.bucket, err)
	}
	if b.w, err = kv.WatchAll(ctx, jetstream.IgnoreDeletes()); err != nil {
		return nil, fmt.Errorf("watch bucket %s: %w", b.bucket, err)
	}
	return b.w, nil
}

// ended forgets w, whose updates ended: the next fetch watches again. It
// is a failure unless retry or stop ended w on purpose.
func (b *bucketSource) ended(w jetstream.KeyWatcher) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != w {
		return nil
	}
	b.w = nil
	return fmt.Errorf("watch of bucket %s ended", b.bucket)
}

func (b *bucketSource) ack([]jetstream.KeyValueEntry) {}

func (b *bucketSource) retry([]jetstream.KeyValueEntry) { b.stop() }

func (b *bucketSource) release([]jetstream.KeyValueEntry) {}

func (b *bucketSource) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		_ = b.w.Stop()
		b.w = nil
	}
}
