package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/control/controller"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/lease"
	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/member/clusters"
)

func newControllerCommand() *cobra.Command {
	var (
		database, keyFile string
		metricsListen     string
		policy            clusters.Policy
		fo                failover.Config
		probeInterval     time.Duration
		identity          string
		leaseDuration     time.Duration
		dc                string
		disruption        clusters.DisruptionPolicy
		store             checkpoints.Config
	)
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
  their cluster answers.

Replicas elect one leader through a lease in the database; only it does the
above, the others stand by and probe. A leader that cannot renew the lease stops within
two thirds of --lease-duration, and a standby takes over once the lease has
expired (at once when the leader shut down cleanly).

It talks to the database and the member clusters, never to the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hf := hubFlags{database: database, keyFile: keyFile, metricsListen: metricsListen}
			h, closeHub, err := hf.openStore(cmd.Context(), "controller")
			if err != nil {
				return err
			}
			defer closeHub()
			if store.Endpoint != "" {
				// Credentials come from the environment, never a flag that
				// ps would show.
				store.AccessKeyID, store.SecretAccessKey = os.Getenv("PURSER_CHECKPOINT_ACCESS_KEY"), os.Getenv("PURSER_CHECKPOINT_SECRET_KEY")
				r, err := checkpoints.New(store)
				if err != nil {
					return err
				}
				fo.Checkpoints = r
			}
			fmt.Fprintln(cmd.OutOrStdout(), "purser controller running")
			return controller.Run(cmd.Context(), controller.Config{
				Store: h.db, Sealer: h.sealer, Health: policy, ProbeInterval: probeInterval, Failover: fo,
				DC: dc, Disruption: disruption,
				Identity: identity, LeaseDuration: leaseDuration, Logger: h.log, Registerer: h.metrics, Guard: h.guard,
			})
		},
	}
	cmd.Flags().StringVar(&database, "database", "purser-data/purser.db", "SQLite file path, or a postgres:// DSN")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", metricsHelp)
	cmd.Flags().StringVar(&keyFile, "key-file", "purser-data/secret.key", "AES-256 key (base64) that opens kubeconfigs")
	cmd.Flags().DurationVar(&probeInterval, "probe-interval", clusters.DefaultProbeInterval, "how often each cluster is probed")
	cmd.Flags().IntVar(&policy.FailureThreshold, "failure-threshold", clusters.DefaultFailureThreshold, "failed probes in a row before a cluster is not Ready")
	cmd.Flags().IntVar(&policy.SuccessThreshold, "success-threshold", clusters.DefaultSuccessThreshold, "good probes in a row before a cluster is Ready again")
	cmd.Flags().DurationVar(&policy.NoExecuteGrace, "noexecute-grace", clusters.DefaultNoExecuteGrace, "how long a cluster stays not Ready before it is tainted NoExecute and its work moves")
	cmd.Flags().DurationVar(&fo.AgentLease, "agent-lease", failover.DefaultAgentLease, "the agents' --lease-duration: how long a cut-off agent keeps its work running")
	cmd.Flags().DurationVar(&fo.FencingMargin, "fencing-margin", failover.DefaultFencingMargin, "waited beyond --agent-lease before AtMostOne work leaves a lost cluster")
	cmd.Flags().Float64Var(&fo.EvictionRate, "eviction-rate", failover.DefaultEvictionRate, "most evictions per second across the farm")
	cmd.Flags().DurationVar(&fo.Interval, "interval", failover.DefaultInterval, "period of the failover passes")
	cmd.Flags().StringVar(&dc, "dc", "", "the data center this replica runs in: its probes of the clusters count as that DC's view, and a cluster is not Ready only when a quorum of DCs cannot reach it")
	cmd.Flags().Float64Var(&fo.SecondaryEvictionRate, "secondary-eviction-rate", failover.DefaultSecondaryEvictionRate, "most evictions per second from a DC whose clusters are all, or at least --unhealthy-zone-threshold of them, not Ready")
	cmd.Flags().StringVar(&disruption.ZoneLabel, "zone-label", clusters.DefaultZoneLabel, "the cluster label that names its DC (zone)")
	cmd.Flags().Float64Var(&disruption.UnhealthyZoneThreshold, "unhealthy-zone-threshold", clusters.DefaultUnhealthyZoneThreshold, "share of a DC's clusters not Ready from which its evictions are slowed")
	cmd.Flags().Float64Var(&disruption.UnhealthyFarmThreshold, "unhealthy-farm-threshold", clusters.DefaultUnhealthyFarmThreshold, "share of all clusters not Ready from which evictions stop everywhere")
	cmd.Flags().StringVar(&identity, "identity", "", "name of this replica in the leader lease (default: host name and pid)")
	cmd.Flags().StringVar(&store.Endpoint, "checkpoint-store-endpoint", "", "host:port of the S3-compatible storage of Flink checkpoints, where a failover finds a job's newest completed checkpoint (credentials: PURSER_CHECKPOINT_ACCESS_KEY, PURSER_CHECKPOINT_SECRET_KEY)")
	cmd.Flags().BoolVar(&store.Insecure, "checkpoint-store-insecure", false, "reach the checkpoint storage over plain HTTP")
	cmd.Flags().StringVar(&store.Region, "checkpoint-store-region", "", "region of the checkpoint storage")
	cmd.Flags().DurationVar(&leaseDuration, "lease-duration", lease.DefaultDuration, "how long after the leader's last renewal of its lease a standby takes over")
	return cmd
}
