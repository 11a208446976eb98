package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// leaser keeps this replica's leases on clusters. Correctness rests on
// compare-and-swap by revision and on local clocks only:
//
//   - the holder renews every step (a third of the lease duration) and
//     stops working on a cluster, before anything else, once its last
//     successful renewal is older than the duration minus a margin;
//   - another replica takes a lease over only after seeing its revision
//     unchanged for a whole duration on its own clock, and then by a
//     CAS on that revision, so two contenders cannot both win.
//
// The taker's wait starts no earlier than the holder's last renewal, and
// the holder gives up before that wait can end, so two replicas never
// work on one cluster at once, whatever the clocks of the machines say.
type leaser struct {
	kv       jetstream.KeyValue
	identity string
	member   string // this replica's member key
	duration time.Duration
	log      *slog.Logger

	held map[string]heldLease // by cluster
	seen map[string]seenLease // other replicas' leases, by cluster

	// valid says until when this replica may work on each held cluster.
	// It is read by the syncer's enforcer, independently of step, so that
	// a step slowed down by a hanging stream cannot stretch a lease.
	mu    sync.Mutex
	valid map[string]time.Time
}

type heldLease struct {
	revision uint64
	renewed  time.Time // when the renewal that succeeded was sent
}

type seenLease struct {
	revision uint64
	since    time.Time // when this revision was first seen here
}

func newLeaser(ctx context.Context, c *stream.Client, identity string, duration time.Duration, log *slog.Logger) (*leaser, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := c.JetStream().KeyValue(ctx, stream.LeasesBucket)
	if err != nil {
		return nil, fmt.Errorf("leases bucket %s (declared by stream.Declare): %w", stream.LeasesBucket, err)
	}
	return &leaser{
		kv:       kv,
		identity: identity,
		member:   memberPrefix + keySafe(identity),
		duration: duration,
		log:      log,
		held:     map[string]heldLease{},
		seen:     map[string]seenLease{},
		valid:    map[string]time.Time{},
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

// step renews, takes and gives up leases for one period and returns the
// clusters this replica may work on until the next step. release is called
// (and must have returned) before a lease is given up voluntarily.
func (l *leaser) step(ctx context.Context, clusters []string, release func(cluster string)) map[string]bool {
	now := time.Now()
	members := l.heartbeat(ctx, now)
	slices.Sort(clusters)
	registered := map[string]bool{}
	for _, c := range clusters {
		registered[c] = true
	}

	// Renew what is held; drop what could not be renewed in time.
	for c, h := range l.held {
		if !registered[c] {
			release(c)
			l.delete(ctx, c, h.revision)
			l.drop(c)
			continue
		}
		sent := time.Now()
		rev, err := l.update(ctx, c, h.revision)
		switch {
		case err == nil:
			l.hold(c, rev, sent)
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound):
			// The revision moved: someone took it (we were presumed dead).
			l.log.Warn("lost lease on cluster", "cluster", c)
			l.drop(c)
		default:
			if time.Since(h.renewed) > l.duration-l.duration/3 {
				l.log.Warn("cannot renew lease in time; stopping work on cluster", "cluster", c, "error", err)
				l.drop(c)
			}
		}
	}

	// A fair share, rounded up so that every cluster has room somewhere.
	target := (len(clusters) + members - 1) / max(members, 1)
	for _, c := range clusters {
		if len(l.held) >= target {
			break
		}
		if _, ok := l.held[c]; ok {
			continue
		}
		l.tryTake(ctx, c)
	}
	// Give back what exceeds the share, one per step, so that a new
	// replica gets work without every lease moving at once.
	if len(l.held) > target {
		held := make([]string, 0, len(l.held))
		for c := range l.held {
			held = append(held, c)
		}
		slices.Sort(held)
		c := held[len(held)-1]
		release(c)
		l.delete(ctx, c, l.held[c].revision)
		l.drop(c)
		l.log.Info("gave lease back for balance", "cluster", c, "share", target)
	}

	owned := make(map[string]bool, len(l.held))
	for c := range l.held {
		owned[c] = true
	}
	return owned
}

// tryTake takes a free lease, or one whose holder stopped renewing it.
func (l *leaser) tryTake(ctx context.Context, cluster string) {
	key := leaseKey(cluster)
	kctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	e, err := l.kv.Get(kctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		sent := time.Now()
		rev, err := l.kv.Create(kctx, key, []byte(l.identity))
		if err == nil {
			l.hold(cluster, rev, sent)
			delete(l.seen, cluster)
			l.log.Info("took free lease on cluster", "cluster", cluster)
		}
		return
	}
	if err != nil {
		return
	}
	// Observed now, after the answer: the renewal it shows happened
	// before this moment, which is what makes waiting from here safe.
	now := time.Now()
	// A lease naming this identity is from an earlier life of it, which
	// may still be working: it is waited out like anyone else's.
	s, ok := l.seen[cluster]
	if !ok || s.revision != e.Revision() {
		l.seen[cluster] = seenLease{revision: e.Revision(), since: now}
		return
	}
	if now.Sub(s.since) < l.duration {
		return
	}
	sent := time.Now()
	rev, err := l.kv.Update(kctx, key, []byte(l.identity), e.Revision())
	if err == nil {
		l.hold(cluster, rev, sent)
		delete(l.seen, cluster)
		l.log.Info("took over expired lease on cluster", "cluster", cluster, "previous", string(e.Value()))
	}
}

// hold records a lease taken or renewed by a request sent at sent. Work
// may go on until two thirds of the duration after sent: a taker waits a
// whole duration from a moment after sent, so the last third is margin.
func (l *leaser) hold(cluster string, revision uint64, sent time.Time) {
	l.held[cluster] = heldLease{revision: revision, renewed: sent}
	l.mu.Lock()
	l.valid[cluster] = sent.Add(l.duration - l.duration/3)
	l.mu.Unlock()
}

func (l *leaser) drop(cluster string) {
	delete(l.held, cluster)
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

func (l *leaser) update(ctx context.Context, cluster string, revision uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return l.kv.Update(ctx, leaseKey(cluster), []byte(l.identity), revision)
}

func (l *leaser) delete(ctx context.Context, cluster string, revision uint64) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	// Conditional: a lease that already moved on is not ours to delete.
	_ = l.kv.Delete(ctx, leaseKey(cluster), jetstream.LastRevision(revision))
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
	defer lister.Stop()
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
	for c, h := range l.held {
		l.delete(ctx, c, h.revision)
		l.drop(c)
	}
	_ = l.kv.Delete(ctx, l.member)
}
