package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The heartbeat is one path of the agent's lease toward the control
// plane, the hub's Lease in the cluster the other (hublease.go): the
// control plane considers the agent gone LeaseDuration after the later of
// its last beat and the hub's last renewal (plus a margin), and the agent,
// counting from the same two on its own monotonic clock, fences its
// cluster when that much time has passed since both (fence.go).

// heartbeatLoop beats every HeartbeatInterval. It binds the bucket lazily,
// so that an agent started while the stream is out of reach still counts
// its lease from its start, and fences when the lease runs out.
//
// The beats start every interval, counted from the start of the last one
// and not jittered (reconcile.Period), rather than on reconcile.Every, whose period runs
// from the end of each run and is lengthened by up to a fifth: the lease
// is three intervals, and a beat that fails slowly (an unanswered probe,
// then a write that times out) followed by a longer wait would let it
// run out after a single missed beat.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	var kv jetstream.KeyValue
	reconcile.Period(ctx, a.cfg.HeartbeatInterval, func(ctx context.Context) { kv = a.heartbeat(ctx, kv) })
}

// heartbeatTimeout bounds one beat: a write that hangs on a connection cut
// without a reset must fail in time for the next one, and well within the
// lease.
func (a *Agent) heartbeatTimeout() time.Duration {
	return min(max(a.cfg.HeartbeatInterval, time.Second), 5*time.Second, a.cfg.LeaseDuration/3)
}

// heartbeat writes one beat and returns the bucket to use for the next one
// (nil when it could not be bound). An acknowledged write renews the lease
// from the moment it was sent, the earliest the stream can have stored it.
func (a *Agent) heartbeat(ctx context.Context, kv jetstream.KeyValue) jetstream.KeyValue {
	// The probe goes first, so that the beat says what is true now; it
	// is bounded well within the interval (probeTimeout). Then the hub's
	// Lease is read, before the stream is tried, so that a stream that
	// does not answer never delays the other path (hublease.go).
	if a.probeKubeAPI(ctx) {
		a.readHubLease(ctx)
	}
	defer a.logPaths()
	sent := time.Now()
	beatCtx, cancel := context.WithTimeout(ctx, a.heartbeatTimeout())
	defer cancel()
	if kv == nil {
		var err error
		if kv, err = a.heartbeatBucket(beatCtx); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("heartbeat failed", "error", err)
			}
			return nil
		}
	}
	data, err := json.Marshal(a.heartbeatMessage(sent))
	if err != nil {
		a.log.Error("encode heartbeat", "error", err)
		return kv
	}
	var prev jetstream.KeyValueEntry
	if !a.returnChecked {
		// The last beat before this term, by whoever wrote it.
		if prev, err = kv.Get(beatCtx, a.cfg.Cluster); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			if ctx.Err() == nil {
				a.log.Warn("heartbeat failed", "error", err)
			}
			return kv
		}
	}
	rev, err := kv.Put(beatCtx, a.cfg.Cluster, data)
	if err != nil {
		// The next beat retries; the lease tolerates missed ones.
		if ctx.Err() == nil {
			a.log.Warn("heartbeat failed", "error", err)
		}
		return kv
	}
	a.mu.Lock()
	if sent.After(a.lastBeat) {
		a.lastBeat = sent
	}
	a.mu.Unlock()
	if !a.returnChecked {
		a.checkReturn(beatCtx, kv, prev, rev)
	}
	return kv
}

// checkReturn compares the first beat of the term with the last one
// before it, both timed by the NATS servers that stored them (never by
// this agent's clock, which may have been off or stopped meanwhile): a
// gap longer than the lease means the control plane may have moved this
// cluster's AtMostOne work elsewhere while the agent was away, and that
// the copies here, which nothing fenced (the agent was not running to),
// must stop before they run again beside the new ones.
func (a *Agent) checkReturn(ctx context.Context, kv jetstream.KeyValue, prev jetstream.KeyValueEntry, rev uint64) {
	a.returnChecked = true
	if prev == nil {
		a.log.Info("first heartbeat of this cluster's agents: nothing to fence on return")
		return
	}
	cur, err := kv.GetRevision(ctx, a.cfg.Cluster, rev)
	if err != nil {
		a.returnChecked = false // the next beat compares again
		return
	}
	gap := cur.Created().Sub(prev.Created())
	if gap > a.cfg.LeaseDuration {
		a.returned.Store(true)
		select {
		case a.fenceNow <- struct{}{}:
		default:
		}
		a.log.Warn("the last heartbeat before this one is older than the lease: the agent was away, and AtMostOne work may have moved; fencing it",
			"gap", gap.Round(time.Millisecond), "leaseDuration", a.cfg.LeaseDuration)
		return
	}
	a.log.Info("back within the lease: nothing to fence on return", "gap", gap.Round(time.Millisecond), "leaseDuration", a.cfg.LeaseDuration)
}

// heartbeatBucket declares the topology (idempotent, so the agent does not
// depend on another component having started first) and binds the bucket.
func (a *Agent) heartbeatBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if err := a.cfg.Stream.Declare(ctx); err != nil {
		return nil, err
	}
	kv, err := a.cfg.Stream.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
	if err != nil {
		return nil, fmt.Errorf("bind bucket %s: %w", stream.HeartbeatsBucket, err)
	}
	return kv, nil
}

func (a *Agent) heartbeatMessage(now time.Time) *stream.Heartbeat {
	hb := &stream.Heartbeat{Cluster: a.cfg.Cluster, Identity: a.cfg.LeaderElection.Identity, Time: now.UTC(),
		LeaseSeconds: a.cfg.LeaseDuration.Seconds(), Objects: map[string]int{}, Pending: len(a.queue),
		Resyncs: a.resyncs.Load(), Fenced: a.fenced.Load()}
	for _, w := range a.watches() {
		hb.Objects[kindKey(w.gvk.GroupVersion().String(), w.gvk.Kind)] = w.count()
	}
	hb.KubeAPI = a.kubeAPIReport()
	hb.Capacity = a.capacityReport()
	hb.HubLease = a.hubLeaseReport()
	a.mu.Lock()
	hb.Started = a.started.UTC()
	hb.LastSnapshot = a.lastSnapshot
	a.mu.Unlock()
	return hb
}

// leaseLeft is how long the agent's lease has to run; zero or less once it
// has expired: LeaseDuration after the later of the last heartbeat the
// stream acknowledged and the last renewal of the hub's Lease seen, both
// on the monotonic clock. It expires only when both paths are silent.
func (a *Agent) leaseLeft() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	last := a.lastBeat
	if a.hubLease.seen.After(last) {
		last = a.hubLease.seen
	}
	return a.cfg.LeaseDuration - time.Since(last)
}

// kindKey names a tracked kind in logs and heartbeats.
func kindKey(apiVersion, kind string) string { return fmt.Sprintf("%s/%s", apiVersion, kind) }
