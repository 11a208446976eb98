package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/replica"
)

// hubFlags are how a split-out component reaches the hub: the database,
// the stream and the key that opens sealed values.
type hubFlags struct {
	database, nats, keyFile string
	natsSecurity            stream.Security
	// streamReplicas is how many NATS servers hold each stream and bucket
	// the component declares: 1 for one server, 3 for a NATS cluster.
	streamReplicas int
	// streamStore bounds what purser's streams keep on each NATS server.
	streamStore   byteSize
	metricsListen string
}

// byteSize is a flag holding a number of bytes, written as a Kubernetes
// quantity (4Gi, 512Mi, 1000000).
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a size such as 4Gi or 512Mi", s)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return fmt.Errorf("%q is not a positive whole number of bytes", s)
	}
	*b = byteSize(v)
	return nil
}

func (b *byteSize) Type() string { return "size" }

func (f *hubFlags) register(cmd *cobra.Command, needDB, needKey bool) {
	if needDB {
		cmd.Flags().StringVar(&f.database, "database", "purser-data/purser.db", "SQLite file path, or a postgres:// DSN")
	}
	cmd.Flags().StringVar(&f.nats, "nats", "nats://127.0.0.1:4222", "NATS server URL(s), comma separated; a URL may carry user:password@ or a token")
	cmd.Flags().StringVar(&f.natsSecurity.Credentials, "nats-creds", "", "NATS credentials file (user JWT and NKey seed) for a server in operator mode")
	cmd.Flags().StringVar(&f.natsSecurity.CAFile, "nats-ca", "", "PEM file of the CA certificates that verify the NATS servers (default: the system's roots when TLS is used)")
	cmd.Flags().StringVar(&f.natsSecurity.CertFile, "nats-cert", "", "PEM client certificate for NATS servers that verify their clients (with --nats-key)")
	cmd.Flags().StringVar(&f.natsSecurity.KeyFile, "nats-key", "", "PEM key of --nats-cert")
	cmd.Flags().StringVar(&f.metricsListen, "metrics-listen", "", metricsHelp)
	cmd.Flags().IntVar(&f.streamReplicas, "stream-replicas", 1, "replicas of the streams and buckets this component declares: 1 for one NATS server, 3 for a NATS cluster; the same on every component")
	f.streamStore = stream.DefaultStoreBytes
	cmd.Flags().Var(&f.streamStore, "stream-store", "how much of each NATS server's store purser's streams may fill (events half, snapshots a quarter, each then dropping its oldest); the same on every component")
	if needKey {
		cmd.Flags().StringVar(&f.keyFile, "key-file", "purser-data/secret.key", "AES-256 key (base64) that opens kubeconfigs and Secret values")
	}
}

// config is the hub of the component name, as the flags say.
func (f *hubFlags) config(name string) compose.HubConfig {
	return compose.HubConfig{Name: name, Database: f.database, NATS: f.nats, Security: f.natsSecurity, StreamReplicas: f.streamReplicas,
		StreamStoreBytes: int64(f.streamStore), KeyFile: f.keyFile, MetricsListen: f.metricsListen, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
}

// runnable is a built component.
type runnable interface {
	Run(ctx context.Context) error
}

// runComponent opens the hub, builds one component on it, prints what
// say says once it is built, and runs it until the command's context is
// done.
func runComponent[C runnable](cmd *cobra.Command, hub compose.HubConfig, build func(*compose.Hub) (C, error), say func(C) string) error {
	ctx := cmd.Context()
	h, err := compose.OpenHub(ctx, hub)
	if err != nil {
		return err
	}
	defer h.Close()
	c, err := build(h)
	if err != nil {
		return err
	}
	fmt.Fprint(cmd.OutOrStdout(), say(c))
	return c.Run(ctx)
}

// policyHelp describes --policy of the components that act on member
// clusters.
const policyHelp = "policy file, as the api's, reloaded when it changes: the kinds each namespace may put on member clusters are checked again before every create or apply"

type submitterFlags struct {
	hub       hubFlags
	submitter compose.SubmitterConfig
}

func (f *submitterFlags) register(cmd *cobra.Command) {
	f.hub.register(cmd, true, true)
	cmd.Flags().StringVar(&f.submitter.PolicyFile, "policy", "purser-data/policy.yaml", policyHelp)
	cmd.Flags().BoolVar(&f.submitter.BestFit, "best-fit", false,
		"among the clusters a runnable fits, prefer the one left with the least free (packing) rather than the most (spreading)")
	registerClientLimits(cmd, &f.submitter.ClientLimits)
}

// registerClientLimits adds the flags of the rate limit of a component's
// clients of each member cluster.
func registerClientLimits(cmd *cobra.Command, l *clusters.Limits) {
	cmd.Flags().Float32Var(&l.QPS, "cluster-qps", clusters.QPS,
		"requests per second to each member cluster's kube-apiserver (its client-go QPS); raise it with --cluster-burst when a cluster's failover must move more at once")
	cmd.Flags().IntVar(&l.Burst, "cluster-burst", clusters.Burst, "burst of requests above --cluster-qps to each member cluster")
}

func (f *submitterFlags) config() (compose.Config, error) {
	return compose.Config{Hub: f.hub.config("submitter"), Submitter: f.submitter}, nil
}

func newSubmitterCommand() *cobra.Command {
	var f submitterFlags
	cmd := &cobra.Command{
		Use:   "submitter",
		Short: "Place runnables on clusters from the submissions work queue, with retries",
		Long: `Consume the submissions work queue and create each accepted runnable on one
member cluster: placement, idempotent creation, retries of transient errors,
deadlines, cancellation. Several submitters share the queue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.Component, error) { return compose.Submitter(h, cfg.Submitter) },
				func(*compose.Component) string { return "purser submitter running\n" })
		},
	}
	f.register(cmd)
	return cmd
}

type syncerFlags struct {
	hub    hubFlags
	syncer compose.SyncerConfig
}

func (f *syncerFlags) register(cmd *cobra.Command) {
	f.hub.register(cmd, true, true)
	cmd.Flags().StringVar(&f.syncer.PolicyFile, "policy", "purser-data/policy.yaml", policyHelp)
	cmd.Flags().StringVar(&f.syncer.Identity, "identity", "", "name of this replica in its leases (default: host name and pid)")
}

func (f *syncerFlags) config() (compose.Config, error) {
	s := f.syncer
	if s.Identity == "" {
		s.Identity = replica.Identity()
	}
	return compose.Config{Hub: f.hub.config("syncer"), Syncer: s}, nil
}

func newSyncerCommand() *cobra.Command {
	var f syncerFlags
	cmd := &cobra.Command{
		Use:   "syncer",
		Short: "Keep deployables identical on every matching cluster and repair drift",
		Long: `Apply every deployable to every cluster its placement matches, watch what it
applied and restore it when someone changes or deletes it, remove what left
the source of truth, and report per-cluster sync state. Replicas share the
clusters through leases in the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.Component, error) { return compose.Syncer(h, cfg.Syncer) },
				func(*compose.Component) string {
					return fmt.Sprintf("purser syncer running as %s\n", cfg.Syncer.Identity)
				})
		},
	}
	f.register(cmd)
	return cmd
}

type ingesterFlags struct {
	hub      hubFlags
	ingester compose.IngesterConfig
}

func (f *ingesterFlags) register(cmd *cobra.Command) {
	f.hub.register(cmd, true, true) // the key keys the fingerprint of Secrets' data
	cmd.Flags().StringVar(&f.ingester.RulesFile, "rules", "", "YAML file of health rules (CEL) for kinds beyond the built-ins")
}

func (f *ingesterFlags) config() (compose.Config, error) {
	return compose.Config{Hub: f.hub.config("ingester"), Ingester: f.ingester}, nil
}

func newIngesterCommand() *cobra.Command {
	var f ingesterFlags
	cmd := &cobra.Command{
		Use:   "ingester",
		Short: "Keep the inventory from the agents' events and snapshots; remove zombies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.Component, error) { return compose.Ingester(h, cfg.Ingester) },
				func(*compose.Component) string { return "purser ingester running\n" })
		},
	}
	f.register(cmd)
	return cmd
}

type agentFlags struct {
	hub   hubFlags
	agent compose.AgentConfig
}

func (f *agentFlags) register(cmd *cobra.Command) {
	f.hub.register(cmd, false, false)
	elect := &f.agent.LeaderElection
	cmd.Flags().StringVar(&f.agent.Kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster (default: in-cluster config)")
	cmd.Flags().StringVar(&f.agent.Cluster, "cluster", "", "the cluster's name as registered in purser")
	cmd.Flags().DurationVar(&f.agent.LeaseDuration, "lease-duration", 30*time.Second, "how long after the last acknowledged heartbeat the agent fences its AtMostOne work")
	cmd.Flags().BoolVar(&elect.Enabled, "leader-elect", true, "elect one working agent among the replicas for this cluster, through a Lease in the cluster")
	cmd.Flags().StringVar(&elect.Namespace, "leader-elect-resource-namespace", agent.DefaultLeaderElectionNamespace, "namespace of the leader Lease (created if missing)")
	cmd.Flags().StringVar(&elect.Name, "leader-elect-resource-name", agent.DefaultLeaderElectionName, "name of the leader Lease")
	cmd.Flags().StringVar(&elect.Identity, "identity", "", "name of this replica in the Lease and its heartbeats (default: host name and pid)")
	cmd.Flags().DurationVar(&elect.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long after the leader's last renewal a standby takes over")
	cmd.Flags().DurationVar(&elect.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader fails to renew before it stops working")
	cmd.Flags().DurationVar(&elect.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "wait between attempts to acquire or renew the Lease")
}

func (f *agentFlags) config() (compose.Config, error) {
	if f.agent.Cluster == "" {
		return compose.Config{}, fmt.Errorf("--cluster is required: the cluster's name as registered in purser")
	}
	return compose.Config{Hub: f.hub.config("agent"), Agent: f.agent}, nil
}

func newAgentCommand() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Watch one member cluster: events, snapshots and heartbeats to the stream",
		Long: `Run beside (--kubeconfig) or inside (in-cluster config) one member cluster:
watch the tracked kinds and every object carrying purser's labels, publish
their changes and periodic snapshots to the stream, and heartbeat. Cut off
from the stream for longer than --lease-duration, it suspends (Jobs,
FlinkDeployments) or deletes the objects labelled
purser.io/consistency=AtMostOne, and resumes none of them afterwards. Several
agents of one cluster elect one leader through a Lease in the cluster
(--leader-elect); the others stand by. It never talks to the database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.Component, error) { return compose.Agent(h, cfg.Agent) },
				func(*compose.Component) string {
					return fmt.Sprintf("purser agent running for cluster %s\n", cfg.Agent.Cluster)
				})
		},
	}
	f.register(cmd)
	return cmd
}

func newComponentCommands() []*cobra.Command {
	return []*cobra.Command{newSubmitterCommand(), newSyncerCommand(), newIngesterCommand(), newAgentCommand(), newControllerCommand()}
}
