package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/member/clusters"
)

type apiFlags struct {
	hub         hubFlags
	api         compose.APIConfig
	trustedKeys []string
	// drillBestFit: the submitter's --best-fit, for the drills' what-if.
	drillBestFit bool
}

func (f *apiFlags) register(cmd *cobra.Command) {
	f.hub.register(cmd, true, true)
	fl := cmd.Flags()
	fl.StringVar(&f.api.Listen, "listen", compose.DefaultListen, "address to serve on")
	fl.StringVar(&f.api.TokensFile, "tokens", "purser-data/tokens.yaml", "tokens file (users and hashed bearer tokens), reloaded when it changes")
	fl.StringVar(&f.api.PolicyFile, "policy", "purser-data/policy.yaml", "policy file (roles, approvals and kinds per namespace), reloaded when it changes")
	registerOIDCFlags(cmd, &f.api.OIDC)
	fl.StringVar(&f.api.AuditKeyFile, "audit-key", "purser-data/audit.key", "ed25519 private key (PEM, PKCS #8: openssl genpkey -algorithm ed25519) that signs the audit anchors; never in the database")
	fl.DurationVar(&f.api.AnchorInterval, "audit-anchor-interval", anchor.DefaultInterval, "how often to anchor a head written by another process (the submitter, the controller); this api's own changes are anchored as they commit")
	fl.StringSliceVar(&f.trustedKeys, "audit-trusted-keys", nil, "public keys (ed25519:BASE64) of earlier --audit-key keys whose anchors still verify, after a rotation")
	fl.BoolVar(&f.api.GroupCommit, "group-commit", true, "commit concurrent changes in groups, each answered once its group has committed (PostgreSQL): a commit's round trip to a synchronous standby is then paid once per group")
	fl.Float64Var(&f.api.UserRate, "user-rate", compose.DefaultUserRate, "requests a second each user may make (twice that at once); past it the answer is 429 with Retry-After")
	registerKubeLimitFlags(cmd, &f.api.KubeWatchesPerUser, &f.api.KubeRequestsPerUser)
	// The drills' what-if weighs the farm as the controller and the
	// submitter are configured: their flags of the same meaning.
	fl.StringVar(&f.api.Drill.ZoneLabel, "drill-zone-label", clusters.DefaultZoneLabel, "the cluster label that names its DC, as the controller's --zone-label: what purser drill dc NAME and GET /api/v1/dcs take as DCs")
	fl.Float64Var(&f.api.Drill.EvictionRate, "drill-eviction-rate", failover.DefaultEvictionRate, "the controller's --eviction-rate, by which the drills' what-if times the moves")
	fl.Float64Var(&f.api.Drill.ZoneRate, "drill-secondary-eviction-rate", failover.DefaultSecondaryEvictionRate, "the controller's --secondary-eviction-rate, by which the drills' what-if times the moves out of a whole DC")
	fl.BoolVar(&f.drillBestFit, "drill-best-fit", false, "the submitter runs with --best-fit: the drills' what-if places as it does")
	fl.StringVar(&f.api.Standby, "database-standby", "", "a postgres:// DSN of a standby (a multi-host one with target_session_attrs=prefer-standby, the nearest first) from which reads are answered, with their freshness, while this replica does not reach the primary; writes then answer 503")
}

func (f *apiFlags) config() (compose.Config, error) {
	api := f.api
	if f.drillBestFit {
		api.Drill.Score = placement.BestFit
	}
	if api.Drill.EvictionRate <= 0 || api.Drill.ZoneRate <= 0 {
		return compose.Config{}, fmt.Errorf("--drill-eviction-rate and --drill-secondary-eviction-rate must be above 0")
	}
	if err := checkKubeLimits(api.KubeWatchesPerUser, api.KubeRequestsPerUser); err != nil {
		return compose.Config{}, err
	}
	for _, k := range f.trustedKeys {
		pub, err := audit.ParsePublicKey(k)
		if err != nil {
			return compose.Config{}, fmt.Errorf("--audit-trusted-keys: %w", err)
		}
		api.AuditTrustedKeys = append(api.AuditTrustedKeys, pub)
	}
	return compose.Config{Hub: f.hub.config("api"), API: api}, nil
}

func newAPICommand() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the REST API (and relay the outbox to the stream)",
		Long: `Serve purser's REST API against an external database and NATS, as one of
several stateless replicas. Each replica also relays the database outbox to
the stream; the stream drops the duplicates that competing relays publish.
After every change, it signs the audit chain's head with --audit-key (an
ed25519 key the database does not hold) and publishes it to the stream
(AUDIT), against which "purser history --verify" checks the database; it
prints the key's public half at start, for the clients' configuration.`,
		Example: `  purser api --database postgres://purser@db/purser --nats nats://nats:4222 \
    --tokens /etc/purser/tokens.yaml --policy /etc/purser/policy.yaml --key-file /etc/purser/secret.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runComponent(cmd, cfg.Hub, func(h *compose.Hub) (*compose.APIServer, error) { return compose.API(cmd.Context(), h, cfg.API) },
				func(a *compose.APIServer) string {
					return fmt.Sprintf("audit anchors signed by %s\npurser api listening on http://%s\n", a.AuditKey(), cfg.API.Listen)
				})
		},
	}
	f.register(cmd)
	return cmd
}

// registerKubeLimitFlags adds the caps per user of the Kubernetes-shaped
// API (/k8s), which purser api and purser up both take.
func registerKubeLimitFlags(cmd *cobra.Command, watches, requests *int) {
	cmd.Flags().IntVar(watches, "kube-watches-per-user", kubeapi.DefaultWatchesPerUser,
		"watches one user may hold open at once under /k8s; past it a watch is refused with 429, Retry-After and a Status naming the cap")
	cmd.Flags().IntVar(requests, "kube-requests-per-user", kubeapi.DefaultRequestsPerUser,
		"other requests (lists, gets, reviews) one user may have under way at once under /k8s; past it the answer is 429 with Retry-After")
}

// checkKubeLimits refuses a cap below zero; zero is the default.
func checkKubeLimits(watches, requests int) error {
	if watches < 0 {
		return fmt.Errorf("--kube-watches-per-user must be 1 or more, got %d", watches)
	}
	if requests < 0 {
		return fmt.Errorf("--kube-requests-per-user must be 1 or more, got %d", requests)
	}
	return nil
}
