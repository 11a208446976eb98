package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures a nats-server running inside the purser process.
type EmbeddedConfig struct {
	// Dir holds JetStream's files. Reusing it after a restart keeps every
	// stream, consumer position and bucket.
	Dir string
	// Host to listen on; 127.0.0.1 when empty, so that an embedded server
	// is never reachable from the network by accident.
	Host string
	// Port to listen on; 0 picks a free port (see ClientURL).
	Port int
	// NoListen listens on no port at all: only this process reaches the
	// server, through Embedded.Connect. What `purser up` runs, since all
	// of its components share one process: a port without credentials
	// would let anyone on the machine publish anchors or delete streams.
	NoListen bool
	// Logger receives the server's log; nil keeps the server silent.
	Logger *slog.Logger
}

// Embedded is a running in-process nats-server with JetStream.
type Embedded struct {
	srv  *server.Server
	once sync.Once
}

// StartEmbedded starts nats-server with JetStream file storage under
// cfg.Dir and returns once it accepts connections, or when ctx is done.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start embedded nats: no storage directory")
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := cfg.Port
	if port == 0 {
		// Port 0 means "the default port 4222" to nats-server; purser
		// means "any free port", which the server spells RANDOM_PORT.
		port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "purser-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		// The outbox relay deletes its row as soon as the publish is
		// acknowledged, so from then on the stream holds the only copy:
		// the ack must mean "on disk", not "in the page cache".
		SyncAlways: true,
		// The server must not take over the purser process's signals.
		NoSigs:     true,
		DontListen: cfg.NoListen,
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded nats in %s: %w", cfg.Dir, err)
	}
	logger := &serverLogger{log: cfg.Logger}
	debug := cfg.Logger != nil && cfg.Logger.Enabled(ctx, slog.LevelDebug)
	srv.SetLogger(logger, debug, false)

	srv.Start()
	e := &Embedded{srv: srv}
	// ReadyForConnections takes a timeout, not a context; short slices keep
	// the wait responsive to ctx and to a fatal error at start (a storage
	// directory that cannot be used is only reported through the logger).
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		if err := logger.fatal(); err != nil {
			e.Shutdown()
			return nil, fmt.Errorf("start embedded nats in %s: %w", cfg.Dir, err)
		}
		if ctx.Err() != nil {
			e.Shutdown()
			return nil, fmt.Errorf("start embedded nats in %s: %w", cfg.Dir, ctx.Err())
		}
	}
	if !srv.JetStreamEnabled() {
		e.Shutdown()
		return nil, fmt.Errorf("start embedded nats in %s: jetstream did not start: %w", cfg.Dir, logger.fatal())
	}
	return e, nil
}

// ClientURL is the URL to pass to Connect, with the port actually chosen;
// meaningless with NoListen.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Connect connects to the server inside this process, without a socket
// (nats-server's InProcessConn), which works with NoListen too.
func (e *Embedded) Connect(ctx context.Context, opts Config) (*Client, error) {
	opts.inProcess = e.srv
	return Connect(ctx, "", opts)
}

// Shutdown stops the server and waits until it has closed its files, so
// that the same Dir can be used again at once. It is safe to call twice.
func (e *Embedded) Shutdown() {
	e.once.Do(func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	})
}

// serverLogger adapts nats-server's logger to slog and remembers the fatal
// error that the server reports only through its logger.
type serverLogger struct {
	log *slog.Logger

	mu       sync.Mutex
	fatalMsg string
}

func (l *serverLogger) fatal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatalMsg == "" {
		return nil
	}
	return errors.New(l.fatalMsg)
}

func (l *serverLogger) emit(level slog.Level, format string, v []any) {
	if l.log != nil {
		l.log.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "nats-server")
	}
}

func (l *serverLogger) Noticef(format string, v ...any) { l.emit(slog.LevelInfo, format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }

// Tracef is protocol tracing, far too verbose for purser's log; the server
// only calls it when tracing is asked for, which StartEmbedded never does.
func (l *serverLogger) Tracef(format string, v ...any) {}

// Fatalf does not exit: the purser process decides what a failed server
// means, through the error StartEmbedded returns.
func (l *serverLogger) Fatalf(format string, v ...any) {
	l.mu.Lock()
	if l.fatalMsg == "" {
		l.fatalMsg = fmt.Sprintf(format, v...)
	}
	l.mu.Unlock()
	l.emit(slog.LevelError, format, v)
}
