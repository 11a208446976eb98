// Package compose is purser's composition root: the one place where each
// component is built from its dependencies. A process opens the hub once
// (OpenHub: the database, the stream, the sealer, the guard and the
// metrics registry) and builds on it the components it runs (API,
// Submitter, Syncer, Ingester, Controller, Agent). `purser up` builds
// all of them in one process, the split subcommands one each; both go
// through these builders, so that a feature wired here (group commit, the
// guard, a metric, a wait while the hub is unavailable) is wired in every
// deployment.
package compose

import (
	"context"
	"log/slog"
)

// Config is everything a process's components are built from: where the
// hub is, and each component's own settings. A process reads only the
// parts of the components it runs.
type Config struct {
	Hub        HubConfig
	API        APIConfig
	Submitter  SubmitterConfig
	Syncer     SyncerConfig
	Ingester   IngesterConfig
	Controller ControllerConfig
	Agent      AgentConfig
}

// Description says what a built component was given, read from the
// configuration of the parts it was built of: what a deployment can be
// compared by.
type Description struct {
	Component string
	// Guarded: it acts only while its process reaches the hub's majority.
	Guarded bool
	// Metrics: it registers its metrics in the hub's registry.
	Metrics bool
	// Policy: it checks every object's kind against the policy file,
	// reloaded as the file changes.
	Policy bool
	// Of the API: commits in groups, reads from a standby while the
	// primary is not reached, each user's request rate and burst, and
	// each user's caps under /k8s.
	GroupCommit         bool
	Standby             bool
	UserRate            float64
	UserBurst           int
	KubeWatchesPerUser  int
	KubeRequestsPerUser int
}

// Component is a built component: it works until its context is done.
type Component struct {
	desc Description
	run  func(ctx context.Context) error
}

// Run works until ctx is done and returns once everything it started has
// stopped.
func (c *Component) Run(ctx context.Context) error { return c.run(ctx) }

// Describe says what the component was built with.
func (c *Component) Describe() Description { return c.desc }

// componentLog is the logger of one component's lines.
func componentLog(h *Hub, name string) *slog.Logger { return h.Logger.With("component", name) }
