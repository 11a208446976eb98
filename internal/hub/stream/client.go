package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrUnavailable reports that no NATS server answered in time: the stream
// is down, unreachable, still starting, or has no stream for the subject.
// It is transient by nature; callers retry, and whatever they published
// before is deduplicated by message id.
var ErrUnavailable = errors.New("stream unavailable")

// Config configures a Client.
type Config struct {
	// Name identifies the connection in the server's monitoring, e.g.
	// "purser-submitter".
	Name string
	// Replicas of every stream and bucket that Declare creates: 1 (the
	// default) for a single server, 3 for a NATS cluster.
	Replicas int
	// Logger receives disconnects and reconnects; nil discards them.
	Logger *slog.Logger
	// Security: credentials and TLS; the zero value is a plain connection.
	Security Security
	// StoreBytes is how much of each NATS server's store purser's streams
	// may fill (0: DefaultStoreBytes). Events take half of it and
	// snapshots a quarter, beyond which each drops its oldest messages
	// (what an ingester had not read by then is corrected by the next
	// snapshot); the submissions (a work queue, emptied as the submitters
	// take them), the audit anchors and the buckets stay small in the
	// rest. The same on every component.
	StoreBytes int64
	// ConnectWait, when set, is how long Connect waits for the first
	// connection before it returns the client still connecting (its
	// calls then find the stream unavailable until it connects); 0 waits
	// until Connect's context ends.
	ConnectWait time.Duration

	inProcess nats.InProcessConnProvider // set by Embedded.Connect
}

// Client is one connection to NATS shared by a purser process.
type Client struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	replicas int
	// storeBytes is Config.StoreBytes, resolved.
	storeBytes int64
	conn       *connEpoch
}

// errConnectionLost cancels the publishes in flight when the connection
// drops. The client library would let them wait for their deadline,
// although their acks can no longer arrive.
var errConnectionLost = errors.New("connection to nats lost")

// connEpoch is a context that lives as long as one connection to a server.
type connEpoch struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newConnEpoch() *connEpoch {
	e := &connEpoch{}
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	return e
}

// begin starts the epoch of a new connection.
func (e *connEpoch) begin() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel(nil)
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
}

// end ends the current connection's epoch.
func (e *connEpoch) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel(errConnectionLost)
}

func (e *connEpoch) current() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx
}

const (
	// Ping often enough that a silently dead server (a cut network rather
	// than a closed socket, as when a data center is partitioned) is
	// noticed within about ten seconds, not the client library's default
	// of several minutes: well within an agent's lease (30 s), so that an
	// agent connected to the cut-off server finds one on the majority's
	// side before it would fence its cluster.
	pingInterval        = 3 * time.Second
	maxPingsOutstanding = 2

	reconnectBase = 50 * time.Millisecond
	reconnectCap  = 2 * time.Second
)

// Connect connects to the NATS servers in url (a comma-separated list for a
// cluster). It waits for the first connection until ctx is done; after
// that the connection reconnects forever with backoff, so a component
// survives any stream restart without being restarted itself.
func Connect(ctx context.Context, url string, opts Config) (*Client, error) {
	replicas := opts.Replicas
	switch {
	case replicas == 0:
		replicas = 1
	case replicas < 0:
		return nil, fmt.Errorf("connect to nats: replicas %d < 0", replicas)
	}
	storeBytes := opts.StoreBytes
	switch {
	case storeBytes == 0:
		storeBytes = DefaultStoreBytes
	case storeBytes < MinStoreBytes:
		return nil, fmt.Errorf("connect to nats: a store of %d bytes is under the %d MiB purser's streams need", storeBytes, MinStoreBytes>>20)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	security, err := opts.Security.options()
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}

	if opts.inProcess != nil {
		security = append(security, nats.InProcessServer(opts.inProcess))
	}

	connected := make(chan struct{})
	var once sync.Once
	epoch := newConnEpoch()
	markConnected := func(*nats.Conn) {
		epoch.begin()
		once.Do(func() { close(connected) })
	}

	nc, err := nats.Connect(url, append(security,
		nats.Name(opts.Name),
		// The first connection goes through the same retry loop as every
		// later one; ctx below bounds it.
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay()),
		// Without a buffer, a publish while disconnected fails at once
		// instead of waiting for an ack that cannot come before the
		// caller's deadline; every publish here waits for its ack, so a
		// buffer would only turn fast failures into slow ones.
		nats.ReconnectBufSize(-1),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOutstanding),
		nats.ConnectHandler(markConnected),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			markConnected(nc)
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			epoch.end()
			if err != nil {
				log.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			log.Error("nats asynchronous error", "error", err)
		}),
	)...)
	if err != nil {
		// Only a malformed URL or option fails here; unreachable servers
		// are retried above.
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	var gaveUp <-chan time.Time
	if opts.ConnectWait > 0 {
		timer := time.NewTimer(opts.ConnectWait)
		defer timer.Stop()
		gaveUp = timer.C
	}
	select {
	case <-connected:
	case <-gaveUp:
		log.Warn("nats not reached yet; going on while the connection is retried", "waited", opts.ConnectWait, "error", nc.LastError())
	case <-ctx.Done():
		lastErr := nc.LastError()
		nc.Close()
		if lastErr == nil {
			lastErr = ctx.Err()
		}
		return nil, fmt.Errorf("connect to nats: %w: %w", ErrUnavailable, lastErr)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to nats: jetstream: %w", err)
	}
	return &Client{nc: nc, js: js, replicas: replicas, storeBytes: storeBytes, conn: epoch}, nil
}

// reconnectDelay backs off exponentially with jitter, so that a restarted
// server is found again within a fraction of a second while a long outage
// does not have a hundred agents hammering it in step. The client library
// counts the attempts from 1 for each outage.
func reconnectDelay() nats.ReconnectDelayHandler {
	return func(attempts int) time.Duration {
		d := reconnectBase << min(max(attempts-1, 0), 30)
		if d <= 0 || d > reconnectCap {
			d = reconnectCap
		}
		return wait.Jitter(d/2, 1) // anywhere in the upper half of d
	}
}

// Declare creates or updates every stream, consumer and bucket of purser
// but AuditStream (see DeclareAudit). It is idempotent, so every component
// calls it at start and none depends on another having run first.
func (c *Client) Declare(ctx context.Context) error {
	t := newTopology(c.replicas, c.storeBytes)
	for _, cfg := range t.streams {
		if cfg.Name == AuditStream {
			continue
		}
		if _, err := c.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return classify(fmt.Sprintf("declare stream %s", cfg.Name), err)
		}
	}
	for _, d := range t.consumers {
		if _, err := c.js.CreateOrUpdateConsumer(ctx, d.stream, d.config); err != nil {
			return classify(fmt.Sprintf("declare consumer %s on %s", d.config.Durable, d.stream), err)
		}
	}
	for _, cfg := range t.buckets {
		if _, err := c.js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return classify(fmt.Sprintf("declare bucket %s", cfg.Bucket), err)
		}
	}
	return nil
}

// DeclareAudit creates AuditStream when it is missing, and never updates
// it: an update could add a limit that drops old anchors, so production
// grants no one the right to update it, and only the api, which publishes
// to it, declares it (docs/operations.md, "Locking NATS down"). An existing
// stream is left as it is; verification checks its configuration.
func (c *Client) DeclareAudit(ctx context.Context) error {
	if _, err := c.js.Stream(ctx, AuditStream); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return classify("declare stream "+AuditStream, err)
	}
	for _, cfg := range newTopology(c.replicas, c.storeBytes).streams {
		if cfg.Name != AuditStream {
			continue
		}
		// A replica that lost the race to create it finds it made, with
		// the same configuration, which JetStream answers with success.
		if _, err := c.js.CreateStream(ctx, cfg); err != nil {
			return classify("declare stream "+AuditStream, err)
		}
	}
	return nil
}

// Publish stores data on subject and returns once JetStream has
// acknowledged it. msgID is required: the stream drops a second message
// with the same id within its duplicate window, which is what makes a
// retried publish safe. A publish that was already stored counts as
// success. When ctx has no deadline, the JetStream default (5s) applies,
// so Publish never hangs; when the connection drops, Publish fails at once.
// A failed publish may still have been stored: retrying it with the same
// msgID is always safe.
func (c *Client) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	if msgID == "" {
		return fmt.Errorf("publish to %s: empty message id", subject)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.conn.current(), func() { cancel(errConnectionLost) })
	defer stop()

	if _, err := c.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errConnectionLost) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		what := fmt.Sprintf("publish %s to %s", msgID, subject)
		if !c.nc.IsConnected() {
			// The client library's error for a publish while reconnecting
			// ("outbound buffer limit exceeded") hides the real cause.
			what += fmt.Sprintf(" (nats %s)", c.nc.Status())
		}
		return classify(what, err)
	}
	return nil
}

// ErrWrongLastSequence reports a PublishAfter that lost the race: the
// stream's last message is no longer the one expected.
var ErrWrongLastSequence = errors.New("the stream's last message moved")

// PublishAfter stores data on subject only if the stream's last message
// is still number last (0: the stream is empty), and returns the new
// message's number: a compare-and-swap that lets several writers keep one
// linear record. A lost race wraps ErrWrongLastSequence. msgID works as in
// Publish; it must name the content, so that only a retry of the same
// message is deduplicated.
func (c *Client) PublishAfter(ctx context.Context, subject, msgID string, data []byte, last uint64) (uint64, error) {
	if msgID == "" {
		return 0, fmt.Errorf("publish to %s: empty message id", subject)
	}
	ack, err := c.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequence(last))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, fmt.Errorf("publish %s to %s after message %d: %w: %w", msgID, subject, last, ErrWrongLastSequence, err)
		}
		return 0, classify(fmt.Sprintf("publish %s to %s", msgID, subject), err)
	}
	return ack.Sequence, nil
}

// Message is one message of a PublishBatch.
type Message struct {
	Subject, MsgID string
	Data           []byte
}

// PublishBatch publishes msgs pipelined, without waiting for each
// acknowledgement before sending the next, and returns how many of the
// first messages were acknowledged, in order. A server that syncs every
// message to disk then serves a batch at the cost of its disk writes
// rather than of one round trip and one sync per message. Ids work as in
// Publish.
func (c *Client) PublishBatch(ctx context.Context, msgs []Message) (int, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var sendErr error
	for _, m := range msgs {
		if m.MsgID == "" {
			sendErr = fmt.Errorf("publish to %s: empty message id", m.Subject)
			break
		}
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data}, jetstream.WithMsgID(m.MsgID))
		if err != nil {
			sendErr = classify(fmt.Sprintf("publish %s to %s", m.MsgID, m.Subject), err)
			break
		}
		futures = append(futures, f)
	}
	lost := c.conn.current()
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return i, classify(fmt.Sprintf("publish %s to %s", msgs[i].MsgID, msgs[i].Subject), err)
		case <-lost.Done():
			return i, classify(fmt.Sprintf("publish %s to %s", msgs[i].MsgID, msgs[i].Subject), errConnectionLost)
		case <-ctx.Done():
			return i, classify(fmt.Sprintf("publish %s to %s", msgs[i].MsgID, msgs[i].Subject), ctx.Err())
		}
	}
	return len(futures), sendErr
}

// JetStream is for components that consume; they bind to the consumers
// declared here by name rather than creating their own.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Ready reports whether the connection is up and JetStream answers, for
// /readyz.
func (c *Client) Ready(ctx context.Context) error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("nats %s: %w", c.nc.Status(), ErrUnavailable)
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return classify("jetstream account info", err)
	}
	return nil
}

// Close closes the connection; consumers created from JetStream stop.
func (c *Client) Close() { c.nc.Close() }

// errCodeNoPeersForPlacement is nats-server's JSClusterNoPeersErrF.
const errCodeNoPeersForPlacement jetstream.ErrorCode = 10005

// classify wraps err with what was being done and, when it means that no
// server answered, with ErrUnavailable: this is the one place that knows
// which NATS errors are transient.
func classify(what string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func unavailable(err error) bool {
	if errors.Is(err, errConnectionLost) {
		return true
	}
	// A caller that gave up is not evidence about the stream.
	if errors.Is(err, context.Canceled) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503 is JetStream's own "not available": disabled, no quorum,
		// no leader yet after a restart. "No suitable peers for
		// placement" (10005) is what a cluster whose servers are still
		// joining answers a declaration of a replicated stream; were the
		// cluster too small for good, the caller's retries log it.
		return apiErr.Code == http.StatusServiceUnavailable || apiErr.ErrorCode == errCodeNoPeersForPlacement
	}
	for _, target := range []error{
		context.DeadlineExceeded,
		nats.ErrTimeout,
		nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse,
		nats.ErrConnectionClosed,
		nats.ErrConnectionReconnecting,
		nats.ErrDisconnected,
		nats.ErrReconnectBufExceeded,
		nats.ErrNoServers,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
