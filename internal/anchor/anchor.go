// Package anchor keeps the audit chain's head outside the database: the
// api publishes it to the stream's append-only AUDIT stream every few
// seconds while the chain grows, and the verification of the chain
// (GET /api/v1/history/verify) checks the database against every head
// published. A forged chain that verifies on its own (a rewritten tail with
// recomputed hashes, or a tail cut off with the head moved back) then
// shows, unless the stream was rewritten too.
package anchor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/backoff"
	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/stream"
)

// DefaultInterval is how often the head is published while it moves: a
// rewrite of entries younger than this goes unseen until the next one.
const DefaultInterval = 10 * time.Second

// Config is what Run needs.
type Config struct {
	Store    *store.Store
	Stream   *stream.Client
	Interval time.Duration // DefaultInterval if 0
	Logger   *slog.Logger  // nil discards
	Now      func() time.Time
}

// Run publishes the chain's head every Interval when it moved since the
// last publish, until ctx is done. Several api replicas may run it: the
// message id names the head, so the stream keeps one copy of each.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Store == nil || cfg.Stream == nil {
		return errors.New("anchor: store and stream are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var published int64
	failing := false
	for {
		seq, err := publishHead(ctx, cfg, published)
		switch {
		case err == nil:
			published = seq
			if failing {
				cfg.Logger.Info("publishing the audit chain's head again", "seq", seq)
				failing = false
			}
		case ctx.Err() == nil && !failing:
			// One line per outage; the next tick tries again.
			cfg.Logger.Warn("cannot publish the audit chain's head; retrying", "error", err)
			failing = true
		}
		if !backoff.Sleep(ctx, backoff.Jitter(cfg.Interval)) {
			return nil
		}
	}
}

// publishHead publishes the head unless it is still the one published
// last, and returns its seq.
func publishHead(ctx context.Context, cfg Config, last int64) (int64, error) {
	var seq int64
	var hash string
	if err := cfg.Store.Read(ctx, func(tx *store.Tx) (err error) {
		seq, hash, err = tx.AuditHead(ctx)
		return err
	}); err != nil {
		return last, err
	}
	if seq == 0 || seq == last {
		return seq, nil
	}
	data, err := json.Marshal(audit.Anchor{Seq: seq, Hash: hash, PublishedAt: cfg.Now().UTC()})
	if err != nil {
		return last, err
	}
	if err := cfg.Stream.Publish(ctx, stream.SubjectAuditAnchors, fmt.Sprintf("anchor-%d-%s", seq, hash), data); err != nil {
		return last, err
	}
	return seq, nil
}

// Read returns every head published so far, oldest first.
func Read(ctx context.Context, c *stream.Client) ([]audit.Anchor, error) {
	js := c.JetStream()
	s, err := js.Stream(ctx, stream.AuditStream)
	if err != nil {
		return nil, fmt.Errorf("read audit anchors: %w", err)
	}
	last := s.CachedInfo().State.LastSeq
	if s.CachedInfo().State.Msgs == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("read audit anchors: %w", err)
	}
	var out []audit.Anchor
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read audit anchors: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				return nil, fmt.Errorf("read audit anchors: %w", err)
			}
			var a audit.Anchor
			if err := json.Unmarshal(msg.Data(), &a); err != nil {
				return nil, fmt.Errorf("read audit anchors: message %d: %w", meta.Sequence.Stream, err)
			}
			out = append(out, a)
			if meta.Sequence.Stream >= last {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("read audit anchors: %w", err)
		}
		if got == 0 {
			return nil, fmt.Errorf("read audit anchors: the stream holds up to message %d, but none came", last)
		}
	}
}
