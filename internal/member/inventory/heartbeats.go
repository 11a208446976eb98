package inventory

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// heartbeatLoop copies the agents' heartbeats from the stream's KV bucket
// into the database, so that reads (which never touch the stream) can say
// when each agent was last heard from. Every replica may do it: the
// database keeps the latest time whatever the order.
func (in *Ingester) heartbeatLoop(ctx context.Context) {
	in.followBucket(ctx, stream.HeartbeatsBucket, "heartbeats", in.recordHeartbeat)
}

// recordHeartbeat stores one agent's heartbeat; a malformed one is
// skipped.
func (in *Ingester) recordHeartbeat(ctx context.Context, e jetstream.KeyValueEntry) error {
	var hb stream.Heartbeat
	if json.Unmarshal(e.Value(), &hb) != nil || hb.Time.IsZero() {
		return nil
	}
	// Only the heartbeat's own time and the agent's word on its
	// kube-apiserver: a snapshot counts once the ingester has applied it,
	// not when the agent sent it.
	at := in.heartbeatTime(e, hb)
	var report []byte
	if hb.KubeAPI != nil {
		var err error
		if report, err = json.Marshal(hb.KubeAPI); err != nil {
			return err
		}
	}
	return in.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		return tx.RecordHeartbeat(ctx, e.Key(), at, report, hb.KubeAPI.Current())
	})
}

// clockSkewWarning is how far an agent's clock may be from the NATS
// server's before the ingester says so.
const clockSkewWarning = 5 * time.Second

// heartbeatTime is when the NATS server stored the heartbeat, by its own
// clock. The agent starts its lease when it sends the beat, so the
// server's time is never earlier, and the fencing margin then has to cover
// only the skew between the NATS servers and the controller, not that of
// every member cluster's machines. An agent whose clock is far off is
// reported, as it still stamps its snapshots.
func (in *Ingester) heartbeatTime(e jetstream.KeyValueEntry, hb stream.Heartbeat) time.Time {
	stored := e.Created()
	if stored.IsZero() {
		return hb.Time.UTC()
	}
	if skew := hb.Time.Sub(stored); skew > clockSkewWarning || skew < -clockSkewWarning {
		in.skewWarnings.Do(e.Key(), func() {
			in.log.Warn("agent clock differs from the NATS server's", "cluster", e.Key(),
				"skew", skew.Round(time.Millisecond), "agentTime", hb.Time, "serverTime", stored)
		})
	}
	return stored.UTC()
}

// throttle runs a function at most once a minute per key, for warnings
// that would otherwise repeat with every heartbeat. Its zero value is
// ready; the heartbeat loop is its only user.
type throttle struct {
	last map[string]time.Time
}

func (t *throttle) Do(key string, fn func()) {
	now := time.Now()
	if now.Sub(t.last[key]) < time.Minute {
		return
	}
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	t.last[key] = now
	fn()
}
