package lease

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// kvContender is one replica electing through a key of the leases
// bucket, on its own connection, as a separate process would.
type kvContender struct {
	identity string
	client   *stream.Client
	cancel   context.CancelFunc
	done     chan error
	renewed  atomic.Int64 // the last term end Renewed reported, unix nanoseconds
}

func startKVContender(t *testing.T, url, key, identity string, d time.Duration, work func(context.Context) error) *kvContender {
	t.Helper()
	c := &kvContender{identity: identity, client: streamtest.Connect(t, url), done: make(chan error, 1)}
	kv, err := c.client.JetStream().KeyValue(t.Context(), stream.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	cfg := Config{
		Lock: NewKVLock(kv, key, identity, d), Name: key, Duration: d,
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Renewed: func(until time.Time) { c.renewed.Store(until.UnixNano()) },
	}
	go func() { c.done <- Run(ctx, cfg, work) }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *kvContender) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case err, ok := <-c.done:
		if ok {
			close(c.done)
			if err != nil {
				t.Errorf("%s: Run: %v", c.identity, err)
			}
		}
	case <-time.After(patience):
		t.Fatalf("%s: Run did not return after its context ended", c.identity)
	}
}

func leasesBucket(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	kv, err := streamtest.Declared(t, url).JetStream().KeyValue(t.Context(), stream.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// A leader keeps a key's lease past its duration by renewing it; stopping
// it hands the lease to the standby at once, through its release.
func TestKVLeaseHandoverOnRelease(t *testing.T) {
	srv := streamtest.Start(t, "")
	kv := leasesBucket(t, srv.URL)
	const d = 3 * time.Second
	ref := newReferee()
	byID := map[string]*kvContender{}
	for _, id := range []string{"a", "b"} {
		byID[id] = startKVContender(t, srv.URL, "syncer.c1", id, d, ref.work(id, nil))
	}
	first := ref.next(t)
	leader := byID[first.identity]
	standby := byID[map[string]string{"a": "b", "b": "a"}[first.identity]]
	e, err := kv.Get(t.Context(), "syncer.c1")
	if err != nil {
		t.Fatal(err)
	}
	taken := e.Revision()

	// Renewals carry the lease past its duration, and move its revision.
	time.Sleep(d + d/2)
	if e, err = kv.Get(t.Context(), "syncer.c1"); err != nil || e.Revision() == taken {
		t.Fatalf("lease %v after a duration (err %v): not renewed", e, err)
	}
	var r kvRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Holder != leader.identity || r.DurationMS != d.Milliseconds() {
		t.Fatalf("lease value %s (err %v)", e.Value(), err)
	}
	if until := time.Unix(0, leader.renewed.Load()); time.Until(until) <= 0 || time.Until(until) > d-d/3 {
		t.Errorf("the leader may work until %v, %v from now: want within two thirds of the duration", until, time.Until(until))
	}

	stopped := time.Now()
	leader.stop(t)
	next := ref.next(t)
	if next.identity != standby.identity {
		t.Fatalf("%s leads again after it stopped", next.identity)
	}
	// Through the release: well before the lease the leader renewed last
	// (at most a fifth of d before it stopped) would have expired.
	if took := next.at.Sub(stopped); took >= d-d/5 {
		t.Errorf("the standby took over %v after the leader stopped: the release did not hand over", took)
	}
	standby.stop(t)
	ref.check(t)
	if _, err := kv.Get(t.Context(), "syncer.c1"); err == nil {
		t.Error("the lease is still there after its last holder stopped")
	}
}

// A leader cut off from the stream stops its work on its own clock; the
// standby takes over only after a whole duration without a renewal.
func TestKVLeaseStopsWhenCutOff(t *testing.T) {
	srv := streamtest.Start(t, "")
	leasesBucket(t, srv.URL)
	const d = 3 * time.Second
	ref := newReferee()
	var aStopped atomic.Int64
	a := startKVContender(t, srv.URL, "syncer.c1", "a", d, ref.work("a", &aStopped))
	if s := ref.next(t); s.identity != "a" {
		t.Fatalf("%s leads", s.identity)
	}
	b := startKVContender(t, srv.URL, "syncer.c1", "b", d, ref.work("b", nil))
	// Let b see a's lease being renewed before a is cut off.
	time.Sleep(d / 2)
	a.client.Close()
	cut := time.Now()
	lastTerm := time.Unix(0, a.renewed.Load())

	s := ref.next(t)
	if s.identity != "b" {
		t.Fatalf("%s leads, want b", s.identity)
	}
	stopped := time.Unix(0, aStopped.Load())
	if aStopped.Load() == 0 || stopped.After(s.at) {
		t.Errorf("a stopped at %v, after b started at %v", stopped, s.at)
	}
	if stopped.After(lastTerm.Add(time.Second)) {
		t.Errorf("a stopped at %v, well after its term ended at %v", stopped, lastTerm)
	}
	// a's last renewal was sent at lastTerm - 2d/3; b waits d from a
	// moment after it.
	if lastRenewal := lastTerm.Add(-(d - d/3)); s.at.Sub(lastRenewal) < d {
		t.Errorf("b took over %v after a's last renewal, before the lease expired", s.at.Sub(lastRenewal))
	}
	t.Logf("a cut off; it stopped %v later, b took over %v later", stopped.Sub(cut), s.at.Sub(cut))
	a.stop(t)
	b.stop(t)
	ref.check(t)
}

// A lease naming this replica's identity that it did not take (an earlier
// life of it, which may still work) is waited out like anyone else's.
func TestKVLeaseOfAnEarlierLifeIsWaitedOut(t *testing.T) {
	srv := streamtest.Start(t, "")
	kv := leasesBucket(t, srv.URL)
	const d = 2 * time.Second
	value, _ := json.Marshal(kvRecord{Holder: "a", DurationMS: d.Milliseconds()})
	if _, err := kv.Create(t.Context(), "syncer.c1", value); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	ref := newReferee()
	startKVContender(t, srv.URL, "syncer.c1", "a", d, ref.work("a", nil))
	s := ref.next(t)
	if waited := s.at.Sub(written); waited < d {
		t.Errorf("took over its earlier life's live lease after %v, before it expired", waited)
	}
	ref.check(t)
}
