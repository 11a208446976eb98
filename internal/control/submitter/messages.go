package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The submissions a submitter holds: each names a runnable to queue, and
// is settled by the first reconcile of that runnable to start after it
// arrived, once it has ended: acked when it committed, given back to the
// stream with the retry's delay when it failed, at once at shutdown.

// heldMessages are the messages about one runnable, and whether a
// reconcile of it is under way.
type heldMessages struct {
	waiting  []jetstream.Msg // arrived since the last reconcile started
	inflight []jetstream.Msg // covered by the reconcile under way
	running  bool
	// returning are the stream sequences of messages given back with the
	// retry's delay, until the runnable's reconcile commits. When one comes
	// back, the runnable's own retry (due or under way) covers it: queueing
	// it again would run that retry twice, and count its cluster's
	// failures twice.
	returning map[uint64]bool
}

func (h *heldMessages) empty() bool {
	return len(h.waiting) == 0 && len(h.inflight) == 0 && !h.running && len(h.returning) == 0
}

// consume pulls submissions and queues their runnables until ctx is done.
// A pull that fails is retried with backoff, started afresh once one
// succeeds.
func (s *Submitter) consume(ctx context.Context) {
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		_ = reconcile.Retry(ctx, reconcile.Backoff(retryBase, retryMax), func(ctx context.Context, _ int) error {
			if cons == nil {
				c, err := s.cfg.Stream.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
				if err != nil {
					if ctx.Err() == nil {
						s.log.Warn("submissions consumer not available; retrying", "error", err)
					}
					return err
				}
				cons = c
			}
			if err := s.pull(ctx, cons); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("fetching submissions failed; retrying", "error", err)
				}
				cons = nil // the stream may have restarted; bind again
				return err
			}
			return nil
		})
	}
}

// pull fetches one batch, as large as the free slots allow, and holds its
// messages; a fetch that found nothing is not a failure.
func (s *Submitter) pull(ctx context.Context, cons jetstream.Consumer) error {
	n := s.acquireSlots(ctx)
	if n == 0 {
		return ctx.Err()
	}
	fctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
	got := 0
	if err == nil {
		for m := range batch.Messages() {
			got++
			s.hold(m)
		}
		err = batch.Error()
	}
	s.releaseSlots(n - got)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) {
		return nil
	}
	return err
}

// acquireSlots waits for at least one free slot and takes up to a batch
// of them; 0 means ctx is done.
func (s *Submitter) acquireSlots(ctx context.Context) int {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < 64 {
		select {
		case s.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (s *Submitter) releaseSlots(n int) {
	for range n {
		<-s.slots
	}
}

// hold decodes a message and queues its runnable; the message waits for
// the reconcile. A message that can never be read is terminated: it can
// name no runnable, and the rescan covers whatever it was about.
func (s *Submitter) hold(m jetstream.Msg) {
	var sub stream.Submission
	if err := json.Unmarshal(m.Data(), &sub); err != nil || sub.UID == "" {
		s.log.Error("malformed submission dropped", "data", string(m.Data()), "error", err)
		_ = m.Term()
		s.releaseSlots(1)
		return
	}
	s.metrics.messages.WithLabelValues(sub.Event).Inc()
	seq, _ := sequence(m)
	s.mu.Lock()
	h := s.held[sub.UID]
	if h == nil {
		h = &heldMessages{}
		s.held[sub.UID] = h
	}
	if h.returning[seq] {
		// Given back by this replica's failed reconcile: the retry of that
		// failure, under way or due, covers it.
		delete(h.returning, seq)
		switch {
		case h.running:
			h.inflight = append(h.inflight, m)
			s.mu.Unlock()
			return
		case s.queue.Failures(sub.UID) > 0:
			h.waiting = append(h.waiting, m)
			s.mu.Unlock()
			return
		}
	}
	h.waiting = append(h.waiting, m)
	s.mu.Unlock()
	s.queue.Add(sub.UID)
}

// sequence is m's position in the stream, the same on every delivery.
func sequence(m jetstream.Msg) (uint64, bool) {
	meta, err := m.Metadata()
	if err != nil {
		return 0, false
	}
	return meta.Sequence.Stream, true
}

// begin starts a reconcile of uid: the messages waiting are covered by
// it, those arriving from now on by the next one.
func (s *Submitter) begin(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[uid]
	if h == nil {
		h = &heldMessages{}
		s.held[uid] = h
	}
	h.inflight = append(h.inflight, h.waiting...)
	h.waiting = nil
	h.running = true
}

// settle is the queue's word on a reconcile of uid that ended with err,
// to run again after again (0: not unless queued): its messages are
// acked once it committed, terminated when it failed for good, given back
// at once when the submitter stops, and otherwise given back with the
// retry's delay, for whichever replica is alive then.
func (s *Submitter) settle(uid string, err error, again time.Duration) {
	s.mu.Lock()
	h := s.held[uid]
	if h == nil {
		s.mu.Unlock()
		return
	}
	msgs := h.inflight
	if !h.running {
		// The gate held the runnable: this pass stands for a reconcile
		// that started now.
		msgs, h.waiting = h.waiting, nil
	}
	h.inflight, h.running = nil, false
	how := func(m jetstream.Msg) error { return m.NakWithDelay(again) }
	switch {
	case err == nil:
		how = jetstream.Msg.Ack
		clear(h.returning)
	case reconcile.IsTerminal(err):
		how = jetstream.Msg.Term
		clear(h.returning)
	case again == 0:
		// Stopping: the message goes back to the stream at once, for
		// another replica, rather than after AckWait.
		how = jetstream.Msg.Nak
	default:
		for _, m := range msgs {
			if seq, ok := sequence(m); ok {
				if h.returning == nil {
					h.returning = map[uint64]bool{}
				}
				h.returning[seq] = true
			}
		}
	}
	if h.empty() {
		delete(s.held, uid)
	}
	s.mu.Unlock()
	s.answer(uid, msgs, how)
}

// answer settles msgs, which are no longer held, and frees their slots.
func (s *Submitter) answer(uid string, msgs []jetstream.Msg, how func(jetstream.Msg) error) {
	for _, m := range msgs {
		if err := how(m); err != nil {
			// The stream redelivers an unsettled message after AckWait,
			// and the reconcile is idempotent, so this costs only time.
			s.log.Warn("settling a submission failed", "runnable", uid, "error", err)
		}
	}
	s.releaseSlots(len(msgs))
}

// releaseAll gives every held message back to the stream at shutdown.
func (s *Submitter) releaseAll() {
	s.mu.Lock()
	var msgs []jetstream.Msg
	for uid, h := range s.held {
		msgs = append(msgs, h.waiting...)
		msgs = append(msgs, h.inflight...)
		delete(s.held, uid)
	}
	s.mu.Unlock()
	for _, m := range msgs {
		_ = m.Nak()
	}
	s.releaseSlots(len(msgs))
}

// reportProgress keeps held messages from being redelivered to another
// replica while they wait in the queue or in a long reconcile.
func (s *Submitter) reportProgress(context.Context) {
	s.mu.Lock()
	var msgs []jetstream.Msg
	for _, h := range s.held {
		msgs = append(msgs, h.waiting...)
		msgs = append(msgs, h.inflight...)
	}
	s.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}
