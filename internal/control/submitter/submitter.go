// Package submitter takes accepted runnables to member clusters: the
// `purser submitter` component of the design. It consumes the submissions
// work queue (stream.SubmitterConsumer) and treats every message as a hint
// only: it re-reads the runnable from the database and moves it on from
// whatever phase it is in.
//
//   - Queued: past its deadline it becomes Expired; otherwise a cluster is
//     chosen (internal/control/placement) and the decision is committed (attempt,
//     phase Scheduled, audit entry) before anything is created, so that a
//     crash at any point leaves a record of where the object may be.
//   - Scheduled: the template is created on the attempt's cluster with
//     purser's labels; creating it again is a no-op, so a redelivered
//     message or a competing replica never runs the work twice.
//   - Cancelled: the object, if any, is deleted from its cluster.
//
// Failures are classified once (see classify): permanent ones end the
// runnable in Failed with the API server's words; transient ones are
// retried with backoff and, when a cluster keeps failing, the attempt ends
// and the runnable is placed elsewhere. A periodic rescan of the database
// finds whatever a lost or delayed message would have announced, so no
// runnable depends on a message arriving. Replicas compete on the same
// durable consumer; the optimistic updates of the store make their races
// safe.
package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/backoff"
)

// Config configures a Submitter.
type Config struct {
	Store  *store.Store
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
	// lists Queued, Scheduled and unsettled Cancelled runnables; default
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
	// Policy decides, right before each create, whether the runnable's
	// author may put its kind on the cluster (tenancy.go). Nil is a policy
	// with no admins and no rules: namespaced kinds only.
	Policy auth.KindPolicy
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

	// Backoff of a runnable whose reconcile failed transiently: quick
	// first retries, capped so that a recovered cluster is used soon.
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
	policy  auth.KindPolicy
	metrics *metrics

	queue   workqueue.TypedDelayingInterface[string]
	limiter workqueue.TypedRateLimiter[string]
	slots   chan struct{} // one per held message

	mu          sync.Mutex
	held        map[string]*heldMessages // by runnable uid
	retryAt     map[string]time.Time     // uids in backoff: the rescan leaves them alone
	failures    map[attemptKey]int       // transient failures in a row per attempt
	unreachable map[string]time.Time     // cluster -> when it last failed to answer
}

type attemptKey struct {
	uid    string
	number int
}

// heldMessages are the messages about one runnable: waiting for the next
// reconcile, or being reconciled now.
type heldMessages struct {
	waiting, inflight []jetstream.Msg
}

// New returns a Submitter; nothing runs until Run.
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Submitter{
		cfg:         cfg,
		log:         log.With("component", "submitter"),
		now:         cfg.Now,
		clients:     clusters.NewObjects(clusters.NewCache(cfg.Sealer)),
		policy:      auth.KindPolicyOrEmpty(cfg.Policy),
		metrics:     newMetrics(cfg.Registerer),
		limiter:     workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
		slots:       make(chan struct{}, maxHeld),
		held:        map[string]*heldMessages{},
		retryAt:     map[string]time.Time{},
		failures:    map[attemptKey]int{},
		unreachable: map[string]time.Time{},
	}
}

// Run works until ctx is done, then stops every goroutine it started and
// returns. Messages it still holds go back to the stream for another
// replica.
func (s *Submitter) Run(ctx context.Context) error {
	s.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{})
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { s.rescanLoop(ctx) })
	if s.cfg.Stream != nil {
		wg.Go(func() { s.consume(ctx) })
		wg.Go(func() { s.progressLoop(ctx) })
	}
	s.log.Info("submitter started", "workers", s.cfg.Workers, "rescan", s.cfg.RescanInterval)
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	s.releaseAll()
	s.log.Info("submitter stopped")
	return nil
}

// processNext reconciles one runnable and settles its messages; it reports
// false once the queue is shut down.
func (s *Submitter) processNext(ctx context.Context) bool {
	uid, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(uid)
	msgs := s.takeWaiting(uid)
	err := s.cfg.Guard.Err()
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		err = s.reconcile(rctx, uid)
		cancel()
	}
	if err == nil {
		s.limiter.Forget(uid)
		s.mu.Lock()
		delete(s.retryAt, uid)
		s.mu.Unlock()
		s.settle(uid, msgs, func(m jetstream.Msg) error { return m.Ack() })
		return true
	}
	if ctx.Err() != nil {
		// Shutting down: the message goes back to the stream at once, for
		// another replica, rather than after AckWait.
		s.settle(uid, msgs, func(m jetstream.Msg) error { return m.Nak() })
		return true
	}
	delay := s.limiter.When(uid)
	var f *failure
	if errors.As(err, &f) && f.retryAfter > delay {
		delay = f.retryAfter
	}
	// Jitter, so that runnables that failed together do not retry in
	// step against a recovering cluster.
	delay = backoff.Jitter(delay)
	s.log.Warn("reconcile failed; retrying", "runnable", uid, "in", delay.Round(time.Millisecond), "error", err)
	s.mu.Lock()
	s.retryAt[uid] = time.Now().Add(delay)
	s.mu.Unlock()
	if len(msgs) > 0 {
		s.settle(uid, msgs, func(m jetstream.Msg) error { return m.NakWithDelay(delay) })
	} else {
		s.queue.AddAfter(uid, delay)
	}
	return true
}

// consume pulls submissions and queues their runnables. Each message is
// held (and reported in progress) until its runnable's reconcile ends.
func (s *Submitter) consume(ctx context.Context) {
	var cons jetstream.Consumer
	for attempt := 0; ctx.Err() == nil; {
		if cons == nil {
			var err error
			cons, err = s.cfg.Stream.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
			if err != nil {
				s.log.Warn("submissions consumer not available; retrying", "error", err)
				backoff.Sleep(ctx, backoff.Exponential(attempt, retryBase, retryMax))
				attempt++
				continue
			}
		}
		n := s.acquireSlots(ctx)
		if n == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for m := range batch.Messages() {
				got++
				s.hold(m)
			}
			err = batch.Error()
		}
		cancel()
		s.releaseSlots(n - got)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			s.log.Warn("fetching submissions failed; retrying", "error", err)
			cons = nil // the stream may have restarted; bind again
			backoff.Sleep(ctx, backoff.Exponential(attempt, retryBase, retryMax))
			attempt++
			continue
		}
		attempt = 0
	}
}

// acquireSlots waits for at least one free slot and takes up to a batch
// of them; 0 means ctx is done.
func (s *Submitter) acquireSlots(ctx context.Context) int {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < 64 {
		select {
		case s.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (s *Submitter) releaseSlots(n int) {
	for range n {
		<-s.slots
	}
}

// hold decodes a message and queues its runnable; the message waits for
// the reconcile. A message that can never be read is terminated: it can
// name no runnable, and the rescan covers whatever it was about.
func (s *Submitter) hold(m jetstream.Msg) {
	var sub stream.Submission
	if err := json.Unmarshal(m.Data(), &sub); err != nil || sub.UID == "" {
		s.log.Error("malformed submission dropped", "data", string(m.Data()), "error", err)
		_ = m.Term()
		s.releaseSlots(1)
		return
	}
	s.metrics.messages.WithLabelValues(sub.Event).Inc()
	s.mu.Lock()
	h := s.held[sub.UID]
	if h == nil {
		h = &heldMessages{}
		s.held[sub.UID] = h
	}
	h.waiting = append(h.waiting, m)
	s.mu.Unlock()
	s.queue.Add(sub.UID)
}

// takeWaiting moves uid's waiting messages to in flight: the reconcile
// about to start covers them, while messages arriving during it wait for
// the next one.
func (s *Submitter) takeWaiting(uid string) []jetstream.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[uid]
	if h == nil {
		return nil
	}
	msgs := h.waiting
	h.waiting = nil
	h.inflight = append(h.inflight, msgs...)
	return msgs
}

// settle acks or naks msgs and forgets them.
func (s *Submitter) settle(uid string, msgs []jetstream.Msg, how func(jetstream.Msg) error) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		if err := how(m); err != nil {
			// The stream redelivers an unsettled message after AckWait,
			// and the reconcile is idempotent, so this costs only time.
			s.log.Warn("settling a submission failed", "runnable", uid, "error", err)
		}
	}
	s.mu.Lock()
	if h := s.held[uid]; h != nil {
		h.inflight = h.inflight[len(msgs):]
		if len(h.waiting) == 0 && len(h.inflight) == 0 {
			delete(s.held, uid)
		}
	}
	s.mu.Unlock()
	s.releaseSlots(len(msgs))
}

// releaseAll gives every held message back to the stream at shutdown.
func (s *Submitter) releaseAll() {
	s.mu.Lock()
	var msgs []jetstream.Msg
	for uid, h := range s.held {
		msgs = append(msgs, h.waiting...)
		msgs = append(msgs, h.inflight...)
		delete(s.held, uid)
	}
	s.mu.Unlock()
	for _, m := range msgs {
		_ = m.Nak()
	}
	s.releaseSlots(len(msgs))
}

// progressLoop keeps held messages from being redelivered to another
// replica while they wait in the queue or in a long reconcile.
func (s *Submitter) progressLoop(ctx context.Context) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var msgs []jetstream.Msg
		for _, h := range s.held {
			msgs = append(msgs, h.waiting...)
			msgs = append(msgs, h.inflight...)
		}
		s.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// rescanLoop queues every runnable that may need work, at start and then
// every jittered RescanInterval: the safety net under the messages.
func (s *Submitter) rescanLoop(ctx context.Context) {
	for {
		if err := s.rescan(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("rescan failed", "error", err)
		}
		d := s.cfg.RescanInterval
		if !backoff.Sleep(ctx, backoff.Jitter(d)) {
			return
		}
	}
}

func (s *Submitter) rescan(ctx context.Context) error {
	var uids []string
	for _, phase := range []v1alpha1.Phase{v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled} {
		cont := ""
		for {
			var page []*store.Runnable
			err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
				var err error
				page, cont, err = tx.ListRunnables(ctx, store.RunnableFilter{Phase: string(phase), Continue: cont, Limit: 1000})
				return err
			})
			if err != nil {
				return err
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
		cancelled, err := tx.ListRunnableUIDsWithOpenAttempt(ctx, string(v1alpha1.PhaseCancelled), 1000)
		uids = append(uids, cancelled...)
		return err
	})
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, uid := range uids {
		if at, ok := s.retryAt[uid]; ok && now.Before(at) {
			continue
		}
		s.queue.Add(uid)
	}
	s.metrics.backlog.Set(float64(len(uids)))
	return nil
}
