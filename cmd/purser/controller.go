package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/lease"
	"github.com/purser-io/purser/internal/member/clusters"
)

// controllerFlags: the controller reaches the database only, never the
// stream.
type controllerFlags struct {
	database, keyFile, metricsListen string
	controller                       compose.ControllerConfig
}

func (f *controllerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	c := &f.controller
	fl.StringVar(&f.database, "database", "purser-data/purser.db", "SQLite file path, or a postgres:// DSN")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", metricsHelp)
	fl.StringVar(&f.keyFile, "key-file", "purser-data/secret.key", "AES-256 key (base64) that opens kubeconfigs")
	fl.StringVar(&c.PolicyFile, "policy", "", "policy file, reloaded when it changes: each schedule's tick is checked against it with its author's rights; without it this replica fires no schedule")
	fl.DurationVar(&c.ProbeInterval, "probe-interval", clusters.DefaultProbeInterval, "how often each cluster is probed")
	fl.IntVar(&c.Health.FailureThreshold, "failure-threshold", clusters.DefaultFailureThreshold, "failed probes in a row before a cluster is not Ready")
	fl.IntVar(&c.Health.SuccessThreshold, "success-threshold", clusters.DefaultSuccessThreshold, "good probes in a row before a cluster is Ready again")
	fl.DurationVar(&c.Health.NoExecuteGrace, "noexecute-grace", clusters.DefaultNoExecuteGrace, "how long a cluster stays not Ready before it is tainted NoExecute and its work moves")
	fl.DurationVar(&c.Failover.AgentLease, "agent-lease", failover.DefaultAgentLease, "the agents' --lease-duration: how long a cut-off agent keeps its work running")
	fl.DurationVar(&c.Failover.FencingMargin, "fencing-margin", failover.DefaultFencingMargin, "waited beyond --agent-lease before AtMostOne work leaves a lost cluster")
	fl.Float64Var(&c.Failover.EvictionRate, "eviction-rate", failover.DefaultEvictionRate, "most evictions per second across the farm")
	fl.DurationVar(&c.Failover.Interval, "interval", failover.DefaultInterval, "period of the failover passes")
	fl.StringVar(&c.DC, "dc", "", "the data center this replica runs in: its probes of the clusters count as that DC's view, and a cluster is not Ready only when a quorum of DCs cannot reach it")
	fl.Float64Var(&c.Failover.SecondaryEvictionRate, "secondary-eviction-rate", failover.DefaultSecondaryEvictionRate, "most evictions per second from a DC whose clusters are all, or at least --unhealthy-zone-threshold of them, not Ready")
	fl.StringVar(&c.Disruption.ZoneLabel, "zone-label", clusters.DefaultZoneLabel, "the cluster label that names its DC (zone)")
	fl.Float64Var(&c.Disruption.UnhealthyZoneThreshold, "unhealthy-zone-threshold", clusters.DefaultUnhealthyZoneThreshold, "share of a DC's clusters not Ready from which its evictions are slowed")
	fl.Float64Var(&c.Disruption.UnhealthyFarmThreshold, "unhealthy-farm-threshold", clusters.DefaultUnhealthyFarmThreshold, "share of all clusters not Ready from which evictions stop everywhere")
	fl.StringVar(&c.Identity, "identity", "", "name of this replica in the leader lease (default: host name and pid)")
	fl.StringVar(&c.CheckpointStore.Endpoint, "checkpoint-store-endpoint", "", "host:port of the S3-compatible storage of Flink checkpoints, where a failover finds a job's newest completed checkpoint (credentials: PURSER_CHECKPOINT_ACCESS_KEY, PURSER_CHECKPOINT_SECRET_KEY)")
	fl.BoolVar(&c.CheckpointStore.Insecure, "checkpoint-store-insecure", false, "reach the checkpoint storage over plain HTTP")
	fl.StringVar(&c.CheckpointStore.Region, "checkpoint-store-region", "", "region of the checkpoint storage")
	fl.DurationVar(&c.LeaseDuration, "lease-duration", lease.DefaultDuration, "how long after the leader's last renewal of its lease a standby takes over")
	registerClientLimits(cmd, &c.ClientLimits)
}

func (f *controllerFlags) config() (compose.Config, error) {
	hub := hubFlags{database: f.database, keyFile: f.keyFile, metricsListen: f.metricsListen}
	c := f.controller
	if c.CheckpointStore.Endpoint != "" {
		// Credentials come from the environment, never a flag that ps
		// would show.
		c.CheckpointStore.AccessKeyID, c.CheckpointStore.SecretAccessKey = os.Getenv("PURSER_CHECKPOINT_ACCESS_KEY"), os.Getenv("PURSER_CHECKPOINT_SECRET_KEY")
	}
	return compose.Config{Hub: hub.config("controller"), Controller: c}, nil
}

func newControllerCommand() *cobra.Command {
	var f controllerFlags
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Cluster health and taints, application health, failover with preserved state",
		Long: `Watch over the farm:

- probe every registered cluster's kube-apiserver (/readyz, else /healthz)
  from this replica's DC (--dc) and record what it saw; judge each cluster
  by the views of a quorum of DCs and by its agent's heartbeat; set the
  Ready condition with hysteresis, taint a cluster NoSchedule as soon as it
  is not Ready and NoExecute after --noexecute-grace;
- slow evictions from a DC whose clusters are (mostly) not Ready
  (--secondary-eviction-rate) and stop them while a large share of the farm
  is (--unhealthy-farm-threshold), saying so in each cluster's Disrupted
  condition;
- move runnables off clusters tainted NoExecute they do not tolerate, and
  runnables whose object stayed Unhealthy for their tolerationSeconds,
  carrying the state their statePreservation rules extract;
- for consistency AtMostOne, place work elsewhere only once the lost
  cluster's agent has certainly suspended it (--agent-lease plus
  --fencing-margin after its last heartbeat);
- remove the copies left behind, as each runnable's purge mode says, when
  their cluster answers;
- create the runnable of each schedule's tick, once (docs/schedules.md),
  with the rights of the schedule's author by the policy (--policy).

Replicas elect one leader through a lease in the database; only it does the
above, the others stand by and probe. A leader that cannot renew the lease stops within
two thirds of --lease-duration, and a standby takes over once the lease has
expired (at once when the leader shut down cleanly).

It talks to the database and the member clusters, never to the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.Component, error) { return compose.Controller(h, cfg.Controller) },
				func(*compose.Component) string { return "purser controller running\n" })
		},
	}
	f.register(cmd)
	return cmd
}
