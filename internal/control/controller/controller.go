// Package controller is `purser controller`: cluster health (probes,
// conditions, taints) and failover (evictions, re-placement, removal of
// old copies), two loops that meet only in the database. Replicas elect
// the one that runs them through the lease "controller" in the database
// (internal/control/lease); the others stand by, except that every replica probes
// the clusters from its own DC and records its view, by which the leader
// judges them (clusters.Observer).
package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/lease"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
)

// Store is the database as the controller's parts (cluster health,
// failover, the lease) use it: its transactions.
type Store = store.Transactor

// Config is what the controller runs with. Zero values take the defaults
// of clusters.Policy and failover.Config.
type Config struct {
	Store  Store
	Sealer *seal.Sealer
	// Health is the hysteresis of cluster health; its AgentLease is taken
	// from Failover.AgentLease, so that both halves agree.
	Health        clusters.Policy
	ProbeInterval time.Duration
	// DC names the data center this replica runs in; its views of the
	// clusters are recorded under it. Replicas of one DC share a name.
	DC string
	// Disruption says when a zone or the whole farm is disrupted; its
	// ZoneLabel is also the failover's.
	Disruption clusters.DisruptionPolicy
	// Failover's Store, Objects, Logger and Registerer are filled in.
	Failover failover.Config
	// ClientLimits are those of the failover's clients of each member
	// cluster (removing old copies); the zero value is purser's.
	ClientLimits clusters.Limits
	// Identity names this replica in the leader lease (default: host name
	// and pid); LeaseDuration is the lease's (lease.DefaultDuration): a
	// crashed leader's loops resume on a standby this long after its last
	// renewal.
	Identity      string
	LeaseDuration time.Duration
	// Guard, when set, holds the failover back while this replica does
	// not reach the database's primary.
	Guard *guard.Guard
	// Loops run beside health and failover while this replica leads
	// (the scheduler).
	Loops      []func(context.Context) error
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// LeaseName is the lease the controller's replicas elect their leader by.
const LeaseName = "controller"

// Run campaigns for the lease and, while it leads, runs both loops; it
// returns when ctx ends, after the loops stopped and the lease was
// released.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fo := cfg.Failover
	if fo.AgentLease <= 0 {
		fo.AgentLease = failover.DefaultAgentLease
	}
	policy := cfg.Health
	policy.AgentLease = fo.AgentLease
	fo.Store, fo.Objects, fo.Logger, fo.Registerer = cfg.Store, clusters.NewObjects(clusters.NewLimitedCache(cfg.Sealer, cfg.ClientLimits)), log, cfg.Registerer
	fo.ZoneLabel, fo.Guard = cfg.Disruption.ZoneLabel, cfg.Guard
	ctl := failover.New(fo)
	observer := clusters.NewObserver(clusters.Config{
		Store: cfg.Store, Sealer: cfg.Sealer, DC: cfg.DC, Interval: cfg.ProbeInterval,
		Logger: log.With("component", "cluster-observer"),
	})
	observing := make(chan error, 1)
	octx, stopObserving := context.WithCancel(ctx)
	defer func() {
		stopObserving()
		if err := <-observing; err != nil {
			log.Error("cluster observer stopped", "error", err)
		}
	}()
	go func() { observing <- observer.Run(octx) }()

	election := lease.Config{
		Store: cfg.Store, Name: LeaseName, Identity: cfg.Identity, Duration: cfg.LeaseDuration,
		Logger: log.With("component", "leader-election"), Registerer: cfg.Registerer,
	}
	return lease.Run(ctx, election, func(ctx context.Context) error {
		// A monitor per term: its hysteresis starts again from the
		// conditions stored by whoever led before.
		monitor := clusters.NewHealthMonitor(clusters.Config{
			Store: cfg.Store, Sealer: cfg.Sealer, Policy: policy, Interval: cfg.ProbeInterval,
			DC: cfg.DC, Observer: observer, Disruption: cfg.Disruption, OnNoExecute: ctl.Kick,
			Logger: log.With("component", "cluster-health"),
		})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, run := range append([]func(context.Context) error{monitor.Run, ctl.Run}, cfg.Loops...) {
			wg.Go(func() {
				if err := run(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}
