// Package outbox moves the rows of the database outbox to the stream.
//
// The API writes an outbox row in the same database transaction as the
// change it announces, so a change is never committed without its message
// nor announced without being committed. The Relay then publishes each row
// and deletes it only after JetStream has acknowledged it:
//
//   - a crash between commit and publish loses nothing: the row is still in
//     the database and is published at the next start;
//   - a crash between publish and delete publishes the row again, and the
//     stream drops the copy because it carries the same message id.
//
// The second guarantee holds within the stream's duplicate window (two
// minutes); consumers are idempotent anyway, as every component of purser
// is, so a copy that slips past it (a database down for longer than that
// between publish and delete) is harmless.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Message is one outbox row.
type Message struct {
	ID      int64
	Subject string
	// MsgID is chosen when the row is written, so every publish of the
	// row carries the same id and the stream can deduplicate.
	MsgID string
	Data  []byte
}

// Source is the outbox table.
type Source interface {
	// Pending returns up to limit rows, oldest first.
	Pending(ctx context.Context, limit int) ([]Message, error)
	// Delete removes rows; deleting a row that is already gone is not an
	// error, since two relays may race on the same rows.
	Delete(ctx context.Context, ids []int64) error
}

// Publisher stores a message on the stream and returns once it is
// acknowledged, deduplicating by msgID.
type Publisher interface {
	Publish(ctx context.Context, subject, msgID string, data []byte) error
}

// Config tunes a Relay; the zero value is usable.
type Config struct {
	// Interval between polls of the outbox, lengthened by up to a fifth.
	// It is only a safety net: for rows whose commit was not followed by
	// a Notify, such as those of a process that crashed right after it.
	// Default 1s.
	Interval time.Duration
	// Batch is the most rows read, published and deleted at a time.
	// Default 100.
	Batch int
	// Logger receives failures and recoveries; nil discards them.
	Logger *slog.Logger
}

// RelayStats is a snapshot of a Relay's counters, for metrics.
type RelayStats struct {
	// Published counts rows that the stream acknowledged, including
	// re-publishes of rows whose delete had failed.
	Published uint64
	// Errors counts failed passes: reading, publishing or deleting.
	Errors uint64
	// LastError is the most recent failure, nil if there was none.
	LastError error
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// PendingSeen is how many rows the last read of the outbox returned: a
	// backlog estimate, capped at Batch.
	PendingSeen int
}

const (
	defaultInterval = time.Second
	defaultBatch    = 100

	backoffBase = 100 * time.Millisecond
	backoffCap  = 5 * time.Second

	// publishTimeout bounds one publish, so that a stream that accepts a
	// connection but never answers cannot stall the relay; the row is
	// simply retried.
	publishTimeout = 5 * time.Second
	// deleteTimeout bounds the delete of rows already published. It runs
	// even when Run's context is done: deleting now is cheaper than a
	// re-publish at the next start that only the duplicate window absorbs.
	deleteTimeout = 5 * time.Second
)

// Relay publishes outbox rows in order and deletes them once acknowledged.
// Several relays (one per API replica) may run on the same outbox: they
// publish the same rows, the stream keeps one copy, and deletes are
// idempotent.
type Relay struct {
	src      Source
	pub      Publisher
	interval time.Duration
	batch    int
	log      *slog.Logger

	// queue is Run's, nil while it does not run. Any number of commits
	// during a pass need only one more pass, which its key gives.
	queue   atomic.Pointer[reconcile.Queue[relayKey]]
	running atomic.Bool
	failing atomic.Bool // the last pass failed: its retry waits out its backoff

	mu    sync.Mutex
	stats RelayStats
}

// NewRelay returns a relay from src to pub; Run starts it.
func NewRelay(src Source, pub Publisher, cfg Config) *Relay {
	r := &Relay{
		src:      src,
		pub:      pub,
		interval: cfg.Interval,
		batch:    cfg.Batch,
		log:      cfg.Logger,
	}
	if r.interval <= 0 {
		r.interval = defaultInterval
	}
	if r.batch <= 0 {
		r.batch = defaultBatch
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Notify asks for a pass now, so that a row is published right after its
// commit rather than at the next poll. It never blocks; the caller calls
// it after the transaction commits (before, the row would not be visible).
// While the relay backs off after a failure it changes nothing: a busy
// API would otherwise retry a down stream at its commit rate, and the
// retry's pass sees the row anyway.
func (r *Relay) Notify() {
	if q := r.queue.Load(); q != nil && !r.failing.Load() {
		q.Add(relayKey{})
	}
}

// Run relays until ctx is done, then returns nil. A failure never drops a
// row: the pass stops at the failed row, keeps it and everything after it,
// and the relay retries after an exponential backoff with jitter. Rows are
// published in the order Pending returns them, and a row that keeps failing
// holds back the ones behind it; Stats shows it.
//
// The relay is a queue of one key, the whole outbox, on the reconcile
// scaffold: a pass is its reconcile, Notify adds the key, the poll every
// Interval is the queue's resync (which leaves a key in backoff alone),
// and a failure the key's backoff.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("outbox relay: already running")
	}
	defer r.running.Store(false)
	r.failing.Store(false) // a failure of an earlier Run is not this one's to wait out
	q := reconcile.New(r.reconcile, reconcile.Config[relayKey]{
		Name:         "outbox relay",
		Resync:       func(context.Context) ([]relayKey, error) { return []relayKey{{}}, nil },
		ResyncPeriod: r.interval,
		RetryBase:    backoffBase,
		RetryMax:     backoffCap,
		Done: func(_ relayKey, err error, again time.Duration) {
			if err != nil && ctx.Err() == nil {
				r.recordError(err)
				r.log.Warn("outbox relay failed; retrying", "error", err, "in", again)
			}
		},
	})
	r.queue.Store(q)
	defer r.queue.Store(nil)
	return q.Run(ctx)
}

// relayKey is the one key of a relay's queue: the whole outbox.
type relayKey struct{}

// reconcile is one pass.
func (r *Relay) reconcile(ctx context.Context, _ relayKey) (reconcile.Result, error) {
	more, err := r.pass(ctx)
	if err != nil {
		// Set before the queue schedules the retry, so that no Notify
		// in between cuts the backoff short.
		r.failing.Store(true)
		return reconcile.Result{}, err
	}
	if r.failing.Swap(false) {
		r.log.Info("outbox relay recovered")
	}
	if more {
		// A full batch: the outbox may hold more right now. A key added
		// while it is reconciled runs once more after.
		r.Notify()
	}
	return reconcile.Result{}, nil
}

// pass reads one batch, publishes it in order, and deletes what the stream
// acknowledged. more reports a full batch with no failure.
func (r *Relay) pass(ctx context.Context) (more bool, err error) {
	msgs, err := r.src.Pending(ctx, r.batch)
	if err != nil {
		return false, fmt.Errorf("read outbox: %w", err)
	}
	r.mu.Lock()
	r.stats.PendingSeen = len(msgs)
	r.mu.Unlock()

	published := make([]int64, 0, len(msgs))
	n, pubErr := r.publishAll(ctx, msgs)
	for _, m := range msgs[:n] {
		published = append(published, m.ID)
	}
	r.mu.Lock()
	r.stats.Published += uint64(len(published))
	r.mu.Unlock()

	if len(published) > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		if err := r.src.Delete(dctx, published); err != nil {
			// The rows stay and are published again; the stream drops
			// the copies.
			return false, errors.Join(pubErr, fmt.Errorf("delete %d published outbox rows: %w", len(published), err))
		}
	}
	return pubErr == nil && len(msgs) == r.batch, pubErr
}

// BatchPublisher is a Publisher that pipelines a batch and says how many
// of its first messages were acknowledged; *stream.Client is one.
type BatchPublisher interface {
	PublishBatch(ctx context.Context, msgs []stream.Message) (int, error)
}

// publishAll publishes msgs in order and returns how many of the first
// ones the stream acknowledged, pipelined when the publisher can.
func (r *Relay) publishAll(ctx context.Context, msgs []Message) (int, error) {
	bp, ok := r.pub.(BatchPublisher)
	if !ok {
		for i, m := range msgs {
			if err := r.publish(ctx, m); err != nil {
				return i, err
			}
		}
		return len(msgs), nil
	}
	batch := make([]stream.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = stream.Message{Subject: m.Subject, MsgID: m.MsgID, Data: m.Data}
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	n, err := bp.PublishBatch(ctx, batch)
	if err != nil {
		err = fmt.Errorf("relay outbox row %d: %w", msgs[n].ID, err)
	}
	return n, err
}

func (r *Relay) publish(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := r.pub.Publish(ctx, m.Subject, m.MsgID, m.Data); err != nil {
		return fmt.Errorf("relay outbox row %d: %w", m.ID, err)
	}
	return nil
}

func (r *Relay) recordError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Errors++
	r.stats.LastError = err
	r.stats.LastErrorAt = time.Now()
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}
