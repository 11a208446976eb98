package inventory

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/platform/backoff"
)

// followBucket hands every entry of the stream's KV bucket, the current
// ones first and then each change, to apply, until ctx ends. A watch
// that fails (the stream restarting, a server lost) is opened again with
// backoff; apply is then given the current values again, so it must be
// idempotent, as writing the latest value of a key is. what names the
// entries in the log.
func (in *Ingester) followBucket(ctx context.Context, bucket, what string, apply func(context.Context, jetstream.KeyValueEntry) error) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if err := in.watchBucket(ctx, bucket, apply); err != nil && ctx.Err() == nil {
			in.log.Warn("watch "+what, "error", err)
			backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second))
		}
	}
}

func (in *Ingester) watchBucket(ctx context.Context, bucket string, apply func(context.Context, jetstream.KeyValueEntry) error) error {
	kv, err := in.cfg.Stream.JetStream().KeyValue(ctx, bucket)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil {
				continue // the end of the initial values
			}
			if err := apply(ctx, e); err != nil {
				return err
			}
		}
	}
}
