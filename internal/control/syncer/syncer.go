// Package syncer is purser's deployables syncer (`purser syncer`): it makes
// every member cluster hold exactly the deployables of the source of truth
// whose placement matches it, repairs drift, repopulates rebuilt clusters,
// and records per (deployable, cluster) sync state in the store.
//
// It is level-based. A poller re-reads the deployables and clusters tables
// every second or so (the API announces no deployable change on the
// stream) and turns every change into work for the clusters this replica
// owns. Each owned cluster has its own worker: a reconcile.Queue of
// deployable uids, retried with backoff per key, and label-selected
// dynamic informers on the kinds in use, whose events bring a changed or
// deleted object back within seconds. The queue's jittered periodic resync
// is the safety net; it writes nothing when the cluster already holds what
// the last apply wrote. The poll, the ownership of clusters and the
// enforcement of leases are reconcile.Every loops. With a stream, clusters
// are shared among replicas through leases in the JetStream KV bucket
// stream.LeasesBucket; without one, a replica owns every cluster.
package syncer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Store is the database as the syncer uses it: its transactions.
type Store = store.Transactor

// Config says what a Syncer works with.
type Config struct {
	Store  Store
	Sealer *seal.Sealer
	// Stream shares clusters among replicas through leases; nil means no
	// sharding: this replica owns every cluster.
	Stream *stream.Client
	// Identity names this replica in its leases (e.g. the host name and
	// process id); it must differ between replicas.
	Identity string
	// ResyncPeriod is the period of the full resync of each cluster,
	// jittered by up to 20%; default 5 minutes.
	ResyncPeriod time.Duration
	// PollInterval is how often the deployables and clusters tables are
	// re-read; default 1 second.
	PollInterval time.Duration
	// LeaseDuration is how long a lease stays valid without renewal, and
	// so how long a dead replica's clusters wait for a new owner; default
	// 15 seconds. Renewals happen every third of it.
	LeaseDuration time.Duration
	// Workers per cluster; default 4.
	Workers int
	Logger  *slog.Logger
	// Guard, when set, holds every apply and delete back while this
	// process does not reach the hub's majority.
	Guard *guard.Guard
	// Policy decides, before each apply, whether the deployable's author
	// may put its kind on the cluster (tenancy.go). Nil is a policy with no
	// admins and no rules: namespaced kinds only.
	Policy policy.KindPolicy
}

// Defaults of Config.
const (
	DefaultResyncPeriod  = 5 * time.Minute
	DefaultPollInterval  = time.Second
	DefaultLeaseDuration = 15 * time.Second
	DefaultWorkers       = 4
)

// enforcePeriod is how often the work on clusters is checked against the
// leases' validity: a fraction of a second, against a margin of a third
// of the lease duration.
const enforcePeriod = 200 * time.Millisecond

// Syncer is the deployables syncer of one replica.
type Syncer struct {
	cfg     Config
	log     *slog.Logger
	configs *clusters.Cache
	policy  policy.KindPolicy
	pods    *admission.Checker // judges the pods of every template, as the API does

	mu          sync.RWMutex
	deployables map[string]*deployable // by uid: the latest poll
	// version is the deployables table's fingerprint at the latest poll
	// (valid once versionKnown).
	version      store.DeployablesVersion
	versionKnown bool
	clusters     map[string]*store.Cluster
	// rollouts are the rollout rows at the latest poll, by deployable uid.
	rollouts map[string]*rolloutState
	workers  map[string]*clusterWorker // the clusters this replica works on
	polled   chan struct{}             // closed after the first successful poll
	// badKubeconfig remembers, per cluster, the sealed kubeconfig that
	// could not be used (guarded by mu).
	badKubeconfig map[string]string

	// Writes made, for tests and benchmarks: the goal of an idle resync
	// is that neither moves.
	kubeWrites   atomic.Int64 // applies, deletes, namespace creations
	statusWrites atomic.Int64
	// syncs counts keys synced, for tests that wait for resyncs to pass
	// before asserting that they wrote nothing.
	syncs atomic.Int64
	// identityCheck is how often workers read their cluster's identity;
	// a test turns it off (a long period) to prove the resync alone.
	identityCheck time.Duration
	// hook, when set by a test, is told when work on a cluster starts
	// and after it has completely stopped.
	hook func(cluster string, working bool)
}

// New returns a Syncer; nothing runs until Run.
func New(cfg Config) *Syncer {
	cfg.ResyncPeriod = cmp.Or(cfg.ResyncPeriod, DefaultResyncPeriod)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{
		cfg:         cfg,
		log:         log.With("identity", cfg.Identity), // callers name the component
		configs:     clusters.NewCache(cfg.Sealer),
		policy:      policy.KindPolicyOrEmpty(cfg.Policy),
		pods:        admission.DefaultChecker(),
		deployables: map[string]*deployable{},
		clusters:    map[string]*store.Cluster{},
		rollouts:    map[string]*rolloutState{},
		workers:     map[string]*clusterWorker{},
		polled:      make(chan struct{}),

		badKubeconfig: map[string]string{},
		identityCheck: identityCheckPeriod,
	}
}

// Run syncs until ctx is done, then stops every cluster worker, releases
// its leases so that another replica takes over at once, and returns nil.
// It fails only when the configuration is unusable.
func (s *Syncer) Run(ctx context.Context) error {
	if s.cfg.Store == nil || s.cfg.Sealer == nil {
		return errors.New("syncer: Config needs Store and Sealer")
	}
	var leases *leaser
	if s.cfg.Stream != nil {
		if s.cfg.Identity == "" {
			return errors.New("syncer: Config needs an Identity to share clusters through leases")
		}
		var err error
		if leases, err = newLeaser(ctx, s.cfg.Stream, s.cfg.Identity, s.cfg.LeaseDuration, s.log); err != nil {
			return fmt.Errorf("syncer: %w", err)
		}
	}
	s.log.Info("syncer starting", "sharded", leases != nil, "resync", s.cfg.ResyncPeriod)

	var wg sync.WaitGroup
	wg.Go(func() { s.pollLoop(ctx) })
	wg.Go(func() { s.ownLoop(ctx, leases) })
	wg.Go(func() { s.rolloutLoop(ctx) })
	if leases != nil {
		wg.Go(func() { s.enforceLoop(ctx, leases) })
	}
	wg.Wait()

	// Stop the workers before releasing the leases: another replica may
	// start on a cluster as soon as its lease is gone.
	s.mu.Lock()
	workers := s.workers
	s.workers = map[string]*clusterWorker{}
	s.mu.Unlock()
	for _, w := range workers {
		w.stop()
	}
	if leases != nil {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		leases.releaseAll(releaseCtx)
		cancel()
	}
	s.log.Info("syncer stopped")
	return nil
}

// pollLoop re-reads the source of truth every PollInterval, jittered, and
// hands changes to the workers.
func (s *Syncer) pollLoop(ctx context.Context) {
	n, failing := 0, false
	reconcile.Every(ctx, s.cfg.PollInterval, func(ctx context.Context) {
		err := s.poll(ctx, n%30 == 0)
		n++
		switch {
		case err != nil && ctx.Err() == nil:
			// One line per outage, not per second.
			if !failing {
				s.log.Warn("cannot read deployables; retrying", "error", err)
			}
			failing = true
		case failing:
			s.log.Info("reading deployables again")
			failing = false
		}
	})
}

// poll reads every deployable and cluster in one snapshot. Only rows whose
// resourceVersion moved are decoded and announced, so an idle poll costs
// one read transaction and no work on any cluster. A full poll also tries
// to purge every tombstone, for tombstones whose last confirmation came
// from a cluster that was deregistered since.
//
// The rows are read only when the table's fingerprint moved since the last
// poll, or when full is set (every 30th poll, in case a change hid from
// the fingerprint): an idle poll reads three numbers and the clusters.
func (s *Syncer) poll(ctx context.Context, full bool) error {
	var (
		recs    []*store.Deployable
		cls     []*store.Cluster
		ros     []*store.DeployableRollout
		version store.DeployablesVersion
		reread  bool
	)
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if cls, err = tx.Clusters().List(ctx); err != nil {
			return err
		}
		if ros, err = tx.Deployables().ListRollouts(ctx); err != nil {
			return err
		}
		if version, err = tx.Deployables().Version(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		reread = full || !s.versionKnown || version != s.version
		s.mu.Unlock()
		if !reread {
			return nil
		}
		recs = recs[:0]
		cont := ""
		for {
			page, next, err := tx.Deployables().List(ctx, store.DeployableFilter{IncludeDeleted: true, Limit: 1000, Continue: cont})
			if err != nil {
				return err
			}
			recs = append(recs, page...)
			if next == "" {
				return nil
			}
			cont = next
		}
	})
	if err != nil {
		return err
	}

	s.mu.Lock()
	s.version, s.versionKnown = version, true
	var changed []string
	next := s.deployables // unchanged unless reread
	if reread {
		next = make(map[string]*deployable, len(recs))
		for _, rec := range recs {
			old := s.deployables[rec.UID]
			if old != nil && old.rec.ResourceVersion == rec.ResourceVersion {
				next[rec.UID] = old
				continue
			}
			next[rec.UID] = decodeDeployable(rec)
			changed = append(changed, rec.UID)
		}
		for uid := range s.deployables {
			if next[uid] == nil {
				changed = append(changed, uid) // purged: workers drop what is left
			}
		}
		s.deployables = next
	}
	// A rollout row that moved (a decision, a control, a previous
	// generation kept), or whose deployable did, changes what some
	// clusters should hold.
	nextRollouts := make(map[string]*rolloutState, len(ros))
	for _, row := range ros {
		d := next[row.DeployableUID]
		old := s.rollouts[row.DeployableUID]
		if old != nil && old.row.ResourceVersion == row.ResourceVersion && (d == nil || old.recRV == d.rec.ResourceVersion) {
			nextRollouts[row.DeployableUID] = old
			continue
		}
		nextRollouts[row.DeployableUID] = decodeRollout(d, row)
		changed = append(changed, row.DeployableUID)
	}
	for uid := range s.rollouts {
		if nextRollouts[uid] == nil {
			changed = append(changed, uid)
		}
	}
	s.rollouts = nextRollouts
	nextClusters := make(map[string]*store.Cluster, len(cls))
	for _, c := range cls {
		nextClusters[c.Name] = c
	}
	s.clusters = nextClusters
	workers := make([]*clusterWorker, 0, len(s.workers))
	for _, w := range s.workers {
		workers = append(workers, w)
	}
	select {
	case <-s.polled:
	default:
		close(s.polled)
	}
	s.mu.Unlock()

	for _, w := range workers {
		c := nextClusters[w.name]
		if c == nil {
			continue // deregistered: ownLoop stops the worker
		}
		if w.setCluster(c) {
			w.enqueueAll() // labels or taints changed: every placement may have
		} else {
			w.enqueue(changed...)
		}
	}
	for _, uid := range changed {
		if d := next[uid]; d != nil && d.rec.DeletedAt != nil {
			s.tryPurge(ctx, uid)
		}
	}
	if full {
		for uid, d := range next {
			if d.rec.DeletedAt != nil {
				s.tryPurge(ctx, uid)
			}
		}
	}
	return nil
}

// ownLoop decides which clusters this replica works on and starts and
// stops their workers accordingly.
func (s *Syncer) ownLoop(ctx context.Context, leases *leaser) {
	// Owning a cluster before the first poll would start a worker that
	// believes the source of truth is empty.
	select {
	case <-ctx.Done():
		return
	case <-s.polled:
	}
	period := s.cfg.PollInterval
	if leases != nil {
		period = s.cfg.LeaseDuration / 3
	}
	reconcile.Every(ctx, period, func(ctx context.Context) {
		s.mu.RLock()
		names := make([]string, 0, len(s.clusters))
		for name := range s.clusters {
			names = append(names, name)
		}
		s.mu.RUnlock()

		var owned map[string]bool
		if leases == nil {
			owned = make(map[string]bool, len(names))
			for _, n := range names {
				owned[n] = true
			}
		} else {
			owned = leases.step(ctx, names, s.stopWorker)
		}
		s.setOwned(ctx, owned)
	})
}

// enforceLoop stops, within a fraction of a second, the work on any
// cluster whose lease this replica could not renew in time, whatever the
// lease steps are doing: they may be stuck on a hanging stream.
func (s *Syncer) enforceLoop(ctx context.Context, leases *leaser) {
	reconcile.Every(ctx, enforcePeriod, func(context.Context) {
		s.mu.RLock()
		names := make([]string, 0, len(s.workers))
		for name := range s.workers {
			names = append(names, name)
		}
		s.mu.RUnlock()
		now := time.Now()
		for _, name := range names {
			if until, ok := leases.validUntil(name); !ok || now.After(until) {
				s.log.Warn("lease not renewed in time; stopping work on cluster", "cluster", name)
				s.stopWorker(name)
			}
		}
	})
}

// setOwned starts workers for newly owned clusters and stops the others.
func (s *Syncer) setOwned(ctx context.Context, owned map[string]bool) {
	s.mu.Lock()
	var stop []*clusterWorker
	for name, w := range s.workers {
		c := s.clusters[name]
		// A new kubeconfig needs new clients: the worker starts afresh.
		if !owned[name] || c == nil || !bytes.Equal(c.Kubeconfig, w.kubeconfig) || w.stale.Load() {
			stop = append(stop, w)
			delete(s.workers, name)
		}
		if c == nil {
			s.configs.Forget(name)
		}
	}
	s.mu.Unlock()
	for _, w := range stop {
		w.stop()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range owned {
		c := s.clusters[name]
		if c == nil || s.workers[name] != nil {
			continue
		}
		w, err := newClusterWorker(s, c)
		if err != nil {
			// Said once per kubeconfig, not once per pass: the operator
			// fixes it by registering a usable one.
			if s.badKubeconfig[name] != string(c.Kubeconfig) {
				s.badKubeconfig[name] = string(c.Kubeconfig)
				s.log.Error("cannot build a client for cluster; not syncing it", "cluster", name, "error", err)
			}
			continue
		}
		delete(s.badKubeconfig, name)
		s.workers[name] = w
		w.start(ctx)
	}
}

// stopWorker stops the worker of cluster, if any, and waits for it; the
// leaser calls it before giving a lease up.
func (s *Syncer) stopWorker(cluster string) {
	s.mu.Lock()
	w := s.workers[cluster]
	delete(s.workers, cluster)
	s.mu.Unlock()
	if w != nil {
		w.stop()
	}
}

// snapshot returns the latest decoded deployables, for a full resync.
func (s *Syncer) snapshot() map[string]*deployable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deployables
}

func (s *Syncer) deployable(uid string) *deployable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deployables[uid]
}

// removedMessage marks the status of a tombstoned deployable on a cluster
// whose copy is gone: once every registered cluster says so, the row is
// purged.
const removedMessage = "removed: the deployable was deleted"

// tryPurge purges a tombstone once every registered cluster confirmed that
// its copy is gone. Any replica may do it; the check and the purge share a
// transaction, so a deployable revived meanwhile (PUT clears the tombstone)
// is never purged.
func (s *Syncer) tryPurge(ctx context.Context, uid string) {
	purged := false
	err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		purged = false
		rec, err := tx.Deployables().GetByUID(ctx, uid)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.DeletedAt == nil || rec.Pending != nil {
			// Revived, or a revive waits for approval: kept.
			return nil
		}
		cls, err := tx.Clusters().List(ctx)
		if err != nil {
			return err
		}
		sts, err := tx.Deployables().ListStatus(ctx, uid)
		if err != nil {
			return err
		}
		done := map[string]bool{}
		for _, st := range sts {
			if st.Message == removedMessage && st.SyncedGeneration == rec.Generation {
				done[st.Cluster] = true
			}
		}
		for _, c := range cls {
			if !done[c.Name] {
				return nil
			}
		}
		purged = true
		return tx.Deployables().Purge(ctx, uid)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("cannot purge deleted deployable", "uid", uid, "error", err)
		return
	}
	if purged {
		s.log.Info("deployable removed from every cluster and purged", "uid", uid)
	}
}

// stateOf is a short alias for the API's sync states as stored strings.
func stateOf(s v1alpha1.SyncState) string { return string(s) }
