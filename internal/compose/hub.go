package compose

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/platform/replica"
)

// HubConfig says where the hub is. An empty Database, stream (NATS and
// Embedded) or KeyFile is a part this process does not use: the agent
// never opens the database, the controller never uses the stream.
type HubConfig struct {
	// Name names the process: its stream connection (purser-NAME), its
	// write checks in the database (NAME@host-pid) and the hub's own log
	// lines.
	Name string
	// Database is an SQLite file path or a postgres:// DSN.
	Database string
	// NATS is the URL of the NATS servers, comma separated; Embedded, when
	// set instead, is a server in this process, reached without a socket.
	NATS     string
	Security stream.Security
	Embedded *stream.Embedded
	// StreamReplicas of the streams and buckets declared: 1 for one
	// server, 3 for a NATS cluster.
	StreamReplicas int
	// StreamStoreBytes bounds what purser's streams keep on each NATS
	// server (stream.Config.StoreBytes); 0: the default.
	StreamStoreBytes int64
	// KeyFile holds the AES-256 key that opens kubeconfigs and Secret
	// values.
	KeyFile string
	// MetricsListen, when set, serves the registry on /metrics, and
	// /healthz, from before the database is reached.
	MetricsListen string
	// Logger receives the lines of the hub and of every component; nil
	// discards them.
	Logger *slog.Logger
}

// Hub is the state a process's components meet at, opened once.
type Hub struct {
	Store  *store.Store   // nil when HubConfig.Database is empty
	Stream *stream.Client // nil when no stream is configured
	Sealer *seal.Sealer   // nil when HubConfig.KeyFile is empty
	// Guard says whether this process reaches the database's primary and
	// (when it uses one) the stream's quorum; the components act only
	// while it does. Nil without a database.
	Guard *guard.Guard
	// Metrics holds the Go runtime's, the process's, the guard's and
	// every component's metrics.
	Metrics *prometheus.Registry
	Logger  *slog.Logger

	closers []func()
}

// Waits while the hub is unavailable: a component that exited instead
// would only be restarted to try again, later and later as the kubelet
// backs off.
const (
	unavailableBase = 500 * time.Millisecond
	unavailableMax  = 10 * time.Second
)

// OpenHub opens what cfg names: it serves the metrics, loads the key,
// opens the database and connects to the stream (waiting while either is
// unavailable: a PostgreSQL server restarting, a NATS cluster electing
// its leaders), declares the streams, and starts the guard after a first
// check. Any other error (a malformed DSN, a failed migration, a missing
// key) ends it. Close releases it all.
func OpenHub(ctx context.Context, cfg HubConfig) (_ *Hub, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{Logger: log, Metrics: newRegistry()}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	hubLog := log.With("component", cfg.Name)
	if err := h.serveMetrics(ctx, cfg.MetricsListen, hubLog); err != nil {
		return nil, err
	}
	if cfg.KeyFile != "" {
		if h.Sealer, err = seal.LoadKeyFile(cfg.KeyFile); err != nil {
			return nil, err
		}
	}
	if cfg.Database != "" {
		if h.Store, err = openStore(ctx, cfg.Database, hubLog); err != nil {
			return nil, err
		}
		h.closers = append(h.closers, func() {
			if err := h.Store.Close(); err != nil {
				hubLog.Warn("closing the database failed", "error", err)
			}
		})
	}
	if cfg.NATS != "" || cfg.Embedded != nil {
		// Neither a stream out nor its topology stops a process from
		// starting (declare).
		opts := stream.Config{Name: "purser-" + cfg.Name, Replicas: cfg.StreamReplicas, StoreBytes: cfg.StreamStoreBytes,
			Security: cfg.Security, ConnectWait: streamStartWait}
		if cfg.Embedded != nil {
			h.Stream, err = cfg.Embedded.Connect(ctx, opts)
		} else {
			h.Stream, err = stream.Connect(ctx, cfg.NATS, opts)
		}
		if err != nil {
			return nil, err
		}
		h.closers = append(h.closers, h.Stream.Close)
		if err := h.declare(ctx, hubLog); err != nil {
			return nil, err
		}
	}
	if h.Store != nil && h.Sealer != nil {
		// Every entry this process appends is one only purser's writers
		// could have written; the chain's verify checks it.
		h.Store.SetAuditMAC(audit.NewMAC(h.Sealer.AuditKey()))
	}
	if h.Store != nil {
		h.startGuard(ctx, cfg.Name, hubLog)
	}
	return h, nil
}

// streamStartWait is how long a process waits at its start for the
// stream to take its topology (a NATS cluster electing its leaders)
// before it starts without it.
const streamStartWait = 15 * time.Second

// declare declares the stream's topology. A stream that stays unavailable
// for streamStartWait does not keep the process from starting: the
// stream only carries what the database holds (an outage of it stops no
// work), and a process restarted during one must serve (the api accept
// writes, the controller renew the hub's Lease in each member, which
// keeps the agents from fencing); the topology is then declared in the
// background once the stream is back, and what uses the stream meanwhile
// finds it unavailable and tries again, as during any outage.
func (h *Hub) declare(ctx context.Context, log *slog.Logger) error {
	wait, cancel := context.WithTimeout(ctx, streamStartWait)
	err := whileUnavailable(wait, log, "stream", stream.ErrUnavailable, h.Stream.Declare)
	cancel()
	if err == nil || ctx.Err() != nil || (!errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	log.Warn("the stream is unavailable: starting without it; its topology is declared once it is back", "waited", streamStartWait, "error", err)
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := whileUnavailable(bg, log, "stream", stream.ErrUnavailable, h.Stream.Declare); err == nil {
			log.Info("the stream is back: its topology is declared")
		} else if bg.Err() == nil {
			log.Error("declaring the stream's topology failed", "error", err)
		}
	})
	h.closers = append(h.closers, func() { stop(); wg.Wait() })
	return nil
}

// Close stops the guard and the metrics server and closes the stream and
// the database, in the reverse order of their opening.
func (h *Hub) Close() {
	for i := len(h.closers) - 1; i >= 0; i-- {
		h.closers[i]()
	}
	h.closers = nil
}

func (h *Hub) startGuard(ctx context.Context, name string, log *slog.Logger) {
	cfg := guard.Config{Name: name + "@" + replica.Identity(), Database: h.Store, Logger: log, Registerer: h.Metrics}
	if h.Stream != nil {
		cfg.Stream = h.Stream
	}
	h.Guard = guard.New(cfg)
	h.Guard.Check(ctx) // a first verdict before any component acts
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.Guard.Run(ctx) })
	h.closers = append(h.closers, func() { stop(); wg.Wait() })
}

// openStore opens the database, waiting while it is unavailable.
func openStore(ctx context.Context, dsn string, log *slog.Logger) (*store.Store, error) {
	var db *store.Store
	err := whileUnavailable(ctx, log, "database", store.ErrUnavailable, func(ctx context.Context) error {
		var err error
		db, err = store.Open(ctx, dsn)
		return err
	})
	return db, err
}

// whileUnavailable runs fn until it succeeds, fails otherwise than with
// unavailable, or ctx is done (then its last error).
func whileUnavailable(ctx context.Context, log *slog.Logger, what string, unavailable error, fn func(context.Context) error) error {
	return reconcile.Retry(ctx, reconcile.Backoff(unavailableBase, unavailableMax), func(ctx context.Context, attempt int) error {
		err := fn(ctx)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unavailable):
			return reconcile.Terminal(err)
		}
		log.Warn(what+" unavailable; trying again", "attempt", attempt+1, "error", err)
		return err
	})
}

// newRegistry is a process's metrics registry, with the Go runtime's
// and the process's own metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves the registry on addr until Close; it returns once
// the listener is open, so that a port taken fails the process at start.
func (h *Hub) serveMetrics(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("serve metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.Metrics, promhttp.HandlerOpts{Registry: h.Metrics}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	})
	h.closers = append(h.closers, func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		wg.Wait()
	})
	log.Info("serving metrics", "addr", ln.Addr().String())
	return nil
}
