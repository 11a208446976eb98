// Package controller is `purser controller`: cluster health (probes,
// conditions, taints) and failover (evictions, re-placement, removal of
// old copies), two loops that meet only in the database.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/clusters"
	"github.com/purser-io/purser/internal/failover"
	"github.com/purser-io/purser/internal/seal"
	"github.com/purser-io/purser/internal/store"
)

// Config is what the controller runs with. Zero values take the defaults
// of clusters.Policy and failover.Config.
type Config struct {
	Store  *store.Store
	Sealer *seal.Sealer
	// Health is the hysteresis of cluster health; its AgentLease is taken
	// from Failover.AgentLease, so that both halves agree.
	Health        clusters.Policy
	ProbeInterval time.Duration
	// Failover's Store, Objects, Logger and Registerer are filled in.
	Failover   failover.Config
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Run runs both loops until ctx ends.
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
	monitor := clusters.NewHealthMonitor(clusters.MonitorConfig{
		Store: cfg.Store, Sealer: cfg.Sealer, Policy: policy, Interval: cfg.ProbeInterval,
		Logger: log.With("component", "cluster-health"),
	})
	fo.Store, fo.Objects, fo.Logger, fo.Registerer = cfg.Store, clusters.NewObjects(clusters.NewCache(cfg.Sealer)), log, cfg.Registerer
	ctl := failover.New(fo)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, run := range []func(context.Context) error{monitor.Run, ctl.Run} {
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
}
