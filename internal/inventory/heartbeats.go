package inventory

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/agent"
	"github.com/purser-io/purser/internal/backoff"
	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/stream"
)

// heartbeatLoop copies the agents' heartbeats from the stream's KV bucket
// into the database, so that reads (which never touch the stream) can say
// when each agent was last heard from. Every replica may do it: the
// database keeps the latest time whatever the order.
func (in *Ingester) heartbeatLoop(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if err := in.watchHeartbeats(ctx); err != nil && ctx.Err() == nil {
			in.log.Warn("watch heartbeats", "error", err)
			backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second))
		}
	}
}

func (in *Ingester) watchHeartbeats(ctx context.Context) error {
	kv, err := in.cfg.Stream.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
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
			var hb agent.Heartbeat
			if json.Unmarshal(e.Value(), &hb) != nil || hb.Time.IsZero() {
				continue
			}
			// Only the heartbeat's own time: a snapshot counts once the
			// ingester has applied it, not when the agent sent it.
			at := hb.Time.UTC()
			if err := in.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
				return tx.TouchAgent(ctx, e.Key(), &at, nil, nil)
			}); err != nil {
				return err
			}
		}
	}
}
