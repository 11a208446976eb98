package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/anchor"
	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/auth"
	"github.com/purser-io/purser/internal/outbox"
	"github.com/purser-io/purser/internal/server"
)

func newAPICommand() *cobra.Command {
	var f hubFlags
	var listen, tokensFile, policyFile string
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the REST API (and relay the outbox to the stream)",
		Long: `Serve purser's REST API against an external database and NATS, as one of
several stateless replicas. Each replica also relays the database outbox to
the stream; the stream drops the duplicates that competing relays publish.
Every 10 s while the audit chain grows, it publishes the chain's head to the
stream (AUDIT), against which "purser history --verify" checks the database.`,
		Example: `  purser api --database postgres://purser@db/purser --nats nats://nats:4222 \
    --tokens /etc/purser/tokens.yaml --policy /etc/purser/policy.yaml --key-file /etc/purser/secret.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tokens, err := auth.LoadTokens(tokensFile)
			if err != nil {
				return err
			}
			policy, err := auth.LoadPolicy(policyFile)
			if err != nil {
				return err
			}
			h, closeHub, err := f.open(cmd.Context(), "api")
			if err != nil {
				return err
			}
			defer closeHub()
			db, streams, sealer, log := h.db, h.streams, h.sealer, h.log
			ctx := cmd.Context()
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
			wg.Go(func() { _ = anchor.Run(ctx, anchor.Config{Store: db, Stream: streams, Logger: log}) })
			srv := &http.Server{
				Addr: listen,
				Handler: server.New(server.Config{Store: db, Stream: streams, Outbox: relay, Tokens: tokens, Policy: policy, Sealer: sealer, Logger: log,
					Anchors: func(ctx context.Context) ([]audit.Anchor, error) { return anchor.Read(ctx, streams) }}),
			}
			server.ConfigureHTTPServer(srv)
			go func() {
				<-ctx.Done()
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				srv.Shutdown(sctx)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "purser api listening on http://%s\n", listen)
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f.register(cmd, true, true)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on")
	cmd.Flags().StringVar(&tokensFile, "tokens", "purser-data/tokens.yaml", "tokens file (users and hashed bearer tokens)")
	cmd.Flags().StringVar(&policyFile, "policy", "purser-data/policy.yaml", "policy file (roles per namespace, approvals)")
	return cmd
}
