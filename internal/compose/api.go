package compose

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/api/server"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// APIConfig is the API's: where it listens, who may use it, how it signs
// the audit chain's head.
type APIConfig struct {
	// Listen is the address to serve on (DefaultListen); port 0 picks a
	// free one.
	Listen string
	// TokensFile and PolicyFile are reloaded as they change; OIDC, when
	// its issuer is set, accepts that provider's ID tokens beside them.
	TokensFile, PolicyFile string
	OIDC                   auth.OIDCConfig
	// AuditKeyFile holds the ed25519 key that signs the audit anchors;
	// AuditTrustedKeys verify the anchors of keys used before a rotation.
	AuditKeyFile     string
	AuditTrustedKeys []ed25519.PublicKey
	// AnchorInterval is how often a head written by another process is
	// anchored (anchor.DefaultInterval).
	AnchorInterval time.Duration
	// GroupCommit commits concurrent changes in groups where the engine
	// gains from it (PostgreSQL, whose commit waits for a synchronous
	// standby); SQLite commits each change alone whatever it says.
	GroupCommit bool
	// UserRate is the requests a second each user may make, twice that at
	// once (DefaultUserRate).
	UserRate float64
	// KubeWatchesPerUser and KubeRequestsPerUser cap, per user, the
	// watches open under /k8s and the other /k8s requests under way
	// (kubeapi.DefaultWatchesPerUser, kubeapi.DefaultRequestsPerUser).
	KubeWatchesPerUser  int
	KubeRequestsPerUser int
	// Standby is a postgres:// DSN from which reads are answered while
	// this process does not reach the primary; empty: none.
	Standby string
	// ScheduleWritten, when set, is called after each write of a
	// schedule, to wake the scheduler of this process.
	ScheduleWritten func()
	// Drill is what the drills' what-if weighs with: the controller's
	// zone label and eviction rates, the submitter's score, as they are
	// configured (zero: their defaults).
	Drill controldrill.Options
}

// Defaults of APIConfig.
const (
	DefaultListen   = "127.0.0.1:8080"
	DefaultUserRate = 200
)

// shutdownGrace is how long the requests under way may take to finish once
// the API is stopped.
const shutdownGrace = 10 * time.Second

// APIServer is the built API: the REST API and console, the outbox relay,
// the audit anchors and the reload of the identities. Its listener is
// open from the build on.
type APIServer struct {
	Handler http.Handler

	desc       Description
	ln         net.Listener
	srv        *http.Server
	relay      *outbox.Relay
	anchors    *anchor.Publisher
	identities *auth.Identities
	commits    *store.GroupCommit
	// changes is the database whose change sequence of purser's own
	// kinds Run keeps numbered and pruned.
	changes   feed.Database
	log       *slog.Logger
	closeOnce sync.Once
}

// API builds the API on h: it loads the audit key and the identities,
// attaches the standby, starts group commit on PostgreSQL, declares the
// audit stream (waiting while the stream is unavailable) and opens the
// listener, so that a port in use is an error here, not a promise of a
// server that is not there.
func API(ctx context.Context, h *Hub, cfg APIConfig) (_ *APIServer, err error) {
	if err := needs(h, "api", true, true, true); err != nil {
		return nil, err
	}
	log := componentLog(h, "api")
	auditKey, err := anchor.LoadKeyFile(cfg.AuditKeyFile)
	if err != nil {
		return nil, err
	}
	identities, err := loadIdentities(cfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.Standby != "" {
		if err := h.Store.AttachStandby(ctx, cfg.Standby); err != nil {
			return nil, fmt.Errorf("database standby: %w", err)
		}
		h.Guard.OnChange(func(err error) { h.Store.UseStandby(errors.Is(err, guard.ErrNoPrimary)) })
	}
	a := &APIServer{identities: identities, changes: h.Store, log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if cfg.GroupCommit && h.Store.Engine() == store.EnginePostgres {
		a.commits = store.NewGroupCommit(h.Store, 0, 0)
	}
	a.relay = outbox.NewRelay(outbox.StoreSource(h.Store), h.Stream, outbox.Config{Logger: log})
	a.anchors, err = anchor.New(anchor.Config{Store: h.Store, Stream: h.Stream, Key: auditKey, TrustedKeys: cfg.AuditTrustedKeys,
		Interval: cfg.AnchorInterval, Logger: log})
	if err != nil {
		return nil, err
	}
	h.Store.OnAuditCommit(a.anchors.Notify)
	if err := whileUnavailable(ctx, log, "stream", stream.ErrUnavailable, a.anchors.Init); err != nil {
		return nil, err
	}
	rate := cfg.UserRate
	if rate <= 0 {
		rate = DefaultUserRate
	}
	scfg := server.Config{Store: h.Store, Stream: h.Stream, InventoryChanges: h.Stream, Outbox: a.relay, Identities: identities, Sealer: h.Sealer, Logger: log,
		Registry: h.Metrics, Guard: h.Guard, Commits: a.commits, Anchors: a.anchors, ScheduleWritten: cfg.ScheduleWritten, DrillSnapshot: controldrill.Snapshotter(cfg.Drill),
		Limits: server.Limits{UserRate: rate, UserBurst: int(2 * rate),
			KubeWatchesPerUser:  orDefault(cfg.KubeWatchesPerUser, kubeapi.DefaultWatchesPerUser),
			KubeRequestsPerUser: orDefault(cfg.KubeRequestsPerUser, kubeapi.DefaultRequestsPerUser)}}
	a.Handler = server.New(scfg)
	a.srv = &http.Server{Handler: a.Handler}
	server.ConfigureHTTPServer(a.srv)
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	if a.ln, err = new(net.ListenConfig).Listen(ctx, "tcp", listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	a.desc = Description{Component: "api", Guarded: scfg.Guard != nil, Metrics: scfg.Registry != nil, Policy: scfg.Identities != nil,
		GroupCommit: scfg.Commits != nil, Standby: cfg.Standby != "", UserRate: scfg.Limits.UserRate, UserBurst: scfg.Limits.UserBurst,
		KubeWatchesPerUser: scfg.Limits.KubeWatchesPerUser, KubeRequestsPerUser: scfg.Limits.KubeRequestsPerUser}
	return a, nil
}

// orDefault is n, or def when n is not set (zero or less).
func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func loadIdentities(cfg APIConfig, log *slog.Logger) (*auth.Identities, error) {
	icfg := auth.IdentitiesConfig{TokensFile: cfg.TokensFile, PolicyFile: cfg.PolicyFile, Logger: log}
	if cfg.OIDC.Enabled() {
		o, err := auth.NewOIDC(cfg.OIDC, log)
		if err != nil {
			return nil, err
		}
		icfg.OIDC = o
	}
	return auth.LoadIdentities(icfg)
}

// Addr is the address the API listens on.
func (a *APIServer) Addr() string { return a.ln.Addr().String() }

// AuditKey is the public half of the key that signs the anchors, as the
// clients' configuration names it.
func (a *APIServer) AuditKey() string { return a.anchors.KeyString() }

// NotifyOutbox wakes the outbox relay: another component of this process
// committed a row for the stream.
func (a *APIServer) NotifyOutbox() { a.relay.Notify() }

// Describe says what the API was built with.
func (a *APIServer) Describe() Description { return a.desc }

// Run serves until ctx is done, then lets the requests under way finish
// (for a bounded time) and returns once the relay, the anchors and the
// reload of the identities have stopped; it releases what the build
// opened.
func (a *APIServer) Run(ctx context.Context) error {
	defer a.Close()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.relay.Run(ctx) })
	wg.Go(func() { _ = a.anchors.Run(ctx) })
	wg.Go(func() { _ = a.identities.Run(ctx) })
	wg.Go(func() { feed.Keep(ctx, a.changes, feed.Retention, a.log) })
	wg.Go(func() {
		<-ctx.Done()
		shutdown, stop := context.WithTimeout(context.Background(), shutdownGrace)
		defer stop()
		_ = a.srv.Shutdown(shutdown)
	})
	err := a.srv.Serve(a.ln)
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve the api: %w", err)
}

// Close releases what the build opened (the listener, the group commit)
// when Run is not called; Run calls it on its way out.
func (a *APIServer) Close() {
	a.closeOnce.Do(func() {
		if a.ln != nil {
			a.ln.Close()
		}
		if a.commits != nil {
			a.commits.Close()
		}
	})
}
