// Package reconcile is the one shape of purser's control loops, as
// client-go's controllers have it: a queue of keys, workers that take one
// key at a time and decide what it needs from the state they read again
// (never from the event that queued it), a Result that says when to look
// again, rate-limited retries of transient failures, terminal errors that
// retrying would not cure, and a periodic resync that queues every key
// that may need work, the level-based safety net under the events.
//
// It is built on client-go's workqueue (a key is never worked on by two
// workers at once, and a key added while it is being worked on runs again
// once) and apimachinery's wait (jittered periods and backoffs). Every
// loop, retry and periodic task of purser goes through it, so that each
// component owns only its decision.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// Result says what a reconcile that did not fail wants next.
type Result struct {
	// RequeueAfter, when positive, runs the key again after this long:
	// a wait whose end is known (a deadline, a lease to run out), not a
	// failure, so the key's backoff starts again from its base.
	RequeueAfter time.Duration
}

// Func decides and does what one key needs.
type Func[K comparable] func(ctx context.Context, key K) (Result, error)

// Gate says whether a loop may act now: guard.Guard says whether this
// process reaches the hub's majority. While Err is not nil, keys wait
// (with their backoff) instead of being reconciled on what may be stale.
type Gate interface {
	Err() error
}

// Config configures a Queue. The zero value of each field is usable.
type Config[K comparable] struct {
	// Name names the loop in its log lines.
	Name string
	// Workers is how many keys are reconciled at once; default 1.
	Workers int
	// Resync, when set, lists every key that may need work: at start and
	// then every ResyncPeriod (default 30 s), jittered. Keys waiting for
	// a retry are left to their backoff.
	Resync       func(ctx context.Context) ([]K, error)
	ResyncPeriod time.Duration
	// RetryBase and RetryMax bound the per-key exponential backoff of
	// transient failures; defaults 500 ms and 30 s.
	RetryBase, RetryMax time.Duration
	// Timeout bounds one reconcile, so that a black-holed peer holds a
	// worker for a bounded time; 0 is no bound.
	Timeout time.Duration
	// Gate, when set, holds every key while it says no.
	Gate Gate
	// Logger receives a line per failed reconcile; nil discards.
	Logger *slog.Logger
	// Done, when set, is called after each reconcile of key with its
	// error (nil on success; the Gate's error when it held the key) and
	// the delay before the key runs again (0 when it does not unless
	// added). The submitter settles its stream messages here.
	Done func(key K, err error, again time.Duration)
}

// Defaults of Config.
const (
	DefaultResyncPeriod = 30 * time.Second
	DefaultRetryBase    = 500 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
)

// Queue runs a Func over keys.
type Queue[K comparable] struct {
	fn      Func[K]
	cfg     Config[K]
	log     *slog.Logger
	queue   workqueue.TypedRateLimitingInterface[K]
	limiter workqueue.TypedRateLimiter[K]

	mu      sync.Mutex
	retryAt map[K]time.Time // keys waiting for a retry: a resync leaves them alone
}

// New returns a Queue; nothing runs until Run, but keys may be added
// before it.
func New[K comparable](fn Func[K], cfg Config[K]) *Queue[K] {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Per key only: a bucket shared by every key (controller-runtime's
	// default adds one) would slow a farm's worth of keys that failed
	// together far beyond their own backoff.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[K](cfg.RetryBase, cfg.RetryMax)
	return &Queue[K]{
		fn:      fn,
		cfg:     cfg,
		log:     log,
		limiter: limiter,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[K]{
			Name: cfg.Name,
		}),
		retryAt: map[K]time.Time{},
	}
}

// Add queues keys to be reconciled as soon as a worker is free, even if
// they wait for a retry: something changed.
func (q *Queue[K]) Add(keys ...K) {
	for _, k := range keys {
		q.queue.Add(k)
	}
}

// AddAfter queues key after d.
func (q *Queue[K]) AddAfter(key K, d time.Duration) { q.queue.AddAfter(key, d) }

// Len is how many keys wait for a worker now (not those waiting for a
// later time).
func (q *Queue[K]) Len() int { return q.queue.Len() }

// Run works until ctx is done, then stops taking keys, waits for the
// reconciles under way and returns.
func (q *Queue[K]) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range q.cfg.Workers {
		wg.Go(func() {
			for q.next(ctx) {
			}
		})
	}
	if q.cfg.Resync != nil {
		wg.Go(func() { Every(ctx, q.cfg.ResyncPeriod, q.resync) })
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
	return nil
}

func (q *Queue[K]) resync(ctx context.Context) {
	keys, err := q.cfg.Resync(ctx)
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("resync failed", "loop", q.cfg.Name, "error", err)
		}
		return
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		if at, waiting := q.retryAt[k]; waiting && now.Before(at) {
			continue
		}
		q.queue.Add(k)
	}
}

// next reconciles one key; false once the queue is shut down.
func (q *Queue[K]) next(ctx context.Context) bool {
	key, shutdown := q.queue.Get()
	if shutdown {
		return false
	}
	defer q.queue.Done(key)
	res, err := q.run(ctx, key)
	again := q.settle(ctx, key, res, err)
	if q.cfg.Done != nil {
		q.cfg.Done(key, err, again)
	}
	return true
}

func (q *Queue[K]) run(ctx context.Context, key K) (res Result, err error) {
	if q.cfg.Gate != nil {
		if err := q.cfg.Gate.Err(); err != nil {
			return Result{}, err
		}
	}
	if q.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.cfg.Timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			err = Terminal(fmt.Errorf("reconcile panicked: %v", r))
		}
	}()
	return q.fn(ctx, key)
}

// settle requeues key as its outcome says and returns the delay before
// it runs again (0: not unless added).
func (q *Queue[K]) settle(ctx context.Context, key K, res Result, err error) time.Duration {
	switch {
	case err == nil || IsTerminal(err):
		if err != nil {
			q.log.Error("reconcile failed for good", "loop", q.cfg.Name, "key", key, "error", err)
		}
		q.queue.Forget(key)
		q.mu.Lock()
		delete(q.retryAt, key)
		q.mu.Unlock()
		if res.RequeueAfter > 0 && err == nil {
			q.queue.AddAfter(key, res.RequeueAfter)
		}
		return res.RequeueAfter
	case ctx.Err() != nil:
		return 0 // shutting down: the key is not lost, a resync finds it
	}
	delay := q.limiter.When(key)
	if d, ok := retryAfterOf(err); ok && d > delay {
		delay = d
	}
	// Keys that failed together must not retry in step against a
	// recovering peer.
	delay = wait.Jitter(delay, jitterFactor)
	if q.cfg.Gate == nil || !errors.Is(err, q.cfg.Gate.Err()) {
		q.log.Warn("reconcile failed; retrying", "loop", q.cfg.Name, "key", key, "in", delay.Round(time.Millisecond), "error", err)
	}
	q.mu.Lock()
	q.retryAt[key] = time.Now().Add(delay)
	q.mu.Unlock()
	q.queue.AddAfter(key, delay)
	return delay
}

// Failures is how many times in a row key has failed.
func (q *Queue[K]) Failures(key K) int { return q.limiter.NumRequeues(key) }

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as one that retrying will not cure: the key is
// dropped (and said) rather than retried, and Retry stops.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or an error it wraps, was marked
// Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks a transient err with the least wait before the retry
// (a peer's Retry-After, the rest of a lease): the key is retried after
// the longer of d and its backoff.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

func retryAfterOf(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
