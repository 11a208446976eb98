package inventory

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// The heartbeats pipeline copies the agents' heartbeats from the stream's
// KV bucket into the database, so that reads (which never touch the
// stream) can say when each agent was last heard from: heartbeatConverter,
// then recordHeartbeats. Every replica may do it: the database keeps the
// latest time whatever the order.

// heartbeatConverter decodes heartbeats and times them by the NATS
// server's clock.
type heartbeatConverter struct {
	log          *slog.Logger
	skewWarnings throttle // agents' clocks far from the NATS server's
}

// heartbeat is what the database keeps of one beat.
type heartbeat struct {
	cluster string
	at      time.Time
	kubeAPI []byte // the agent's word on its kube-apiserver, JSON; nil without one
	current bool
	// capacity is the cluster's free capacity (stream.Capacity), JSON;
	// nil when the beat carries none.
	capacity []byte
}

// convert skips a malformed heartbeat: the next beat of its agent
// replaces it.
func (c *heartbeatConverter) convert(entries []jetstream.KeyValueEntry) ([]heartbeat, []jetstream.KeyValueEntry) {
	var beats []heartbeat
	var ready []jetstream.KeyValueEntry
	for _, e := range entries {
		var hb stream.Heartbeat
		if json.Unmarshal(e.Value(), &hb) != nil || hb.Time.IsZero() {
			continue
		}
		// Only the heartbeat's own time and the agent's word on its
		// kube-apiserver: a snapshot counts once the ingester has applied
		// it, not when the agent sent it.
		beat := heartbeat{cluster: e.Key(), at: c.heartbeatTime(e, hb), current: hb.KubeAPI.Current()}
		if hb.KubeAPI != nil {
			report, err := json.Marshal(hb.KubeAPI)
			if err != nil {
				c.log.Error("dropping heartbeat", "cluster", e.Key(), "error", err)
				continue
			}
			beat.kubeAPI = report
		}
		if hb.Capacity != nil {
			report, err := json.Marshal(hb.Capacity)
			if err != nil {
				c.log.Error("dropping heartbeat", "cluster", e.Key(), "error", err)
				continue
			}
			beat.capacity = report
		}
		beats = append(beats, beat)
		ready = append(ready, e)
	}
	return beats, ready
}

// recordHeartbeats is the heartbeats' sink.
func recordHeartbeats(ctx context.Context, tx *store.Tx, beats []heartbeat) (struct{}, error) {
	// In the clusters' order, as every transaction takes agents' rows: a
	// batch of events holds its clusters' rows while it touches them.
	beats = slices.Clone(beats)
	slices.SortStableFunc(beats, func(x, y heartbeat) int { return strings.Compare(x.cluster, y.cluster) })
	for _, b := range beats {
		if err := tx.Agents().RecordHeartbeat(ctx, b.cluster, b.at, b.kubeAPI, b.current); err != nil {
			return struct{}{}, err
		}
		if b.capacity != nil {
			if err := tx.Agents().RecordCapacity(ctx, b.cluster, b.at, b.capacity); err != nil {
				return struct{}{}, err
			}
		}
	}
	return struct{}{}, nil
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
func (c *heartbeatConverter) heartbeatTime(e jetstream.KeyValueEntry, hb stream.Heartbeat) time.Time {
	stored := e.Created()
	if stored.IsZero() {
		return hb.Time.UTC()
	}
	if skew := hb.Time.Sub(stored); skew > clockSkewWarning || skew < -clockSkewWarning {
		c.skewWarnings.Do(e.Key(), func() {
			c.log.Warn("agent clock differs from the NATS server's", "cluster", e.Key(),
				"skew", skew.Round(time.Millisecond), "agentTime", hb.Time, "serverTime", stored)
		})
	}
	return stored.UTC()
}

// throttle runs a function at most once a minute per key, for warnings
// that would otherwise repeat with every heartbeat. Its zero value is
// ready; the heartbeats' converter is its only user.
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
