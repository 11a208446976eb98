package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/syncer"
	hubguard "github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/platform/backoff"
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
	metricsListen  string
}

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
	if needKey {
		cmd.Flags().StringVar(&f.keyFile, "key-file", "purser-data/secret.key", "AES-256 key (base64) that opens kubeconfigs and Secret values")
	}
}

// hub is what the flags opened; close releases it.
type hub struct {
	db      *store.Store
	streams *stream.Client
	sealer  *seal.Sealer
	log     *slog.Logger
	metrics *prometheus.Registry // served on --metrics-listen
	// guard says whether this process reaches the database's primary and
	// (if it uses one) the stream's quorum; the components act only while
	// it does.
	guard *hubguard.Guard
}

func (f *hubFlags) open(ctx context.Context, name string) (*hub, func(), error) {
	h := &hub{log: slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", name), metrics: newRegistry()}
	mctx, stopMetrics := context.WithCancel(ctx)
	closers := []func(){stopMetrics}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if err := serveMetrics(mctx, f.metricsListen, h.metrics, h.log); err != nil {
		closeAll()
		return nil, nil, err
	}
	var err error
	if f.keyFile != "" {
		if h.sealer, err = seal.LoadKeyFile(f.keyFile); err != nil {
			return nil, nil, err
		}
	}
	if f.database != "" {
		if h.db, err = openDatabase(ctx, f.database, h.log); err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { h.db.Close() })
	}
	if f.nats != "" { // else a component that never uses the stream
		if h.streams, err = stream.Connect(ctx, f.nats, stream.Options{Name: "purser-" + name, Replicas: f.streamReplicas, Security: f.natsSecurity}); err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, h.streams.Close)
		if err := declare(ctx, h.streams, h.log); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	if h.db != nil {
		cfg := hubguard.Config{Name: name + "@" + replica.Identity(), Database: h.db, Logger: h.log, Registerer: h.metrics}
		if h.streams != nil {
			cfg.Stream = h.streams
		}
		h.guard = hubguard.New(cfg)
		h.guard.Check(ctx) // a first verdict before the component acts
		gctx, stopGuard := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); h.guard.Run(gctx) }()
		closers = append(closers, func() { stopGuard(); <-done })
	}
	return h, closeAll, nil
}

// openDatabase opens the database, waiting while it is unavailable (a
// PostgreSQL server restarting, or not up yet when the pods start), as
// declare waits for the stream: a component that exited here would only
// be restarted to try again, later and later as the kubelet backs off.
// Any other error (a malformed DSN, a failed migration) ends it.
func openDatabase(ctx context.Context, dsn string, log *slog.Logger) (*store.Store, error) {
	for attempt := 0; ; attempt++ {
		db, err := store.Open(ctx, dsn)
		if err == nil || !errors.Is(err, store.ErrUnavailable) {
			return db, err
		}
		log.Warn("database unavailable; opening it again", "attempt", attempt+1, "error", err)
		if !backoff.Sleep(ctx, backoff.Exponential(attempt, 500*time.Millisecond, 10*time.Second)) {
			return nil, err
		}
	}
}

// declare declares the streams, waiting while the stream is unavailable
// (a NATS cluster still electing its leaders, or busy with the
// declarations of every replica starting at once), as Connect waits for
// the first connection: a component that exited here would only be
// restarted to try again.
func declare(ctx context.Context, streams *stream.Client, log *slog.Logger) error {
	return whileUnavailable(ctx, log, streams.Declare)
}

// whileUnavailable runs declare until it succeeds or fails otherwise than
// with the stream unavailable.
func whileUnavailable(ctx context.Context, log *slog.Logger, declare func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := declare(ctx)
		if err == nil || !errors.Is(err, stream.ErrUnavailable) {
			return err
		}
		log.Warn("stream unavailable; declaring again", "attempt", attempt+1, "error", err)
		if !backoff.Sleep(ctx, backoff.Exponential(attempt, 500*time.Millisecond, 10*time.Second)) {
			return err
		}
	}
}

// openStore opens the database and the key only.
func (f *hubFlags) openStore(ctx context.Context, name string) (*hub, func(), error) {
	g := *f
	g.nats = ""
	return g.open(ctx, name)
}

// policyHelp describes --policy of the components that act on member
// clusters.
const policyHelp = "policy file, as the api's, reloaded when it changes: the kinds each namespace may put on member clusters are checked again before every create or apply"

// loadPolicy reads the policy file of a component that acts on member
// clusters; a file that does not parse stops it at start.
func loadPolicy(path, component string) (*auth.Identities, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", component)
	return auth.LoadIdentities(auth.IdentitiesConfig{PolicyFile: path, Logger: log})
}

// followingPolicy runs run while policy follows its file, as the api's
// does, so that a rule added to the policy holds without a restart; a
// later edit that does not parse leaves the last good one in force.
func followingPolicy(ctx context.Context, policy *auth.Identities, run func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { _ = policy.Run(ctx) })
	return run(ctx)
}

func newSubmitterCommand() *cobra.Command {
	var f hubFlags
	var policyFile string
	cmd := &cobra.Command{
		Use:   "submitter",
		Short: "Place runnables on clusters from the submissions work queue, with retries",
		Long: `Consume the submissions work queue and create each accepted runnable on one
member cluster: placement, idempotent creation, retries of transient errors,
deadlines, cancellation. Several submitters share the queue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policy, err := loadPolicy(policyFile, "submitter")
			if err != nil {
				return err
			}
			h, closeHub, err := f.open(cmd.Context(), "submitter")
			if err != nil {
				return err
			}
			defer closeHub()
			fmt.Fprintln(cmd.OutOrStdout(), "purser submitter running")
			return followingPolicy(cmd.Context(), policy, submitter.New(submitter.Config{Store: h.db, Sealer: h.sealer, Stream: h.streams, Logger: h.log, Registerer: h.metrics,
				Policy: policy, Guard: h.guard}).Run)
		},
	}
	f.register(cmd, true, true)
	cmd.Flags().StringVar(&policyFile, "policy", "purser-data/policy.yaml", policyHelp)
	return cmd
}

func newSyncerCommand() *cobra.Command {
	var f hubFlags
	var identity, policyFile string
	cmd := &cobra.Command{
		Use:   "syncer",
		Short: "Keep deployables identical on every matching cluster and repair drift",
		Long: `Apply every deployable to every cluster its placement matches, watch what it
applied and restore it when someone changes or deletes it, remove what left
the source of truth, and report per-cluster sync state. Replicas share the
clusters through leases in the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policy, err := loadPolicy(policyFile, "syncer")
			if err != nil {
				return err
			}
			h, closeHub, err := f.open(cmd.Context(), "syncer")
			if err != nil {
				return err
			}
			defer closeHub()
			if identity == "" {
				identity = replica.Identity()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purser syncer running as %s\n", identity)
			return followingPolicy(cmd.Context(), policy, syncer.New(syncer.Config{Store: h.db, Sealer: h.sealer, Stream: h.streams, Identity: identity, Logger: h.log,
				Policy: policy, Guard: h.guard}).Run)
		},
	}
	f.register(cmd, true, true)
	cmd.Flags().StringVar(&policyFile, "policy", "purser-data/policy.yaml", policyHelp)
	cmd.Flags().StringVar(&identity, "identity", "", "name of this replica in its leases (default: host name and pid)")
	return cmd
}

func newIngesterCommand() *cobra.Command {
	var f hubFlags
	var rulesFile string
	cmd := &cobra.Command{
		Use:   "ingester",
		Short: "Keep the inventory from the agents' events and snapshots; remove zombies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			interp, err := interpreter(rulesFile)
			if err != nil {
				return err
			}
			h, closeHub, err := f.open(cmd.Context(), "ingester")
			if err != nil {
				return err
			}
			defer closeHub()
			in, err := inventory.New(inventory.Config{Store: h.db, Stream: h.streams, Logger: h.log, Health: interp.InterpretJSON,
				Fingerprint: h.sealer.Fingerprint})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "purser ingester running")
			return in.Run(cmd.Context())
		},
	}
	f.register(cmd, true, true) // the key keys the fingerprint of Secrets' data
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML file of health rules (CEL) for kinds beyond the built-ins")
	return cmd
}

func newAgentCommand() *cobra.Command {
	var f hubFlags
	var kubeconfig, cluster string
	var leaseDuration time.Duration
	elect := agent.LeaderElection{Enabled: true}
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
			if cluster == "" {
				return fmt.Errorf("--cluster is required: the cluster's name as registered in purser")
			}
			var cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			h, closeHub, err := f.open(cmd.Context(), "agent")
			if err != nil {
				return err
			}
			defer closeHub()
			a, err := agent.New(agent.Config{Cluster: cluster, RESTConfig: cfg, Stream: h.streams,
				LeaseDuration: leaseDuration, LeaderElection: elect, Logger: h.log.With("cluster", cluster)})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purser agent running for cluster %s\n", cluster)
			return a.Run(cmd.Context())
		},
	}
	f.register(cmd, false, false)
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster (default: in-cluster config)")
	cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster's name as registered in purser")
	cmd.Flags().DurationVar(&leaseDuration, "lease-duration", 30*time.Second, "how long after the last acknowledged heartbeat the agent fences its AtMostOne work")
	cmd.Flags().BoolVar(&elect.Enabled, "leader-elect", true, "elect one working agent among the replicas for this cluster, through a Lease in the cluster")
	cmd.Flags().StringVar(&elect.Namespace, "leader-elect-resource-namespace", agent.DefaultLeaderElectionNamespace, "namespace of the leader Lease (created if missing)")
	cmd.Flags().StringVar(&elect.Name, "leader-elect-resource-name", agent.DefaultLeaderElectionName, "name of the leader Lease")
	cmd.Flags().StringVar(&elect.Identity, "identity", "", "name of this replica in the Lease and its heartbeats (default: host name and pid)")
	cmd.Flags().DurationVar(&elect.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long after the leader's last renewal a standby takes over")
	cmd.Flags().DurationVar(&elect.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader fails to renew before it stops working")
	cmd.Flags().DurationVar(&elect.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "wait between attempts to acquire or renew the Lease")
	return cmd
}

func newComponentCommands() []*cobra.Command {
	return []*cobra.Command{newSubmitterCommand(), newSyncerCommand(), newIngesterCommand(), newAgentCommand(), newControllerCommand()}
}
