// Package submitter takes accepted runnables to member clusters: the
// `purser submitter` component of the design. It consumes the submissions
// work queue (stream.SubmitterConsumer) and treats every message as a hint
// only: it re-reads the runnable from the database and moves it on from
// whatever phase it is in.
//
//   - Queued: past its deadline it becomes Expired; otherwise a cluster is
//     chosen (internal/domain/placement) and the decision is committed (attempt,
//     phase Scheduled, audit entry) before anything is created, so that a
//     crash at any point leaves a record of where the object may be.
//   - Scheduled: the template is created on the attempt's cluster with
//     purser's labels; creating it again is a no-op, so a redelivered
//     message or a competing replica never runs the work twice.
//   - Cancelled: the object, if any, is deleted from its cluster.
//   - Submitted, Running or Suspended with a spec newer than its attempt's
//     object: the user's update is applied to the object in place
//     (update.go).
//
// The runnables are the keys of a reconcile.Queue: each step decides from
// the row it read and writes the runnable's move in one place. Failures
// are classified once (see classify): permanent ones end the runnable in
// Failed with the API server's words; transient ones are retried with the
// queue's backoff (no sooner than a server's Retry-After) and, when a
// cluster keeps failing, the attempt ends and the runnable is placed
// elsewhere. The queue's resync, a rescan of the database, finds whatever
// a lost or delayed message would have announced, so no runnable depends
// on a message arriving. Replicas compete on the same durable consumer;
// the optimistic updates of the store make their races safe.
package submitter

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Store is the database as the submitter uses it: its transactions.
type Store = store.Transactor

// Config configures a Submitter.
type Config struct {
	Store  Store
	Sealer *seal.Sealer
	// Stream is where the submissions come from. Nil runs on the rescan
	// alone, which is correct but slower to react.
	Stream *stream.Client
	Logger *slog.Logger
	// Workers is how many runnables are worked on at once; default 16.
	// The work is waiting on member clusters and the database, and each
	// cluster's client limit (clusters.QPS) is the real throttle, so more
	// workers than cores is right.
	Workers int
	// RescanInterval is the period of the level-based safety net that
	// lists Queued, Scheduled, Suspended and unsettled Cancelled runnables
	// and those with an update in place to apply; default
	// 5 seconds, jittered.
	RescanInterval time.Duration
	// Now is the clock for deadlines and attempt times; default time.Now.
	// Backoff and reachability use the real clock whatever it is.
	Now func() time.Time
	// Registerer receives the submitter's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Guard, when set, holds every runnable back while this process does
	// not reach the hub's majority: no create, no delete, no phase change
	// on what may be stale state.
	Guard *guard.Guard
	// Score orders the clusters a runnable fits: placement.LeastAllocated
	// (the default) or placement.BestFit.
	Score placement.Score
	// InFlightMargin is how long before an agent's report a placement
	// still counts as not in it (its pods may not exist yet): default 5s.
	InFlightMargin time.Duration
	// CapacityInterval is how often the agents' reports, and the
	// runnables changed since the last look, are read for a change that
	// may let waiting runnables in: default 1s (two small queries, not
	// one per runnable).
	CapacityInterval time.Duration
	// SumsResync is the period of the full recount of the sums placement
	// keeps in memory (sums.go), the safety net under the changes it
	// follows: default DefaultSumsResync.
	SumsResync time.Duration
	// ClientLimits are the rate limit of its client of each member
	// cluster; the zero value is purser's (clusters.QPS and Burst).
	ClientLimits clusters.Limits
	// Policy decides, right before each create, whether the runnable's
	// author may put its kind on the cluster (tenancy.go). Nil is a policy
	// with no admins and no rules: namespaced kinds only.
	Policy policy.KindPolicy
}

// Defaults and tunables.
const (
	DefaultWorkers        = 16
	DefaultRescanInterval = 5 * time.Second

	// maxClusterFailures is how many transient failures in a row one
	// attempt may meet on its cluster before it is ended and the runnable
	// placed again: enough to ride out a blip or a leader election, few
	// enough that work leaves a dead cluster within seconds.
	maxClusterFailures = 3
	// unreachableFor is how long a cluster that this submitter could not
	// reach counts as not Ready for placement. Nothing else marks a
	// cluster NotReady yet (the controller will), and without it work
	// would be placed on a dead cluster again and again.
	unreachableFor = 30 * time.Second

	// Backoff of a runnable whose reconcile failed transiently, and of the
	// pull of submissions: quick first retries, capped so that a recovered
	// cluster is used soon.
	retryBase = 500 * time.Millisecond
	retryMax  = 30 * time.Second

	// reconcileTimeout bounds one reconcile, so that a black-holed
	// cluster holds a worker for a bounded time.
	reconcileTimeout = 2 * time.Minute
	// maxSteps bounds the phase changes one reconcile follows (Queued ->
	// Scheduled -> Submitted, plus re-reads after a lost race).
	maxSteps = 8

	// progressInterval is how often held messages are reported in
	// progress; well under the consumer's AckWait (30 s).
	progressInterval = 10 * time.Second
	// maxHeld bounds the messages fetched but not yet settled, so that a
	// slow submitter leaves work in the stream for its competitors.
	maxHeld = 256
	// fetchWait is how long one pull waits for messages.
	fetchWait = 5 * time.Second
)

// Submitter places runnables and creates them on member clusters.
type Submitter struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	clients *clusters.Objects
	policy  policy.KindPolicy
	pods    *admission.Checker // judges the pods of every template, as the API does
	metrics *metrics
	queue   *reconcile.Queue[string] // runnable uids
	slots   chan struct{}            // one per held message

	// placing serialises placements (reconcile.go, step).
	placing sync.Mutex
	// capacity follows the agents' reports, to place the runnables that
	// wait for capacity when a cluster's figure changes (capacity.go).
	capacity *capacityWatch
	// figures keeps the decoded reports (capacity.go).
	figures figureCache
	// sums are what placement weighs, kept between placements (sums.go).
	sums keptSums

	mu          sync.Mutex
	held        map[string]*heldMessages // by runnable uid
	failures    map[attemptKey]int       // transient failures in a row per attempt
	unreachable map[string]time.Time     // cluster -> when it last failed to answer

	// placeOnly leaves Scheduled runnables alone: the scale benchmarks
	// measure admission over cluster records that have no API server to
	// create on (export_test.go sets it; nothing else does).
	placeOnly bool
}

type attemptKey struct {
	uid    string
	number int
}

// New returns a Submitter; nothing runs until Run, which may be called
// once.
func New(cfg Config) *Submitter {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RescanInterval <= 0 {
		cfg.RescanInterval = DefaultRescanInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Score == "" {
		cfg.Score = placement.LeastAllocated
	}
	if cfg.InFlightMargin <= 0 {
		cfg.InFlightMargin = DefaultInFlightMargin
	}
	if cfg.CapacityInterval <= 0 {
		cfg.CapacityInterval = DefaultCapacityInterval
	}
	if cfg.SumsResync <= 0 {
		cfg.SumsResync = DefaultSumsResync
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Submitter{
		cfg:         cfg,
		log:         log.With("component", "submitter"),
		now:         cfg.Now,
		clients:     clusters.NewObjects(clusters.NewLimitedCache(cfg.Sealer, cfg.ClientLimits)),
		policy:      policy.KindPolicyOrEmpty(cfg.Policy),
		pods:        admission.DefaultChecker(),
		metrics:     newMetrics(cfg.Registerer),
		slots:       make(chan struct{}, maxHeld),
		held:        map[string]*heldMessages{},
		failures:    map[attemptKey]int{},
		unreachable: map[string]time.Time{},
		capacity:    newCapacityWatch(),
	}
	s.clients.NamespaceLabels = func(ns string) map[string]string {
		return admission.NamespaceLabels(s.policy.PodSecurityLevel(ns))
	}
	var gate reconcile.Gate
	if cfg.Guard != nil {
		gate = cfg.Guard
	}
	s.queue = reconcile.New(s.reconcile, reconcile.Config[string]{
		Name:         "submitter",
		Workers:      cfg.Workers,
		Resync:       s.rescan,
		ResyncPeriod: cfg.RescanInterval,
		RetryBase:    retryBase,
		RetryMax:     retryMax,
		Timeout:      reconcileTimeout,
		Gate:         gate,
		Logger:       s.log,
		Done:         s.settle,
	})
	return s
}

// Run works until ctx is done, then stops every goroutine it started and
// returns. Messages it still holds go back to the stream for another
// replica.
func (s *Submitter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.queue.Run(ctx) })
	if s.cfg.Stream != nil {
		wg.Go(func() { s.consume(ctx) })
		wg.Go(func() { reconcile.Every(ctx, progressInterval, s.reportProgress) })
	}
	wg.Go(func() { reconcile.Every(ctx, s.cfg.CapacityInterval, s.followCapacity) })
	wg.Go(func() { reconcile.Every(ctx, s.cfg.SumsResync, s.resyncSums) })
	s.log.Info("submitter started", "workers", s.cfg.Workers, "rescan", s.cfg.RescanInterval)
	wg.Wait()
	s.releaseAll()
	s.log.Info("submitter stopped")
	return nil
}

// rescan lists every runnable that may need work: the queue's resync, the
// safety net under the messages.
func (s *Submitter) rescan(ctx context.Context) ([]string, error) {
	var uids []string
	for _, phase := range []v1alpha1.Phase{v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled, v1alpha1.PhaseSuspended} {
		cont := ""
		for {
			var page []*store.Runnable
			err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
				var err error
				page, cont, err = tx.Runnables().List(ctx, store.RunnableFilter{Phase: string(phase), Continue: cont, Limit: 1000})
				return err
			})
			if err != nil {
				return nil, err
			}
			for _, r := range page {
				uids = append(uids, r.UID)
			}
			if cont == "" {
				break
			}
		}
	}
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		cancelled, err := tx.Runnables().UIDsWithOpenAttempt(ctx, string(v1alpha1.PhaseCancelled), 1000)
		if err != nil {
			return err
		}
		uids = append(uids, cancelled...)
		// Updates in place still to apply (Suspended ones are listed
		// above already).
		updated, err := tx.Runnables().UIDsUpdatePending(ctx,
			[]string{string(v1alpha1.PhaseSubmitted), string(v1alpha1.PhaseRunning)}, 1000)
		uids = append(uids, updated...)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.metrics.backlog.Set(float64(len(uids)))
	return s.skipWaiting(uids), nil
}
