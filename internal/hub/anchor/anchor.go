// Package anchor keeps the audit chain's head outside the database: the
// api signs the chain's head with a key the database does not hold and
// publishes it to the stream's append-only AUDIT stream after every commit
// that appended to the chain (and on a short poll, for heads written by
// other processes), and the verification of the chain
// (GET /api/v1/history/verify) checks the record of anchors (signatures,
// links, the stream itself) and then the database against every anchor. A
// forged chain that verifies on its own (a rewritten tail with recomputed
// hashes, or a tail cut off with the head moved back) then shows, and so
// does a forged, removed or replayed anchor, or a stream deleted or
// recreated.
package anchor

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// DefaultInterval is how often the head is read again when no commit of
// this process woke the publisher: it bounds how long a head written by
// another process (a submitter, the controller) stays unanchored.
const DefaultInterval = 2 * time.Second

// DefaultSpacing is the least time between two anchors: a change after a
// quiet spell is anchored at once, a stream of changes once a second, so
// that the AUDIT stream grows by at most one anchor a second.
const DefaultSpacing = time.Second

// Store is the database as a Publisher uses it: it reads the chain's head
// and checks what was appended since the last anchor, always on the
// primary, and anchors a head only once it is durable. An anchor vouches
// for entries forever, so it must not vouch for one that a failover can
// take back: one read on an asynchronous standby that was ahead of the
// synchronous one, or a commit whose wait for the standby was cut short.
type Store interface {
	ReadPrimary(ctx context.Context, fn func(*store.Tx) error) error
	DurableAuditHead(ctx context.Context, name string) (int64, string, error)
	CheckAuditAppended(ctx context.Context, after int64, afterHash string, upto, macsFrom int64) (int64, error)
}

// durableTimeout bounds the wait for a head to become durable: a primary
// cut off from its synchronous standby holds the commit until the
// failover manager demotes it.
const durableTimeout = 10 * time.Second

// durableCheck is the publisher's row of write_checks.
const durableCheck = "audit-anchor"

// Config is what a Publisher needs.
type Config struct {
	Store  Store
	Stream *stream.Client
	// Key signs the anchors (LoadKeyFile, EnsureKeyFile).
	Key ed25519.PrivateKey
	// TrustedKeys also verify anchors: the keys used before a rotation.
	TrustedKeys []ed25519.PublicKey
	Interval    time.Duration // DefaultInterval if 0
	Spacing     time.Duration // DefaultSpacing if 0
	Logger      *slog.Logger  // nil discards
	Now         func() time.Time
}

// Publisher publishes the chain's head. Several api replicas may run one
// each: every anchor is published only if the stream's last message is
// still the one its Prev names, so the replicas keep one linear record.
type Publisher struct {
	cfg   Config
	queue *reconcile.Queue[headKey]
	// published is when Run last anchored; owned by the queue's one key.
	published time.Time

	mu      sync.Mutex // serializes publishes, guards last and the fields below
	last    *published
	restart *audit.Restart // a restart asked for and not yet published
	problem error          // why the last attempt did not anchor the head; nil when it did
}

// published is the newest anchor of the record, as this publisher knows it.
type published struct {
	anchor    audit.Anchor
	digest    string
	streamSeq uint64
}

// New returns a publisher; Init prepares it and Run runs it.
func New(cfg Config) (*Publisher, error) {
	if cfg.Store == nil || cfg.Stream == nil || cfg.Key == nil {
		return nil, errors.New("anchor: store, stream and key are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Spacing <= 0 {
		cfg.Spacing = DefaultSpacing
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Publisher{cfg: cfg}
	p.queue = reconcile.New(p.reconcile, reconcile.Config[headKey]{
		Name:         "anchor",
		Resync:       func(context.Context) ([]headKey, error) { return []headKey{{}}, nil },
		ResyncPeriod: cfg.Interval,
		Logger:       cfg.Logger,
	})
	return p, nil
}

// headKey is the one key of the publisher's queue: the chain's head.
type headKey struct{}

// PublicKey is the key that verifies this publisher's anchors.
func (p *Publisher) PublicKey() ed25519.PublicKey { return p.cfg.Key.Public().(ed25519.PublicKey) }

// KeyString is PublicKey as audit.PublicKeyString writes it.
func (p *Publisher) KeyString() string { return audit.PublicKeyString(p.PublicKey()) }

// Record reads and checks the whole record (Read) with this publisher's
// key and the trusted ones.
func (p *Publisher) Record(ctx context.Context, chainSeq int64) (Record, error) {
	return Read(ctx, p.cfg.Stream, p.keys(), chainSeq)
}

func (p *Publisher) keys() audit.Keys {
	return audit.NewKeys(append([]ed25519.PublicKey{p.PublicKey()}, p.cfg.TrustedKeys...)...)
}

// CanRestart returns ErrRecordExists while the stream holds a record.
func (p *Publisher) CanRestart(ctx context.Context) error {
	info, err := p.streamInfo(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs > 0 {
		return fmt.Errorf("%w, %d messages long: a new record begins only in an empty stream", ErrRecordExists, info.State.Msgs)
	}
	return nil
}

// Init declares the AUDIT stream and publishes the head once, so that the
// record of a new installation begins with the empty chain before the api
// accepts the first change. Call it before serving; a record that cannot
// be continued (Problem) is logged, not an error, so that the api still
// serves, and verification says why.
func (p *Publisher) Init(ctx context.Context) error {
	if err := p.cfg.Stream.DeclareAudit(ctx); err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	p.publish(ctx)
	return nil
}

// Notify wakes the publisher after a commit that appended to the chain;
// it never blocks.
func (p *Publisher) Notify() { p.queue.Add(headKey{}) }

// Problem says why the head is not anchored, or nil when it is.
func (p *Publisher) Problem() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.problem
}

// Run publishes the head whenever Notify wakes it and every Interval
// (lengthened by up to a fifth), when it moved since the last anchor,
// until ctx is done. It is a queue of one key, the head, on the reconcile
// scaffold: Notify adds it and the poll is the queue's resync.
func (p *Publisher) Run(ctx context.Context) error { return p.queue.Run(ctx) }

// reconcile anchors the head, no sooner than Spacing after the last
// anchor: commits that land meanwhile share the next one.
func (p *Publisher) reconcile(ctx context.Context, _ headKey) (reconcile.Result, error) {
	if wait := p.cfg.Spacing - time.Since(p.published); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	p.publish(ctx)
	p.published = time.Now()
	return reconcile.Result{}, nil
}

// ErrRecordExists refuses a restart while the stream holds a record.
var ErrRecordExists = errors.New("the AUDIT stream holds a record of anchors")

// Restart begins a new record in an empty AUDIT stream over the chain as
// it is, for an administrator (actor) who recorded why (reason) in the
// chain already: after a restore of the database, or once the old record
// is gone. It returns once the restart anchor is published.
func (p *Publisher) Restart(ctx context.Context, actor, reason string) error {
	if err := p.CanRestart(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	p.restart = &audit.Restart{Actor: actor, Reason: reason}
	p.mu.Unlock()
	p.publish(ctx)
	return p.Problem()
}

// publish anchors the head, logging one line when anchoring starts or
// stops failing.
func (p *Publisher) publish(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	_ = reconcile.Retry(ctx, reconcile.Backoff(10*time.Millisecond, 10*time.Millisecond), func(ctx context.Context, attempt int) error {
		err = p.publishLocked(ctx)
		if !errors.Is(err, stream.ErrWrongLastSequence) || attempt == 5 {
			return reconcile.Terminal(err)
		}
		// Another replica published first: continue its record.
		p.last = nil
		return err
	})
	if ctx.Err() != nil {
		return
	}
	switch {
	case err == nil && p.problem != nil:
		p.cfg.Logger.Info("the audit chain's head is anchored again")
	case err != nil && (p.problem == nil || p.problem.Error() != err.Error()):
		p.cfg.Logger.Error("cannot anchor the audit chain's head", "error", err)
	}
	p.problem = err
}

func (p *Publisher) publishLocked(ctx context.Context) error {
	created, err := p.load(ctx)
	if err != nil {
		return err
	}
	var seq int64
	var hash string
	if err := p.cfg.Store.ReadPrimary(ctx, func(tx *store.Tx) (err error) {
		seq, hash, err = tx.Audit().Head(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("read the audit chain's head: %w", err)
	}
	if last := p.last; last != nil && seq == last.anchor.Seq && hash == last.anchor.Hash {
		return nil // anchored already
	}
	durable, cancel := context.WithTimeout(ctx, durableTimeout)
	seq, hash, err = p.cfg.Store.DurableAuditHead(durable, durableCheck)
	cancel()
	if err != nil {
		return fmt.Errorf("make the audit chain's head durable before anchoring it: %w", err)
	}
	next := audit.Anchor{Seq: seq, Hash: hash, Stream: created, PublishedAt: p.cfg.Now().UTC()}
	var after uint64
	if last := p.last; last == nil {
		next.N = 1
		switch {
		case p.restart != nil:
			next.Restart = p.restart
		case seq > 0:
			// Beginning a record here would vouch for whatever the
			// database holds now, which is what the record exists to
			// check.
			return fmt.Errorf("the AUDIT stream holds no anchor, but the audit chain has %d entries: it was deleted or recreated; once that is understood, an administrator begins a new record (POST /api/v1/history/anchors/restart)", seq)
		}
	} else {
		switch {
		case seq == last.anchor.Seq && hash == last.anchor.Hash:
			return nil // anchored already
		case seq < last.anchor.Seq:
			return fmt.Errorf("refusing to anchor: the audit chain ends at seq %d, but seq %d was anchored: entries were removed", seq, last.anchor.Seq)
		}
		if last.anchor.Seq > 0 {
			var at string
			if err := p.cfg.Store.ReadPrimary(ctx, func(tx *store.Tx) (err error) {
				at, err = tx.Audit().Hash(ctx, last.anchor.Seq)
				return err
			}); err != nil {
				return fmt.Errorf("read audit entry %d: %w", last.anchor.Seq, err)
			}
			if at != last.anchor.Hash {
				return fmt.Errorf("refusing to anchor: audit entry %d no longer has the hash anchored for it: the chain was rewritten", last.anchor.Seq)
			}
		}
		// An anchor vouches for every entry up to its head: only for
		// entries that link, were written by purser and keep time.
		macsFrom, err := p.cfg.Store.CheckAuditAppended(ctx, last.anchor.Seq, last.anchor.Hash, seq, last.anchor.MACsFrom)
		if err != nil {
			var ce *audit.ChainError
			if errors.As(err, &ce) {
				return fmt.Errorf("refusing to anchor the chain past entry %d: entry %d: %s", last.anchor.Seq, ce.Seq, ce.Reason)
			}
			return err
		}
		next.MACsFrom = macsFrom
		next.N, next.Prev, after = last.anchor.N+1, last.digest, last.streamSeq
	}
	msg, err := audit.Sign(next, p.cfg.Key)
	if err != nil {
		return err
	}
	digest := audit.Digest(msg)
	streamSeq, err := p.cfg.Stream.PublishAfter(ctx, stream.SubjectAuditAnchors, "anchor-"+digest, msg, after)
	if err != nil {
		// Whatever happened (another replica first, the stream gone, an
		// ack lost), read the stream again before the next anchor.
		p.last = nil
		return err
	}
	next.Key = audit.PublicKeyString(p.PublicKey())
	p.last = &published{anchor: next, digest: digest, streamSeq: streamSeq}
	p.restart = nil
	return nil
}

// load reads the record's newest anchor when this publisher does not know
// it (at start, or after another replica published), and returns what the
// stream says of itself.
func (p *Publisher) load(ctx context.Context) (time.Time, error) {
	if p.last != nil {
		// Trusted until a publish finds the stream moved (another
		// replica's anchor) or gone: the compare-and-swap tells.
		return p.last.anchor.Stream, nil
	}
	info, err := p.streamInfo(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if info.State.Msgs == 0 {
		return info.Created, nil
	}
	s, err := p.cfg.Stream.JetStream().Stream(ctx, stream.AuditStream)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the AUDIT stream: %w", err)
	}
	raw, err := s.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the newest anchor: %w", err)
	}
	// After a rotation the newest anchor is the old key's: the record
	// goes on under the new one.
	a, err := audit.OpenAnchor(raw.Data, p.keys())
	if err != nil {
		return time.Time{}, fmt.Errorf("the AUDIT stream's newest message (%d) is not an anchor of a trusted key: %w; the record cannot be continued", raw.Sequence, err)
	}
	if !a.Stream.Equal(info.Created) {
		return time.Time{}, fmt.Errorf("the AUDIT stream's newest anchor was written to a stream created at %s, not to this one: the record cannot be continued", a.Stream.UTC().Format(time.RFC3339Nano))
	}
	p.last = &published{anchor: a, digest: audit.Digest(raw.Data), streamSeq: raw.Sequence}
	return info.Created, nil
}

func (p *Publisher) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	s, err := p.cfg.Stream.JetStream().Stream(ctx, stream.AuditStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, errors.New("the AUDIT stream does not exist: it was deleted")
	}
	if err != nil {
		return nil, fmt.Errorf("read the AUDIT stream: %w", err)
	}
	return s.CachedInfo(), nil
}
