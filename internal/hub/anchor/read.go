package anchor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/stream"
)

// Record is a record of anchors read back and checked.
type Record struct {
	Anchors []audit.Anchor
	// Newest is the newest anchor's signed message, for a client to check
	// the signature with a key of its own.
	Newest []byte
}

// Read reads the whole record from the AUDIT stream and checks it
// (audit.CheckRecord) against keys, for a chain of chainSeq entries (read
// before calling, so that every honest anchor is at or above it). A record
// that does not check is an *audit.RecordError; other errors are failures
// to read it.
func Read(ctx context.Context, c *stream.Client, keys audit.Keys, chainSeq int64) (Record, error) {
	js := c.JetStream()
	s, err := js.Stream(ctx, stream.AuditStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return Record{}, &audit.RecordError{Reason: "the AUDIT stream does not exist: it was deleted"}
	}
	if err != nil {
		return Record{}, fmt.Errorf("read audit anchors: %w", err)
	}
	info := s.CachedInfo()
	st := audit.RecordStream{
		Created:  info.Created,
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs,
		AppendOnly: appendOnly(info.Config),
	}
	var msgs []audit.RecordMessage
	if info.State.Msgs > 0 {
		if msgs, err = readAll(ctx, s, info.State.LastSeq); err != nil {
			return Record{}, err
		}
	}
	anchors, rerr := audit.CheckRecord(st, msgs, keys, chainSeq)
	if rerr != nil {
		return Record{}, rerr
	}
	rec := Record{Anchors: anchors}
	if len(msgs) > 0 {
		rec.Newest = msgs[len(msgs)-1].Data
	}
	return rec, nil
}

// appendOnly: nothing but an administrator's removal of the whole stream
// can take a message out of it.
func appendOnly(cfg jetstream.StreamConfig) bool {
	return cfg.DenyDelete && cfg.DenyPurge && !cfg.AllowRollup && !cfg.AllowMsgTTL &&
		cfg.MaxAge == 0 && cfg.MaxMsgs <= 0 && cfg.MaxBytes <= 0 && cfg.MaxMsgsPerSubject <= 0
}

func readAll(ctx context.Context, s jetstream.Stream, last uint64) ([]audit.RecordMessage, error) {
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("read audit anchors: %w", err)
	}
	var out []audit.RecordMessage
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
			out = append(out, audit.RecordMessage{Seq: meta.Sequence.Stream, Data: msg.Data()})
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
