package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

func TestEmbeddedRandomPort(t *testing.T) {
	a := streamtest.Start(t, "")
	b := streamtest.Start(t, "")
	if a.URL == b.URL {
		t.Fatalf("two servers share %s", a.URL)
	}
	for _, srv := range []*streamtest.Server{a, b} {
		if !strings.HasPrefix(srv.URL, "nats://127.0.0.1:") || strings.HasSuffix(srv.URL, ":4222") {
			t.Errorf("ClientURL %s: want a random port on 127.0.0.1", srv.URL)
		}
		if err := streamtest.Connect(t, srv.URL).Ready(streamtest.Context(t)); err != nil {
			t.Errorf("Ready on %s: %v", srv.URL, err)
		}
	}
}

func TestStartEmbeddedUnusableDir(t *testing.T) {
	// A file where the directory should be: JetStream cannot start, and
	// StartEmbedded must say so rather than wait for its deadline.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := stream.StartEmbedded(streamtest.Context(t), stream.EmbeddedConfig{Dir: file})
	if err == nil {
		srv.Shutdown()
		t.Fatal("StartEmbedded on a file: no error")
	}
}

func TestDeclareTwice(t *testing.T) {
	c := streamtest.Declared(t, streamtest.Start(t, "").URL)
	ctx := streamtest.Context(t)
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("second Declare: %v", err)
	}
	// Only the api declares the AUDIT stream, and never updates it.
	if _, err := c.JetStream().Stream(ctx, stream.AuditStream); err == nil {
		t.Fatalf("Declare created %s", stream.AuditStream)
	}
	for range 2 {
		if err := c.DeclareAudit(ctx); err != nil {
			t.Fatalf("DeclareAudit: %v", err)
		}
	}

	js := c.JetStream()
	want := []struct {
		name      string
		subjects  []string
		retention jetstream.RetentionPolicy
		maxAge    time.Duration
	}{
		{stream.SubmissionsStream, []string{stream.SubjectSubmissions}, jetstream.WorkQueuePolicy, 0},
		{stream.EventsStream, []string{"purser.events.>"}, jetstream.LimitsPolicy, 24 * time.Hour},
		{stream.SnapshotsStream, []string{"purser.snapshots.>"}, jetstream.LimitsPolicy, time.Hour},
		{stream.AuditStream, []string{"purser.audit.anchors"}, jetstream.LimitsPolicy, 0},
	}
	for _, w := range want {
		s, err := js.Stream(ctx, w.name)
		if err != nil {
			t.Fatalf("stream %s: %v", w.name, err)
		}
		cfg := s.CachedInfo().Config
		bound := map[string]int64{stream.EventsStream: stream.DefaultStoreBytes / 2, stream.SnapshotsStream: stream.DefaultStoreBytes / 4}[w.name]
		if bound == 0 {
			bound = -1 // no bound: the submissions are a work queue, the anchors are few
		}
		if cfg.MaxBytes != bound || cfg.Discard != jetstream.DiscardOld {
			t.Errorf("stream %s: max bytes %d (discard %v), want %d, discarding the oldest", w.name, cfg.MaxBytes, cfg.Discard, bound)
		}
		if strings.Join(cfg.Subjects, ",") != strings.Join(w.subjects, ",") || cfg.Retention != w.retention ||
			cfg.MaxAge != w.maxAge || cfg.Duplicates != 2*time.Minute || cfg.Storage != jetstream.FileStorage {
			t.Errorf("stream %s: subjects %v retention %v maxAge %v duplicates %v storage %v", w.name,
				cfg.Subjects, cfg.Retention, cfg.MaxAge, cfg.Duplicates, cfg.Storage)
		}
	}
	if audit, err := js.Stream(ctx, stream.AuditStream); err != nil {
		t.Fatal(err)
	} else if cfg := audit.CachedInfo().Config; !cfg.DenyDelete || !cfg.DenyPurge {
		t.Errorf("stream %s allows deletes (%v) or purges (%v)", stream.AuditStream, !cfg.DenyDelete, !cfg.DenyPurge)
	}
	for _, sc := range [][2]string{
		{stream.SubmissionsStream, stream.SubmitterConsumer},
		{stream.EventsStream, stream.IngesterConsumer},
		{stream.SnapshotsStream, stream.IngesterConsumer},
	} {
		cons, err := js.Consumer(ctx, sc[0], sc[1])
		if err != nil {
			t.Fatalf("consumer %s on %s: %v", sc[1], sc[0], err)
		}
		if cfg := cons.CachedInfo().Config; cfg.AckPolicy != jetstream.AckExplicitPolicy {
			t.Errorf("consumer %s on %s: ack policy %v", sc[1], sc[0], cfg.AckPolicy)
		}
	}
	for _, b := range []struct {
		name string
		ttl  time.Duration
	}{{stream.HeartbeatsBucket, 5 * time.Minute}, {stream.LeasesBucket, 0}, {stream.KindsBucket, 0}, {stream.AgentSettingsBucket, 0}} {
		kv, err := js.KeyValue(ctx, b.name)
		if err != nil {
			t.Fatalf("bucket %s: %v", b.name, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.TTL() != b.ttl || st.History() != 1 {
			t.Errorf("bucket %s: ttl %v history %d", b.name, st.TTL(), st.History())
		}
	}
}

// TestStoreBound: events beyond half of Config.StoreBytes push the oldest
// out; the stream never holds more, whatever the agents publish.
func TestStoreBound(t *testing.T) {
	srv := streamtest.Start(t, "")
	ctx := streamtest.Context(t)
	c, err := stream.Connect(ctx, srv.URL, stream.Config{Name: t.Name(), StoreBytes: stream.MinStoreBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 512<<10)
	const n = 80 // 40 MiB into a 32 MiB bound
	for i := range n {
		if err := c.Publish(ctx, stream.EventsSubject("c1"), fmt.Sprint("m", i), msg); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	s, err := c.JetStream().Stream(ctx, stream.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	if st.Bytes > stream.MinStoreBytes/2 || st.FirstSeq == 1 || st.LastSeq != n {
		t.Fatalf("events stream: %d bytes (bound %d), sequence %d to %d of %d published", st.Bytes, stream.MinStoreBytes/2, st.FirstSeq, st.LastSeq, n)
	}
	if _, err := stream.Connect(ctx, srv.URL, stream.Config{Name: t.Name(), StoreBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("a store under the least: %v", err)
	}
}

func TestPublishDeduplicates(t *testing.T) {
	c := streamtest.Declared(t, streamtest.Start(t, "").URL)
	ctx := streamtest.Context(t)
	subject := stream.EventsSubject("east-1")
	for _, id := range []string{"a", "a", "b"} {
		if err := c.Publish(ctx, subject, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if got := streamMsgs(t, c, stream.EventsStream); got != 2 {
		t.Errorf("stored %d messages, want 2 (one per id)", got)
	}
	if err := c.Publish(ctx, subject, "", []byte("x")); err == nil || errors.Is(err, stream.ErrUnavailable) {
		t.Errorf("publish without id: %v, want a permanent error", err)
	}
}

func TestWorkQueueCompetingConsumers(t *testing.T) {
	srv := streamtest.Start(t, "")
	publisher := streamtest.Declared(t, srv.URL)
	ctx := streamtest.Context(t)
	const n = 200

	var mu sync.Mutex
	seen := map[string]int{}    // msg id -> deliveries
	byConsumer := map[int]int{} // consumer -> messages handled
	done := make(chan struct{})
	var once sync.Once

	// Two submitters, each with its own connection, bound to the one
	// durable consumer, as two replicas of `purser submitter` would be.
	for i := range 2 {
		c := streamtest.Connect(t, srv.URL)
		cons, err := c.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			// DoubleAck waits for the server, so that once the test has
			// seen n acks the work queue must already be empty.
			if err := m.DoubleAck(ctx); err != nil {
				t.Errorf("ack: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen[m.Headers().Get(jetstream.MsgIDHeader)]++
			byConsumer[i]++
			if len(seen) == n {
				once.Do(func() { close(done) })
			}
		}, jetstream.PullMaxMessages(10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cc.Stop)
	}

	for i := range n {
		id := fmt.Sprintf("runnable-%d", i)
		if err := publisher.Publish(ctx, stream.SubjectSubmissions, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("only %d of %d submissions delivered", len(seen), n)
	}

	mu.Lock()
	defer mu.Unlock()
	for id, times := range seen {
		if times != 1 {
			t.Errorf("%s delivered %d times", id, times)
		}
	}
	t.Logf("deliveries per consumer: %v", byConsumer)
	if got := streamMsgs(t, publisher, stream.SubmissionsStream); got != 0 {
		t.Errorf("%d submissions left after all were acknowledged", got)
	}
}

func TestRestartKeepsData(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	ctx := streamtest.Context(t)
	for i := range 3 {
		if err := c.Publish(ctx, stream.SubjectSubmissions, fmt.Sprint(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := c.JetStream().KeyValue(ctx, stream.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "east-1", []byte("holder")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Stop()

	// A new server on the same directory, and on another port, so that
	// nothing can come from the old process.
	srv = streamtest.Start(t, srv.Dir)
	c = streamtest.Connect(t, srv.URL)
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("Declare after restart: %v", err)
	}
	if got := streamMsgs(t, c, stream.SubmissionsStream); got != 3 {
		t.Errorf("%d submissions after restart, want 3", got)
	}
	kv, err = c.JetStream().KeyValue(ctx, stream.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "east-1")
	if err != nil || string(entry.Value()) != "holder" {
		t.Errorf("lease after restart: %v %v", entry, err)
	}
}

func TestPublishWhenServerDown(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	srv.Stop()

	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	err := c.Publish(ctx, stream.SubjectSubmissions, "x", nil)
	elapsed := time.Since(start)
	if !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("Publish to a stopped server: %v, want ErrUnavailable", err)
	}
	// The bound is the caller's deadline plus slack for a slow machine;
	// what matters is that Publish does not hang past its deadline.
	if elapsed > deadline+time.Second {
		t.Errorf("Publish took %v with a %v deadline", elapsed, deadline)
	}
	t.Logf("failed after %v: %v", elapsed, err)

	if err := c.Ready(streamtest.Context(t)); !errors.Is(err, stream.ErrUnavailable) {
		t.Errorf("Ready with the server down: %v, want ErrUnavailable", err)
	}
}

func TestConnectNoServer(t *testing.T) {
	srv := streamtest.Start(t, "")
	srv.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if c, err := stream.Connect(ctx, srv.URL, stream.Config{}); !errors.Is(err, stream.ErrUnavailable) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Connect with no server: %v, want ErrUnavailable", err)
	}
}

func TestConnectWaitsForServer(t *testing.T) {
	// A component started before the stream (a common order under
	// systemd or Kubernetes) waits for it rather than failing.
	srv := streamtest.Start(t, "")
	srv.Stop()

	connected := make(chan error, 1)
	ctx := streamtest.Context(t)
	go func() {
		c, err := stream.Connect(ctx, srv.URL, stream.Config{})
		if err == nil {
			c.Close()
		}
		connected <- err
	}()
	srv.Restart()
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
}

func TestSubjects(t *testing.T) {
	for _, tc := range []struct {
		subject string
		cluster string
		ok      bool
	}{
		{stream.EventsSubject("east-1"), "east-1", true},
		{stream.SnapshotsSubject("dc2.prod"), "dc2.prod", true},
		{stream.SubjectSubmissions, "", false},
		{"purser.events.", "", false},
	} {
		cluster, ok := stream.ClusterOf(tc.subject)
		if cluster != tc.cluster || ok != tc.ok {
			t.Errorf("ClusterOf(%q) = %q, %v; want %q, %v", tc.subject, cluster, ok, tc.cluster, tc.ok)
		}
	}
}

func streamMsgs(t *testing.T, c *stream.Client, name string) uint64 {
	t.Helper()
	ctx := streamtest.Context(t)
	s, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishWithoutStream(t *testing.T) {
	// A subject that no stream captures gets no answer, like a stream that
	// is down; Publish says so within its deadline instead of hanging.
	c := streamtest.Connect(t, streamtest.Start(t, "").URL)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := c.Publish(ctx, stream.SubjectSubmissions, "x", nil); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("Publish before Declare: %v, want ErrUnavailable", err)
	}
}

// BenchmarkPublish measures one synchronous, deduplicated, fsynced publish
// to the embedded server: the relay's cost per outbox row.
func BenchmarkPublish(b *testing.B) {
	c := streamtest.Declared(b, streamtest.Start(b, "").URL)
	ctx := streamtest.Context(b)
	data := make([]byte, 512)
	i := 0
	for b.Loop() {
		i++
		if err := c.Publish(ctx, stream.SubjectSubmissions, fmt.Sprint(i), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishBatch publishes 100 messages pipelined per operation;
// compare its ns/op / 100 with BenchmarkPublish.
func BenchmarkPublishBatch(b *testing.B) {
	c := streamtest.Declared(b, streamtest.Start(b, "").URL)
	ctx := streamtest.Context(b)
	data := make([]byte, 512)
	i := 0
	for b.Loop() {
		msgs := make([]stream.Message, 100)
		for j := range msgs {
			i++
			msgs[j] = stream.Message{Subject: stream.SubjectSubmissions, MsgID: fmt.Sprint(i), Data: data}
		}
		if n, err := c.PublishBatch(ctx, msgs); err != nil || n != len(msgs) {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "msgs/s")
}

func TestPublishBatchDeduplicatesAndReportsFailure(t *testing.T) {
	srv := streamtest.Start(t, "")
	c := streamtest.Declared(t, srv.URL)
	ctx := streamtest.Context(t)
	msgs := []stream.Message{
		{Subject: stream.SubjectSubmissions, MsgID: "a", Data: []byte("1")},
		{Subject: stream.SubjectSubmissions, MsgID: "b", Data: []byte("2")},
		{Subject: stream.SubjectSubmissions, MsgID: "a", Data: []byte("1")},
	}
	if n, err := c.PublishBatch(ctx, msgs); err != nil || n != 3 {
		t.Fatalf("PublishBatch = %d, %v", n, err)
	}
	info, err := c.JetStream().Stream(ctx, stream.SubmissionsStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != 2 {
		t.Fatalf("stream holds %d messages, want 2 (the repeated id dropped)", got)
	}
	if n, err := c.PublishBatch(ctx, []stream.Message{{Subject: stream.SubjectSubmissions, MsgID: "", Data: nil}}); err == nil || n != 0 {
		t.Fatalf("empty id: %d, %v", n, err)
	}
	srv.Stop()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := c.PublishBatch(sctx, []stream.Message{{Subject: stream.SubjectSubmissions, MsgID: "c", Data: []byte("3")}}); err == nil || n != 0 {
		t.Fatalf("with the server down: %d, %v", n, err)
	} else if !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("with the server down: %v, want ErrUnavailable", err)
	}
}
