package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// memSource is the outbox table in memory: the database belongs to
// another package, and what is tested here is the relay's use of it.
type memSource struct {
	mu          sync.Mutex
	rows        []outbox.Message // ascending ID, like the table's index
	nextID      int64
	failPending int // the next failPending calls of Pending fail
	failDeletes int // the next failDeletes calls of Delete fail
	pendingCall chan struct{}
	deleted     chan struct{}
}

func newMemSource() *memSource {
	return &memSource{pendingCall: make(chan struct{}, 1), deleted: make(chan struct{}, 1)}
}

// add commits n rows, as the API would in its transactions.
func (s *memSource) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.nextID++
		id := fmt.Sprintf("submission-%d", s.nextID)
		s.rows = append(s.rows, outbox.Message{ID: s.nextID, Subject: stream.SubjectSubmissions, MsgID: id, Data: []byte(id)})
	}
}

func (s *memSource) Pending(ctx context.Context, limit int) ([]outbox.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	signal(s.pendingCall)
	if s.failPending > 0 {
		s.failPending--
		return nil, errors.New("database is restarting")
	}
	return slices.Clone(s.rows[:min(limit, len(s.rows))]), nil
}

func (s *memSource) Delete(ctx context.Context, ids []int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failDeletes > 0 {
		s.failDeletes--
		return errors.New("relay crashed before delete")
	}
	s.rows = slices.DeleteFunc(s.rows, func(m outbox.Message) bool { return slices.Contains(ids, m.ID) })
	signal(s.deleted)
	return nil
}

func (s *memSource) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// waitEmpty waits until every row has been deleted.
func (s *memSource) waitEmpty(ctx context.Context, t *testing.T) {
	t.Helper()
	for s.len() > 0 {
		select {
		case <-s.deleted:
		case <-ctx.Done():
			t.Fatalf("%d rows still in the outbox: %v", s.len(), ctx.Err())
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// countingPublisher is the real stream client, counted.
type countingPublisher struct {
	*stream.Client
	calls atomic.Int64
}

func (p *countingPublisher) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	p.calls.Add(1)
	return p.Client.Publish(ctx, subject, msgID, data)
}

// PublishBatch counts each message sent, as Publish does.
func (p *countingPublisher) PublishBatch(ctx context.Context, msgs []stream.Message) (int, error) {
	p.calls.Add(int64(len(msgs)))
	return p.Client.PublishBatch(ctx, msgs)
}

// run runs the relay until the test ends and checks that Run returns nil.
func run(t *testing.T, r *outbox.Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// stored returns the message ids on the submissions stream, in order.
func stored(t *testing.T, c *stream.Client) []string {
	t.Helper()
	ctx := streamtest.Context(t)
	s, err := c.JetStream().Stream(ctx, stream.SubmissionsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func wantIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("submission-%d", i+1)
	}
	return ids
}

func TestRelayPublishesAndDeletes(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	src := newMemSource()
	// Rows committed before the relay starts are those of a process that
	// crashed between commit and publish: they go out at start.
	src.add(250)

	r := outbox.NewRelay(src, c, outbox.Config{Batch: 100})
	run(t, r)
	src.waitEmpty(streamtest.Context(t), t)

	if got := stored(t, c); !slices.Equal(got, wantIDs(250)) {
		t.Errorf("stream holds %d messages %v..., want submission-1..250 in order", len(got), got[:min(3, len(got))])
	}
	if st := r.Stats(); st.Published != 250 || st.Errors != 0 {
		t.Errorf("stats %+v, want 250 published and no error", st)
	}
}

func TestRelayNotifyLatency(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	src := newMemSource()
	const interval = 10 * time.Second
	r := outbox.NewRelay(src, c, outbox.Config{Interval: interval})
	run(t, r)
	// After its first (empty) read the relay sleeps for the interval;
	// only Notify can make it publish the rows below sooner.
	<-src.pendingCall

	var latencies []time.Duration
	for range 5 {
		src.add(1)
		start := time.Now()
		r.Notify()
		ctx, cancel := context.WithTimeout(t.Context(), interval/2)
		src.waitEmpty(ctx, t)
		cancel()
		latencies = append(latencies, time.Since(start))
	}
	t.Logf("commit-to-delete latencies with a %v interval: %v", interval, latencies)
	// Machine speed must not fail the test: the bound only separates
	// "woken by Notify" (milliseconds) from "woken by the poll" (10s).
	for _, l := range latencies {
		if l > interval/5 {
			t.Errorf("latency %v: Notify did not wake the relay", l)
		}
	}
}

func TestRelayStreamOutage(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	src := newMemSource()
	src.add(50)
	// A previous relay published the first ten rows and crashed before
	// deleting them: they must not be stored twice.
	ctx := streamtest.Context(t)
	for _, m := range must(src.Pending(ctx, 10)) {
		if err := c.Publish(ctx, m.Subject, m.MsgID, m.Data); err != nil {
			t.Fatal(err)
		}
	}

	srv.Stop()
	pub := &countingPublisher{Client: c}
	r := outbox.NewRelay(src, pub, outbox.Config{Interval: 50 * time.Millisecond})
	run(t, r)
	sandboxtest.Eventually(t, streamtest.Timeout, "the relay to retry three times", func(context.Context) error {
		if n := r.Stats().Errors; n < 3 {
			return fmt.Errorf("%d errors", n)
		}
		return nil
	})
	if n := src.len(); n != 50 {
		t.Fatalf("%d rows left while the stream is down, want 50", n)
	}
	st := r.Stats()
	if !errors.Is(st.LastError, stream.ErrUnavailable) || st.Published != 0 {
		t.Errorf("stats while down: %+v, want ErrUnavailable and nothing published", st)
	}

	t.Logf("%v: restarting", time.Now().Format("15:04:05.000"))
	srv.Restart()
	t.Logf("%v: restarted", time.Now().Format("15:04:05.000"))
	src.waitEmpty(streamtest.Context(t), t)
	if got := stored(t, c); !slices.Equal(got, wantIDs(50)) {
		t.Errorf("stream holds %d messages, want each of the 50 rows once: %v", len(got), got)
	}
	t.Logf("%v: delivered", time.Now().Format("15:04:05.000"))
	t.Logf("%d failed passes, %d publish calls", r.Stats().Errors, pub.calls.Load())
}

func TestRelayDeleteFailsAfterPublish(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	src := newMemSource()
	src.add(20)
	src.failDeletes = 1
	pub := &countingPublisher{Client: c}

	r := outbox.NewRelay(src, pub, outbox.Config{})
	run(t, r)
	src.waitEmpty(streamtest.Context(t), t)

	// Every row went out twice: once before the failed delete, once after.
	if n := pub.calls.Load(); n != 40 {
		t.Errorf("%d publish calls, want 40", n)
	}
	if got := stored(t, c); !slices.Equal(got, wantIDs(20)) {
		t.Errorf("stream holds %d messages, want each of the 20 rows once: %v", len(got), got)
	}
	if st := r.Stats(); st.Errors != 1 {
		t.Errorf("stats %+v, want one error", st)
	}
}

func TestRelaySourceFails(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	src := newMemSource()
	src.add(5)
	src.failPending = 2

	r := outbox.NewRelay(src, c, outbox.Config{})
	run(t, r)
	src.waitEmpty(streamtest.Context(t), t)
	if got := stored(t, c); !slices.Equal(got, wantIDs(5)) {
		t.Errorf("stream holds %v", got)
	}
	if st := r.Stats(); st.Errors != 2 || st.LastError == nil {
		t.Errorf("stats %+v, want two errors", st)
	}
}

func TestRelayRunsOnce(t *testing.T) {
	// Two loops of one relay would only double the publishes.
	src := newMemSource()
	r := outbox.NewRelay(src, nil, outbox.Config{Interval: time.Hour})
	run(t, r)
	<-src.pendingCall
	if err := r.Run(streamtest.Context(t)); err == nil {
		t.Error("second Run of a running relay: no error")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
