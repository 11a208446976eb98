package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/audit"
	hubguard "github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/store"
)

func newAPICommand() *cobra.Command {
	var f hubFlags
	var listen, tokensFile, policyFile, auditKeyFile, standby string
	var trustedKeys []string
	var anchorInterval time.Duration
	var oidcConfig auth.OIDCConfig
	groupCommit := true
	var userRate float64
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
			auditKey, err := anchor.LoadKeyFile(auditKeyFile)
			if err != nil {
				return err
			}
			var trusted []ed25519.PublicKey
			for _, k := range trustedKeys {
				pub, err := audit.ParsePublicKey(k)
				if err != nil {
					return fmt.Errorf("--audit-trusted-keys: %w", err)
				}
				trusted = append(trusted, pub)
			}
			h, closeHub, err := f.open(cmd.Context(), "api")
			if err != nil {
				return err
			}
			defer closeHub()
			identities, err := newIdentities(tokensFile, policyFile, oidcConfig, h)
			if err != nil {
				return err
			}
			db, streams, sealer, log := h.db, h.streams, h.sealer, h.log
			ctx := cmd.Context()
			if standby != "" {
				if err := db.AttachStandby(ctx, standby); err != nil {
					return fmt.Errorf("--database-standby: %w", err)
				}
				h.guard.OnChange(func(err error) { db.UseStandby(errors.Is(err, hubguard.ErrNoPrimary)) })
			}
			var commits *store.GroupCommit
			if groupCommit && db.Engine() == store.EnginePostgres {
				commits = store.NewGroupCommit(db, 0, 0)
				defer commits.Close()
			}
			relay := outbox.NewRelay(outbox.StoreSource(db), streams, outbox.RelayOptions{Logger: log})
			var wg sync.WaitGroup
			defer wg.Wait()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wg.Add(1)
			go func() {
				defer wg.Done()
				relay.Run(ctx)
			}()
			anchors, err := anchor.New(anchor.Config{Store: db, Stream: streams, Key: auditKey, TrustedKeys: trusted, Interval: anchorInterval, Logger: log})
			if err != nil {
				return err
			}
			db.OnAuditCommit(anchors.Notify)
			if err := whileUnavailable(ctx, log, anchors.Init); err != nil {
				return err
			}
			wg.Go(func() { _ = anchors.Run(ctx) })
			wg.Go(func() { _ = identities.Run(ctx) })
			srv := &http.Server{
				Addr: listen,
				Handler: server.New(server.Config{Store: db, Stream: streams, Outbox: relay, Identities: identities, Sealer: sealer, Logger: log,
					Guard: h.guard, Commits: commits, Anchors: anchors, Limits: server.Limits{UserRate: userRate, UserBurst: int(2 * userRate)}}),
			}
			server.ConfigureHTTPServer(srv)
			go func() {
				<-ctx.Done()
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				srv.Shutdown(sctx)
			}()
			// Bound before it says so: a port in use is an error here, not
			// a promise of a server that is not there.
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "audit anchors signed by %s\n", anchors.KeyString())
			fmt.Fprintf(cmd.OutOrStdout(), "purser api listening on http://%s\n", listen)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f.register(cmd, true, true)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on")
	cmd.Flags().StringVar(&tokensFile, "tokens", "purser-data/tokens.yaml", "tokens file (users and hashed bearer tokens), reloaded when it changes")
	cmd.Flags().StringVar(&policyFile, "policy", "purser-data/policy.yaml", "policy file (roles, approvals and kinds per namespace), reloaded when it changes")
	registerOIDCFlags(cmd, &oidcConfig)
	cmd.Flags().StringVar(&auditKeyFile, "audit-key", "purser-data/audit.key", "ed25519 private key (PEM, PKCS #8: openssl genpkey -algorithm ed25519) that signs the audit anchors; never in the database")
	cmd.Flags().DurationVar(&anchorInterval, "audit-anchor-interval", anchor.DefaultInterval, "how often to anchor a head written by another process (the submitter, the controller); this api's own changes are anchored as they commit")
	cmd.Flags().StringSliceVar(&trustedKeys, "audit-trusted-keys", nil, "public keys (ed25519:BASE64) of earlier --audit-key keys whose anchors still verify, after a rotation")
	cmd.Flags().BoolVar(&groupCommit, "group-commit", groupCommit, "commit concurrent changes in groups, each answered once its group has committed (PostgreSQL): a commit's round trip to a synchronous standby is then paid once per group")
	cmd.Flags().Float64Var(&userRate, "user-rate", 200, "requests a second each user may make (twice that at once); past it the answer is 429 with Retry-After")
	cmd.Flags().StringVar(&standby, "database-standby", "", "a postgres:// DSN of a standby (a multi-host one with target_session_attrs=prefer-standby, the nearest first) from which reads are answered, with their freshness, while this replica does not reach the primary; writes then answer 503")
	return cmd
}
