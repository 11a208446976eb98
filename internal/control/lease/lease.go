// Package lease elects the one replica of a component that works, through
// a row of the hub database (store.Tx.TryLease), so that leader election
// needs no infrastructure beyond what every component already talks to.
// `purser controller` runs its cluster health monitor and failover
// controller under it.
//
// Safety rests on two clocks, neither of them a replica's wall clock:
//
//   - the database's clock decides expiry: a lease is renewed to "now + Duration"
//     and taken over only once "now" has passed that, both read by the
//     database in the statement that decides, so clock skew between
//     replicas does not matter. (On SQLite every replica shares the
//     machine, and so the clock, of the database file.)
//   - the holder's monotonic clock ends its term: it works only until
//     Duration minus a margin (a third of it) after it sent its last
//     successful renewal, and cancels its work then, renewed or not.
//
// The database stamps a renewal after the holder sent it, so a contender
// can take over no sooner than Duration after the send, by which time the
// holder has stopped for a third of Duration: the margin covers the work's
// return from a cancelled context and any difference in the rates (not
// the readings) of the two clocks. Work that ignores its context for
// longer than the margin breaks the guarantee, and so does a step of the
// database's clock forward by more than the margin.
//
// A replica campaigning never takes a live lease, even one naming its own
// identity: that may be an earlier life of it, still working. It renews
// only within a term it won.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/backoff"
	"github.com/purser-io/purser/internal/platform/replica"
)

// DefaultDuration is how long a lease lasts without renewal.
const DefaultDuration = 15 * time.Second

// Config is one election.
type Config struct {
	Store *store.Store
	// Name names the lease, one per component ("controller").
	Name string
	// Identity names this replica in the lease (default: host name and
	// pid). It must differ between replicas running at the same time.
	Identity string
	// Duration is how long the lease lasts without renewal
	// (DefaultDuration): a crashed leader's work resumes elsewhere this
	// long after its last renewal. The holder renews every third of it,
	// and stops working two thirds of it after its last renewal.
	Duration time.Duration
	Logger   *slog.Logger
	// Registerer receives the gauge purser_leader{name}, 1 while this
	// replica works; nil registers none.
	Registerer prometheus.Registerer
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
	if cfg.Store == nil || cfg.Name == "" {
		return errors.New("lease: Config needs a Store and a Name")
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &elector{cfg: cfg, log: log.With("lease", cfg.Name, "identity", cfg.Identity)}
	gauge, err := leaderGauge(cfg.Registerer)
	if err != nil {
		return fmt.Errorf("lease %s: %w", cfg.Name, err)
	}
	if gauge != nil {
		e.leading = gauge.WithLabelValues(cfg.Name)
		e.leading.Set(0)
	}
	for {
		acquired, ok := e.campaign(ctx)
		if !ok {
			return nil
		}
		ended, err := e.lead(ctx, acquired, work)
		if ended {
			return err
		}
	}
}

// Timing, as fractions of the duration: renewals every third, the margin
// a third (so one failed renewal is retried a few times before the term
// ends), and a standby tries every fifth, so a released lease is taken
// over well within one duration.
func (e *elector) renewEvery() time.Duration    { return e.cfg.Duration / 3 }
func (e *elector) retryRenewal() time.Duration  { return e.cfg.Duration / 10 }
func (e *elector) term() time.Duration          { return e.cfg.Duration - e.cfg.Duration/3 }
func (e *elector) campaignEvery() time.Duration { return e.cfg.Duration / 5 }

type elector struct {
	cfg     Config
	log     *slog.Logger
	leading prometheus.Gauge // nil without a Registerer
}

// try takes (renew false) or renews the lease in a statement of its own.
func (e *elector) try(ctx context.Context, renew bool) (l store.Lease, ok bool, err error) {
	err = e.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		l, ok, err = tx.TryLease(ctx, e.cfg.Name, e.cfg.Identity, e.cfg.Duration, renew)
		return err
	})
	return l, ok, err
}

// campaign tries to take the lease until it does, and returns the local
// time the winning request was sent; false when ctx ended first.
func (e *elector) campaign(ctx context.Context) (time.Time, bool) {
	var holder string
	failing := false
	for ctx.Err() == nil {
		sent := time.Now()
		tctx, cancel := context.WithTimeout(ctx, e.renewEvery())
		l, ok, err := e.try(tctx, false)
		cancel()
		switch {
		case ok:
			e.log.Info("took the lease; leading", "transitions", l.Transitions)
			return sent, true
		case err != nil && ctx.Err() == nil:
			if !failing {
				e.log.Warn("cannot campaign for the lease; trying again", "error", err)
			}
			failing = true
		case err == nil:
			if failing || l.Holder != holder {
				e.log.Info("standing by", "holder", l.Holder, "expires", l.ExpiresAt)
			}
			failing, holder = false, l.Holder
		}
		backoff.Sleep(ctx, backoff.Jitter(e.campaignEvery()))
	}
	return time.Time{}, false
}

// lead runs one term: work under a context that ends when the term does,
// and renewals beside it. It returns once work has returned; ended says
// that Run is over (ctx ended, or work returned by itself), with work's
// error in the latter case.
func (e *elector) lead(ctx context.Context, acquired time.Time, work func(context.Context) error) (ended bool, err error) {
	termCtx, endTerm := context.WithCancelCause(ctx)
	defer endTerm(nil)

	// The deadline is enforced by a timer of its own, so that a renewal
	// hanging in the driver cannot stretch the term.
	var mu sync.Mutex
	until := acquired.Add(e.term())
	deadline := time.AfterFunc(time.Until(until), func() {
		mu.Lock()
		defer mu.Unlock()
		if !time.Now().Before(until) {
			endTerm(fmt.Errorf("%w: not renewed in time", ErrLost))
		}
	})
	defer deadline.Stop()

	if e.leading != nil {
		e.leading.Set(1)
	}
	workDone := make(chan error, 1)
	go func() { workDone <- work(termCtx) }()

	wait := e.renewEvery()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var workErr error
	byItself, failing := false, false
renewing:
	for {
		select {
		case workErr = <-workDone:
			byItself = termCtx.Err() == nil
			endTerm(nil)
			break renewing
		case <-termCtx.Done():
			workErr = <-workDone
			break renewing
		case <-timer.C:
			if termCtx.Err() != nil {
				workErr = <-workDone
				break renewing
			}
		}
		mu.Lock()
		current := until
		mu.Unlock()
		sent := time.Now()
		rctx, cancel := context.WithDeadline(termCtx, current)
		l, ok, err := e.try(rctx, true)
		cancel()
		switch {
		case err != nil:
			if termCtx.Err() == nil && !failing {
				e.log.Warn("cannot renew the lease; trying again until the term ends", "error", err, "termEnds", current)
			}
			failing, wait = true, e.retryRenewal()
		case !ok:
			endTerm(fmt.Errorf("%w: taken by %s", ErrLost, l.Holder))
		default:
			mu.Lock()
			until = sent.Add(e.term())
			deadline.Reset(time.Until(until))
			mu.Unlock()
			failing, wait = false, e.renewEvery()
		}
		timer.Reset(wait)
	}
	if e.leading != nil {
		e.leading.Set(0)
	}

	// Work has stopped: the lease may go to another replica at once.
	// Releasing after a loss is harmless (it names this replica only if
	// nobody took it) and saves a standby waiting out the expiry when
	// only the renewals failed.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.renewEvery())
	relErr := e.cfg.Store.Tx(rctx, func(tx *store.Tx) error { return tx.ReleaseLease(rctx, e.cfg.Name, e.cfg.Identity) })
	cancel()
	switch {
	case ctx.Err() != nil:
		e.logRelease(nil, relErr, "stopped; released the lease")
		return true, nil
	case byItself:
		e.logRelease(workErr, relErr, "work ended; released the lease")
		return true, workErr
	}
	e.log.Warn("stopped leading; standing by", "cause", context.Cause(termCtx), "workError", workErr)
	return false, nil
}

// logRelease logs the end of Run's last term, louder when something
// failed.
func (e *elector) logRelease(workErr, releaseErr error, msg string) {
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
