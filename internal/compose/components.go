package compose

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/syncer"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/platform/replica"
)

// SubmitterConfig is the submitter's.
type SubmitterConfig struct {
	// PolicyFile is the API's policy, reloaded as it changes: the kinds
	// each namespace may put on member clusters are checked again before
	// every create.
	PolicyFile string
	// BestFit scores the clusters a runnable fits by the smallest share
	// left free (packing) rather than the largest (spreading, the default).
	BestFit bool
	// ClientLimits are those of its clients of each member cluster.
	ClientLimits clusters.Limits
}

// Submitter builds the submitter on h.
func Submitter(h *Hub, cfg SubmitterConfig) (*Component, error) {
	if err := needs(h, "submitter", true, true, true); err != nil {
		return nil, err
	}
	log := componentLog(h, "submitter")
	policy, err := loadPolicy(cfg.PolicyFile, log)
	if err != nil {
		return nil, err
	}
	scfg := submitter.Config{Store: h.Store, Sealer: h.Sealer, Stream: h.Stream, Logger: log, Registerer: h.Metrics,
		Policy: policy, Guard: h.Guard, ClientLimits: cfg.ClientLimits}
	if cfg.BestFit {
		scfg.Score = placement.BestFit
	}
	s := submitter.New(scfg)
	return &Component{
		desc: Description{Component: "submitter", Guarded: scfg.Guard != nil, Metrics: scfg.Registerer != nil, Policy: scfg.Policy != nil},
		run:  func(ctx context.Context) error { return followingPolicy(ctx, policy, s.Run) },
	}, nil
}

// SyncerConfig is the syncer's.
type SyncerConfig struct {
	// Identity names this replica in its leases (default: host name and
	// pid).
	Identity string
	// PolicyFile: as the submitter's, checked before every apply.
	PolicyFile string
}

// Syncer builds the syncer on h.
func Syncer(h *Hub, cfg SyncerConfig) (*Component, error) {
	if err := needs(h, "syncer", true, true, true); err != nil {
		return nil, err
	}
	log := componentLog(h, "syncer")
	policy, err := loadPolicy(cfg.PolicyFile, log)
	if err != nil {
		return nil, err
	}
	identity := cfg.Identity
	if identity == "" {
		identity = replica.Identity()
	}
	scfg := syncer.Config{Store: h.Store, Sealer: h.Sealer, Stream: h.Stream, Identity: identity, Logger: log,
		Policy: policy, Guard: h.Guard}
	s := syncer.New(scfg)
	return &Component{
		desc: Description{Component: "syncer", Guarded: scfg.Guard != nil, Policy: scfg.Policy != nil},
		run:  func(ctx context.Context) error { return followingPolicy(ctx, policy, s.Run) },
	}, nil
}

// IngesterConfig is the ingester's.
type IngesterConfig struct {
	// RulesFile holds health rules (CEL) for kinds beyond the built-ins;
	// empty: the built-ins only.
	RulesFile string
}

// Ingester builds the ingester on h. The hub's key keys the fingerprint
// of Secrets' data.
func Ingester(h *Hub, cfg IngesterConfig) (*Component, error) {
	if err := needs(h, "ingester", true, true, true); err != nil {
		return nil, err
	}
	interp, err := health.Load(cfg.RulesFile)
	if err != nil {
		return nil, err
	}
	in, err := inventory.New(inventory.Config{Store: h.Store, Stream: h.Stream, Logger: componentLog(h, "ingester"), Health: interp,
		Fingerprint: h.Sealer.Fingerprint})
	if err != nil {
		return nil, err
	}
	return &Component{desc: Description{Component: "ingester"}, run: in.Run}, nil
}

// AgentConfig is the agent's, beside one member cluster.
type AgentConfig struct {
	// Cluster is the cluster's name as registered in purser.
	Cluster string
	// RESTConfig reaches the cluster; nil: Kubeconfig's, or the in-cluster
	// configuration when that is empty too.
	RESTConfig *rest.Config
	Kubeconfig string
	// LeaseDuration is how long after the last acknowledged heartbeat the
	// agent fences its AtMostOne work (agent.Config's default).
	LeaseDuration time.Duration
	// LeaderElection elects one working agent among the replicas for the
	// cluster; off unless Enabled.
	LeaderElection agent.LeaderElection
}

// Agent builds an agent on h, which needs only the stream.
func Agent(h *Hub, cfg AgentConfig) (*Component, error) {
	if err := needs(h, "agent", false, true, false); err != nil {
		return nil, err
	}
	rc := cfg.RESTConfig
	if rc == nil {
		var err error
		if rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	// The agent names its cluster in its log lines itself.
	a, err := agent.New(agent.Config{Cluster: cfg.Cluster, RESTConfig: rc, Stream: h.Stream,
		LeaseDuration: cfg.LeaseDuration, LeaderElection: cfg.LeaderElection, Logger: componentLog(h, "agent")})
	if err != nil {
		return nil, err
	}
	return &Component{desc: Description{Component: "agent"}, run: a.Run}, nil
}

// needs says which parts of the hub a component misses.
func needs(h *Hub, component string, database, stream, key bool) error {
	var missing []string
	if database && h.Store == nil {
		missing = append(missing, "the database")
	}
	if stream && h.Stream == nil {
		missing = append(missing, "the stream")
	}
	if key && h.Sealer == nil {
		missing = append(missing, "the key")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the %s needs %s", component, strings.Join(missing, " and "))
	}
	return nil
}

// loadPolicy reads the policy file of a component that acts on member
// clusters; a file that does not parse stops it at start.
func loadPolicy(path string, log *slog.Logger) (*auth.Identities, error) {
	return auth.LoadIdentities(auth.IdentitiesConfig{PolicyFile: path, Logger: log})
}

// followingPolicy runs run while policy follows its file, as the API's
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
