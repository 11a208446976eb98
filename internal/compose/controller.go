package compose

import (
	"context"
	"time"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/controller"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/member/clusters"
)

// ControllerConfig is the controller's: cluster health, the disruption
// of a DC or the farm, failover, and its leader lease. Zero values take
// the defaults of clusters.Policy, clusters.DisruptionPolicy and
// failover.Config.
type ControllerConfig struct {
	Health        clusters.Policy
	ProbeInterval time.Duration
	// DC names the data center this replica runs in.
	DC         string
	Disruption clusters.DisruptionPolicy
	// Failover's Checkpoints is filled in from CheckpointStore.
	Failover failover.Config
	// CheckpointStore, when its Endpoint is set, is the S3-compatible
	// storage where a failover finds a Flink job's newest completed
	// checkpoint.
	CheckpointStore checkpoints.Config
	// Identity names this replica in the leader lease (default: host name
	// and pid); LeaseDuration is the lease's.
	Identity      string
	LeaseDuration time.Duration
	// ClientLimits are those of its clients of each member cluster.
	ClientLimits clusters.Limits
	// PolicyFile is the API's policy, reloaded as it changes: the
	// scheduler checks each tick's runnable against it, with the rights
	// of the schedule's author.
	PolicyFile string
	// ScheduleWritten, when set, is signalled by the API of this process
	// whenever it writes a schedule (APIConfig.ScheduleWritten).
	ScheduleWritten <-chan struct{}
}

// Controller builds the controller on h, which needs the database and
// the key, never the stream.
func Controller(h *Hub, cfg ControllerConfig) (*Component, error) {
	if err := needs(h, "controller", true, false, true); err != nil {
		return nil, err
	}
	fo := cfg.Failover
	if cfg.CheckpointStore.Endpoint != "" {
		r, err := checkpoints.New(cfg.CheckpointStore)
		if err != nil {
			return nil, err
		}
		fo.Checkpoints = r
	}
	log := componentLog(h, "controller")
	// The scheduler and the trigger loop run where the policy is given: a
	// tick's or an event's runnable is judged by it, and without it none
	// would pass.
	var pol *auth.Identities
	// The drill follower records how a real drill's planned moves end
	// (docs/drills.md); it needs no policy: the API checked the admin.
	loops := []func(context.Context) error{controldrill.NewFollower(controldrill.FollowerConfig{Store: h.Store,
		Logger: log.With("component", "drills")}).Run}
	if cfg.PolicyFile != "" {
		var err error
		if pol, err = loadPolicy(cfg.PolicyFile, log); err != nil {
			return nil, err
		}
		sched := scheduler.New(scheduler.Config{Store: h.Store, Policy: pol.Policy, Notify: cfg.Failover.Notify,
			Wake: cfg.ScheduleWritten, Logger: log.With("component", "scheduler")})
		trig := triggers.NewLoop(triggers.Config{Store: h.Store, Policy: pol.Policy, Notify: cfg.Failover.Notify,
			Logger: log.With("component", "triggers")})
		loops = append(loops, sched.Run, trig.Run)
	}
	ccfg := controller.Config{
		Store: h.Store, Sealer: h.Sealer, Health: cfg.Health, ProbeInterval: cfg.ProbeInterval, Failover: fo,
		DC: cfg.DC, Disruption: cfg.Disruption, Identity: cfg.Identity, LeaseDuration: cfg.LeaseDuration, ClientLimits: cfg.ClientLimits,
		Logger: log, Registerer: h.Metrics, Guard: h.Guard, Loops: loops,
	}
	return &Component{
		desc: Description{Component: "controller", Guarded: ccfg.Guard != nil, Metrics: ccfg.Registerer != nil, Policy: pol != nil},
		run: func(ctx context.Context) error {
			if pol == nil {
				return controller.Run(ctx, ccfg)
			}
			return followingPolicy(ctx, pol, func(ctx context.Context) error { return controller.Run(ctx, ccfg) })
		},
	}, nil
}
