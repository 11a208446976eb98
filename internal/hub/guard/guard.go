// Package guard tells a component whether it reaches the hub's majority:
// the database's primary (a commit of its own succeeds) and the stream's
// quorum (the JetStream meta leader answers). A component that does not
// acts on nothing: in a partitioned data center, or one that lost the
// primary, it might otherwise act on state that the majority has moved
// past.
//
// The stream check asks for the JetStream account information, which in
// a clustered NATS only the meta leader answers, and which a server
// without a meta leader refuses (nats-server's jsAccountInfoRequest in
// server/jetstream_api.go): an answer means the caller reaches a side of
// the NATS cluster that has a quorum.
package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Defaults of Config.
const (
	DefaultInterval = time.Second
	DefaultTimeout  = 3 * time.Second
	// DefaultMaxAge is how long after its last good check the hub still
	// counts as reached: a few failed checks in a row, not one slow one.
	DefaultMaxAge = 5 * time.Second
)

// Database is what the guard checks of the database.
type Database interface {
	CheckWrites(ctx context.Context, name string) error
}

// Stream is what the guard checks of the stream.
type Stream interface {
	Ready(ctx context.Context) error
}

// Config says what a Guard checks.
type Config struct {
	// Name identifies the process in the database's write checks.
	Name     string
	Database Database // nil: not checked
	Stream   Stream   // nil: not checked (the controller never uses it)
	// Interval between checks, Timeout of each, MaxAge of the last good
	// one.
	Interval, Timeout, MaxAge time.Duration
	Logger                    *slog.Logger
	Registerer                prometheus.Registerer
}

// Errors of Err: ErrUnreached always, with ErrNoPrimary or ErrNoQuorum
// (or both) saying which part failed.
var (
	ErrUnreached = errors.New("this process does not reach the hub's majority")
	ErrNoPrimary = errors.New("no commit reached the database's primary")
	ErrNoQuorum  = errors.New("no answer from the stream's quorum")
)

// Guard checks the hub in the background and answers Err at once.
type Guard struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	onChange []func(error)
	lastOK   time.Time // both parts good
	lastErr  error     // of the latest failed check
	reached  bool      // as last reported to OnChange
	gauge    prometheus.Gauge
}

// New returns a guard; nothing is checked until Run. Until its first
// good check, Err says the hub is not reached.
func New(cfg Config) *Guard {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	g := &Guard{cfg: cfg, log: cfg.Logger, lastErr: errors.New("not checked yet")}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer != nil {
		g.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "purser_hub_reached",
			Help: "1 while this process reaches the database's primary and the stream's quorum."})
		if err := cfg.Registerer.Register(g.gauge); err != nil {
			g.gauge = nil
		}
	}
	return g
}

// Run checks every Interval (lengthened by up to a fifth, from the end of
// the last check) until ctx ends.
func (g *Guard) Run(ctx context.Context) { reconcile.Every(ctx, g.cfg.Interval, g.Check) }

// Check checks the hub once, now.
func (g *Guard) Check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	check := func(kind error, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(cctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%w: %w", kind, err))
				mu.Unlock()
			}
		})
	}
	if g.cfg.Database != nil {
		check(ErrNoPrimary, func(ctx context.Context) error { return g.cfg.Database.CheckWrites(ctx, g.cfg.Name) })
	}
	if g.cfg.Stream != nil {
		check(ErrNoQuorum, g.cfg.Stream.Ready)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // shutting down: the checks say nothing
	}
	g.mu.Lock()
	if len(errs) == 0 {
		g.lastOK = time.Now()
	} else {
		g.lastErr = errors.Join(errs...)
	}
	g.mu.Unlock()
	g.report()
}

// report tells OnChange, the log and the gauge when reaching the hub
// changed.
func (g *Guard) report() {
	err := g.Err()
	g.mu.Lock()
	changed := g.reached != (err == nil)
	g.reached = err == nil
	g.mu.Unlock()
	if !changed {
		return
	}
	if err == nil {
		g.log.Info("the hub's majority is reached again: acting")
		if g.gauge != nil {
			g.gauge.Set(1)
		}
	} else {
		g.log.Warn("the hub's majority is not reached: acting on nothing until it is", "error", err)
		if g.gauge != nil {
			g.gauge.Set(0)
		}
	}
	g.mu.Lock()
	fs := slices.Clone(g.onChange)
	g.mu.Unlock()
	for _, f := range fs {
		f(err)
	}
}

// OnChange adds f to be told each time the hub is found reached (err nil)
// or lost.
func (g *Guard) OnChange(f func(err error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onChange = append(g.onChange, f)
}

// Err is nil while the hub was reached within MaxAge; otherwise it wraps
// ErrUnreached with the latest failure.
func (g *Guard) Err() error {
	if g == nil {
		return nil // no guard: a process that checks nothing acts
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.lastOK.IsZero() && time.Since(g.lastOK) <= g.cfg.MaxAge {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnreached, g.lastErr)
}
