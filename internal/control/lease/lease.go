// Package lease elects the one replica that works on something, with
// client-go's leader election (k8s.io/client-go/tools/leaderelection)
// over locks purser provides where the lock is not a Kubernetes Lease: a
// row of the hub database (StoreLock: `purser controller` runs its cluster
// health monitor and failover controller under it) and a key of the
// stream's leases bucket (KVLock: the syncer's replicas share the
// clusters, one lease each). The agents of a member cluster elect theirs
// with the same library over a Lease in that cluster.
//
// Client-go decides when to take a lease over by its own clock: only once
// it has seen the lock's record unchanged for the lease's duration, so
// that the clocks of the machines never matter. Run adds what purser's
// guarantees need on top of it:
//
//   - the term is bounded by the holder's monotonic clock: work runs only
//     until two thirds of the duration after the last write that took or
//     renewed the lease was sent, and its context is cancelled then,
//     renewed or not. A contender waits a whole duration from a moment
//     after that write, so the last third is the margin that covers the
//     work's return from a cancelled context and any difference in the
//     rates of the clocks. Client-go's own end of a term (its renew
//     deadline) comes later, and releases nothing before the work has
//     stopped, as it would with ReleaseOnCancel.
//   - the lease is released only once the work has returned (ctx ended,
//     or the work returned by itself), so that a standby takes over at
//     once without overlapping. A term that was lost is not released: its
//     holder cannot vouch that nothing still acts, and the lease expires.
//   - a replica campaigning never takes a live lease naming its own
//     identity: that may be an earlier life of it, still working. The
//     locks report such a lease as another's until this replica has
//     itself won it (client-go would renew it at once).
//
// Work that ignores its context for longer than the margin breaks the
// guarantee, and so does a clock that steps forward by more than it.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/replica"
)

// DefaultDuration is how long a lease lasts without renewal.
const DefaultDuration = 15 * time.Second

// Lock is a resourcelock.Interface that can also give its lease up.
type Lock interface {
	resourcelock.Interface
	// Release ends this replica's lease at once, if it still holds it, so
	// that another replica may take it without waiting for it to expire.
	Release(ctx context.Context) error
}

// Store is the database as a StoreLock uses it: its transactions.
type Store = store.Transactor

// Config is one election.
type Config struct {
	// Lock holds the election's record; nil: a StoreLock on Store's row
	// Name for Identity.
	Lock  Lock
	Store Store
	// Name names the lease, one per component ("controller").
	Name string
	// Identity names this replica in the StoreLock built from Store
	// (default: host name and pid); a Lock has its own. It must differ
	// between replicas running at the same time.
	Identity string
	// Duration is how long the lease lasts without renewal
	// (DefaultDuration): a crashed leader's work resumes elsewhere this
	// long after its last renewal. The holder renews every fifth of it,
	// and stops working two thirds of it after its last renewal.
	Duration time.Duration
	Logger   *slog.Logger
	// Registerer receives the gauge purser_leader{name}, 1 while this
	// replica works; nil registers none.
	Registerer prometheus.Registerer
	// Renewed, when set, is told after each write that took or renewed
	// the lease until when this replica may work, unless it renews again.
	Renewed func(until time.Time)
}

// ErrLost is the cause of a term's context when the lease was lost.
var ErrLost = errors.New("lost the lease")

// Run campaigns for the lease and runs work while it holds it, with a
// context cancelled (cause ErrLost) once leadership can no longer be
// vouched for; once work has returned it campaigns again. When ctx ends it
// stops work, releases the lease so that another replica takes over at
// once, and returns nil. If work returns while still leading, Run releases
// the lease and returns work's error.
func Run(ctx context.Context, cfg Config, work func(ctx context.Context) error) error {
	if cfg.Lock == nil && (cfg.Store == nil || cfg.Name == "") {
		return errors.New("lease: Config needs a Lock, or a Store and a Name")
	}
	if cfg.Identity == "" {
		cfg.Identity = replica.Identity()
	}
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Duration < 10*time.Millisecond {
		return fmt.Errorf("lease %s: duration %v is too short to renew", cfg.Name, cfg.Duration)
	}
	lock := cfg.Lock
	if lock == nil {
		lock = NewStoreLock(cfg.Store, cfg.Name, cfg.Identity, cfg.Duration)
	}
	if cfg.Name == "" {
		cfg.Name = lock.Describe()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &election{cfg: cfg, lock: &timedLock{Lock: lock, timeout: cfg.Duration / 3},
		log: log.With("lease", cfg.Name, "identity", lock.Identity())}
	gauge, err := leaderGauge(cfg.Registerer)
	if err != nil {
		return fmt.Errorf("lease %s: %w", cfg.Name, err)
	}
	if gauge != nil {
		e.leading = gauge.WithLabelValues(cfg.Name)
		e.leading.Set(0)
	}
	for {
		ended, err := e.term(ctx, work)
		if ended {
			return err
		}
	}
}

type election struct {
	cfg     Config
	lock    *timedLock
	log     *slog.Logger
	leading prometheus.Gauge // nil without a Registerer
}

// Timing, as fractions of the duration: client-go tries every fifth (a
// standby to take the lease, the holder to renew it), the term ends two
// thirds after the last renewal was sent, and client-go's own renew
// deadline, which ends the term too, lies beyond that.
func (e *election) retryPeriod() time.Duration   { return e.cfg.Duration / 5 }
func (e *election) renewDeadline() time.Duration { return e.cfg.Duration / 2 }
func (e *election) termLength() time.Duration    { return e.cfg.Duration - e.cfg.Duration/3 }

// term campaigns until it leads, then runs work until the term ends. ended
// says that Run is over (ctx ended, or work returned by itself), with
// work's error in the latter case.
func (e *election) term(ctx context.Context, work func(context.Context) error) (ended bool, err error) {
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		Name:          e.cfg.Name,
		LeaseDuration: e.cfg.Duration,
		RenewDeadline: e.renewDeadline(),
		RetryPeriod:   e.retryPeriod(),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leading <- ctx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return true, fmt.Errorf("lease %s: %w", e.cfg.Name, err)
	}
	// Client-go logs through the logger it finds in the context; its
	// lines a level lower, as this election says what matters itself.
	electCtx, stopElection := context.WithCancel(logr.NewContext(ctx, logr.FromSlogHandler(quieter{e.log.Handler()})))
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electCtx)
	}()
	var clientTerm context.Context
	select {
	case clientTerm = <-leading:
	case <-elected:
		if ctx.Err() != nil { // ctx ended before this replica led, or as it did
			stopElection()
			_ = e.release(ctx)
			return true, nil
		}
		clientTerm = <-leading // it led, and client-go ended the term at once
	}
	e.log.Info("took the lease; leading")

	termCtx, endTerm := context.WithCancelCause(ctx)
	stopClientTerm := context.AfterFunc(clientTerm, func() {
		endTerm(fmt.Errorf("%w: not renewed within the renew deadline, or taken by another", ErrLost))
	})
	defer stopClientTerm()
	stopWatch := e.lock.watch(e.termLength(), func(until time.Time) {
		if e.cfg.Renewed != nil {
			e.cfg.Renewed(until)
		}
	}, func() { endTerm(fmt.Errorf("%w: not renewed in time", ErrLost)) })
	if e.leading != nil {
		e.leading.Set(1)
	}
	workDone := make(chan error, 1)
	go func() { workDone <- work(termCtx) }()
	var workErr error
	byItself := false
	select {
	case workErr = <-workDone:
		byItself = termCtx.Err() == nil
	case <-termCtx.Done():
		workErr = <-workDone
	}
	cause := context.Cause(termCtx)
	endTerm(nil)
	stopWatch()
	if e.leading != nil {
		e.leading.Set(0)
	}
	// Work has stopped; so must the renewals before the lease is let go.
	stopElection()
	<-elected

	if ctx.Err() == nil && !byItself {
		e.log.Warn("stopped leading; standing by", "cause", cause, "workError", workErr)
		return false, nil
	}
	relErr := e.release(ctx)
	if ctx.Err() != nil {
		e.logRelease(nil, relErr, "stopped; released the lease")
		return true, nil
	}
	e.logRelease(workErr, relErr, "work ended; released the lease")
	return true, workErr
}

// release gives up the lease this replica holds, once its work has
// stopped, with a bound of its own: ctx may have ended.
func (e *election) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Duration/3)
	defer cancel()
	return e.lock.Release(ctx)
}

// logRelease logs the end of Run's last term, louder when something
// failed.
func (e *election) logRelease(workErr, releaseErr error, msg string) {
	level, args := slog.LevelInfo, []any{}
	if workErr != nil {
		level, args = slog.LevelWarn, append(args, "workError", workErr)
	}
	if releaseErr != nil {
		level, args = slog.LevelWarn, append(args, "releaseError", releaseErr)
		msg += " (the release failed: the lease will expire)"
	}
	e.log.Log(context.Background(), level, msg, args...)
}

// timedLock is the election's lock with a bound on each call, and the
// clock of the term: it notes when each write that made this replica the
// holder was sent, which is where its term is counted from.
type timedLock struct {
	Lock
	timeout time.Duration

	mu      sync.Mutex
	sent    time.Time // the last successful holding write was sent
	renewed func(sent time.Time)
}

func (l *timedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.Lock.Get(ctx)
}

func (l *timedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.Lock.Create)
}

func (l *timedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.Lock.Update)
}

func (l *timedLock) write(ctx context.Context, ler resourcelock.LeaderElectionRecord,
	op func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	sent := time.Now()
	if err := op(ctx, ler); err != nil {
		return err
	}
	if ler.HolderIdentity != l.Identity() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = sent
	if l.renewed != nil {
		l.renewed(sent)
	}
	return nil
}

// watch bounds the term that starts now: expire is called once length has
// passed since the last holding write was sent, renewed with the new end
// after each one. The returned func stops the watch.
func (l *timedLock) watch(length time.Duration, renewed func(until time.Time), expire func()) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.sent.Add(length)
	// The deadline is enforced by a timer of its own, so that a renewal
	// hanging in the lock cannot stretch the term.
	timer := time.AfterFunc(time.Until(until), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !time.Now().Before(until) {
			expire()
		}
	})
	renewed(until)
	l.renewed = func(sent time.Time) {
		until = sent.Add(length)
		timer.Reset(time.Until(until))
		renewed(until)
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.renewed = nil
		timer.Stop()
	}
}

// leaderGauge registers purser_leader, or finds it registered by an
// earlier election in the same process.
func leaderGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	if reg == nil {
		return nil, nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "purser_leader",
		Help: "1 while this replica holds the named lease and does its work, else 0.",
	}, []string{"name"})
	if err := reg.Register(g); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(*prometheus.GaugeVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return g, nil
}

// quieter lowers the level of the lines below a warning by one step
// (Info to Debug), for a library's chatter.
type quieter struct{ slog.Handler }

func (q quieter) lower(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return l - 4
	}
	return l
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return q.Handler.Enabled(ctx, q.lower(l))
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	r.Level = q.lower(r.Level)
	return q.Handler.Handle(ctx, r)
}

func (q quieter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quieter{q.Handler.WithAttrs(attrs)}
}

func (q quieter) WithGroup(name string) slog.Handler { return quieter{q.Handler.WithGroup(name)} }
