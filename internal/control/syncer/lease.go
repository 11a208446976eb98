package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/control/lease"
	"github.com/purser-io/purser/internal/hub/stream"
)

// Keys in stream.LeasesBucket. A cluster's lease holds the identity of the
// replica working on it; a member key says a replica is alive, so that
// each takes a fair share instead of the first one taking everything.
const (
	leasePrefix  = "syncer."
	memberPrefix = "syncer-member."
	kvTimeout    = 3 * time.Second
)

// leaser keeps this replica's leases on clusters, one election per
// cluster (lease.Run over a lease.KVLock): client-go's elector takes a
// lease over only after seeing its revision unchanged for a whole
// duration on this replica's clock, and then by a compare-and-swap on
// that revision, and the holder stops working on a cluster two thirds of
// the duration after the last renewal it sent. The taker's wait starts no
// earlier than that renewal, so two replicas never work on one cluster at
// once, whatever the clocks of the machines say.
//
// step decides which clusters to campaign for (a fair share) and gives
// back what exceeds it; the elections run between steps, renewing on
// their own.
type leaser struct {
	kv       jetstream.KeyValue
	identity string
	member   string // this replica's member key
	duration time.Duration
	log      *slog.Logger

	// elections by cluster; only step and releaseAll touch the map.
	elections map[string]*clusterElection

	// valid says until when this replica may work on each held cluster.
	// It is read by the syncer's enforcer, independently of step, so that
	// a step slowed down by a hanging stream cannot stretch a lease.
	mu    sync.Mutex
	valid map[string]time.Time
	// release stops this replica's work on a cluster and waits for it;
	// the syncer's, given to every step.
	release func(cluster string)
}

// clusterElection is the election of one cluster's lease.
type clusterElection struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newLeaser(ctx context.Context, c *stream.Client, identity string, duration time.Duration, log *slog.Logger) (*leaser, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := c.JetStream().KeyValue(ctx, stream.LeasesBucket)
	if err != nil {
		return nil, fmt.Errorf("leases bucket %s (declared by stream.Declare): %w", stream.LeasesBucket, err)
	}
	return &leaser{
		kv:        kv,
		identity:  identity,
		member:    memberPrefix + keySafe(identity),
		duration:  duration,
		log:       log,
		elections: map[string]*clusterElection{},
		valid:     map[string]time.Time{},
	}, nil
}

// keySafe maps a name onto the characters a KV key may hold.
func keySafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			return r
		}
		return '_'
	}, s)
}

func leaseKey(cluster string) string { return leasePrefix + keySafe(cluster) }

// step campaigns for, and gives up, leases for one period and returns the
// clusters this replica may work on until the next step. release is called
// (and must have returned) before a lease is given up voluntarily, and
// when a term ends before the lease is let go.
func (l *leaser) step(ctx context.Context, clusters []string, release func(cluster string)) map[string]bool {
	l.mu.Lock()
	l.release = release
	l.mu.Unlock()
	members := l.heartbeat(ctx, time.Now())
	slices.Sort(clusters)
	registered := map[string]bool{}
	for _, c := range clusters {
		registered[c] = true
	}
	for c := range l.elections {
		if !registered[c] {
			release(c)
			l.stop(c)
		}
	}

	// A fair share, rounded up so that every cluster has room somewhere.
	target := (len(clusters) + members - 1) / max(members, 1)
	held := l.held()
	if len(held) < target {
		// Campaign for every cluster not held: any of them may be the
		// one whose holder died.
		for _, c := range clusters {
			if l.elections[c] == nil {
				l.campaign(ctx, c)
			}
		}
	} else {
		// The share is full: campaigns that have not won stop.
		for c := range l.elections {
			if !held[c] {
				l.stop(c)
			}
		}
	}
	// Give back what exceeds the share, one per step, so that a new
	// replica gets work without every lease moving at once.
	if held = l.held(); len(held) > target {
		c := slices.Sorted(maps.Keys(held))[len(held)-1]
		release(c)
		l.stop(c)
		l.log.Info("gave lease back for balance", "cluster", c, "share", target)
	}
	return l.held()
}

// held are the clusters whose lease this replica holds, by their terms.
func (l *leaser) held() map[string]bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.valid))
	for c, until := range l.valid {
		if now.Before(until) {
			out[c] = true
		}
	}
	return out
}

// campaign starts the election of cluster's lease. It outlives the step's
// ctx: only step and releaseAll end it, once the work on the cluster has
// stopped.
func (l *leaser) campaign(ctx context.Context, cluster string) {
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &clusterElection{cancel: cancel, done: make(chan struct{})}
	l.elections[cluster] = e
	cfg := lease.Config{
		Lock:     lease.NewKVLock(l.kv, leaseKey(cluster), l.identity, l.duration),
		Name:     leaseKey(cluster),
		Duration: l.duration,
		Logger:   l.log.With("cluster", cluster),
		Renewed: func(until time.Time) {
			l.mu.Lock()
			l.valid[cluster] = until
			l.mu.Unlock()
		},
	}
	go func() {
		defer close(e.done)
		_ = lease.Run(ectx, cfg, func(term context.Context) error {
			<-term.Done()
			l.drop(cluster)
			// The lease is let go (or left to expire) only once the work
			// on the cluster has stopped.
			l.mu.Lock()
			release := l.release
			l.mu.Unlock()
			if release != nil {
				release(cluster)
			}
			return nil
		})
	}()
}

// stop ends cluster's election and waits for it: the lease is released if
// this replica held it.
func (l *leaser) stop(cluster string) {
	e := l.elections[cluster]
	if e == nil {
		return
	}
	delete(l.elections, cluster)
	e.cancel()
	<-e.done
	l.drop(cluster)
}

func (l *leaser) drop(cluster string) {
	l.mu.Lock()
	delete(l.valid, cluster)
	l.mu.Unlock()
}

// validUntil says until when this replica may work on cluster.
func (l *leaser) validUntil(cluster string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.valid[cluster]
	return t, ok
}

// heartbeat says this replica is alive and counts the live replicas. The
// count only steers balance, never safety, so wall-clock time stamps in
// the values are good enough here.
func (l *leaser) heartbeat(ctx context.Context, now time.Time) int {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if _, err := l.kv.Put(ctx, l.member, []byte(strconv.FormatInt(now.UnixMilli(), 10))); err != nil {
		return 1
	}
	lister, err := l.kv.ListKeysFiltered(ctx, memberPrefix+">")
	if err != nil {
		return 1
	}
	// Stop fails only on a subscription already gone (the listing ended,
	// the connection closed): nothing is left to release.
	defer func() { _ = lister.Stop() }()
	alive := 0
	for key := range lister.Keys() {
		e, err := l.kv.Get(ctx, key)
		if err != nil {
			continue
		}
		ms, _ := strconv.ParseInt(string(e.Value()), 10, 64)
		age := now.Sub(time.UnixMilli(ms))
		switch {
		case age < 3*l.duration:
			alive++
		case age > 20*l.duration:
			// Long dead: tidy up, conditionally, in case it just came back.
			_ = l.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		}
	}
	return max(alive, 1)
}

// releaseAll gives every lease up, once the caller stopped working on the
// clusters, so that another replica takes them over at once.
func (l *leaser) releaseAll(ctx context.Context) {
	for c := range l.elections {
		l.stop(c)
	}
	_ = l.kv.Delete(ctx, l.member)
}
