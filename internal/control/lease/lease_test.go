package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// patience bounds every wait for something that must happen; it is far
// beyond any duration the tests use, so that a slow machine only makes
// them slower.
const patience = 30 * time.Second

// referee watches the work of every contender of one election: leading
// counts the work functions running, and overlaps records any moment at
// which more than one was.
type referee struct {
	leading  atomic.Int32
	overlaps atomic.Int32
	starts   chan start
}

type start struct {
	identity string
	at       time.Time
}

func newReferee() *referee { return &referee{starts: make(chan start, 100)} }

// work runs until its context ends, then reports when it stopped.
func (r *referee) work(identity string, stopped *atomic.Int64) func(context.Context) error {
	return func(ctx context.Context) error {
		if r.leading.Add(1) > 1 {
			r.overlaps.Add(1)
		}
		r.starts <- start{identity, time.Now()}
		<-ctx.Done()
		if stopped != nil {
			stopped.Store(time.Now().UnixNano())
		}
		r.leading.Add(-1)
		return nil
	}
}

func (r *referee) next(t *testing.T) start {
	t.Helper()
	select {
	case s := <-r.starts:
		return s
	case <-time.After(patience):
		t.Fatalf("no replica started leading within %v", patience)
		return start{}
	}
}

func (r *referee) check(t *testing.T) {
	t.Helper()
	if n := r.overlaps.Load(); n > 0 {
		t.Errorf("two replicas worked at once (%d times)", n)
	}
}

// contender is one replica: its own Store on the shared database, as a
// separate process would have.
type contender struct {
	identity string
	store    *store.Store
	cancel   context.CancelFunc
	done     chan error
	metrics  *prometheus.Registry
}

func startContender(t *testing.T, dsn, identity string, d time.Duration, work func(context.Context) error) *contender {
	t.Helper()
	s, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	c := &contender{identity: identity, store: s, cancel: cancel, done: make(chan error, 1), metrics: prometheus.NewRegistry()}
	cfg := Config{
		Store: s, Name: "controller", Identity: identity, Duration: d, Registerer: c.metrics,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	go func() { c.done <- Run(ctx, cfg, work) }()
	t.Cleanup(func() { c.stop(t) })
	// Run registers its gauge as it starts; a test that reads it must not
	// race the contender's first steps.
	sandboxtest.Eventually(t, patience, identity+"'s purser_leader registered", func(context.Context) error {
		if _, ok := c.gaugeValue(t); !ok {
			return errors.New("not registered yet")
		}
		return nil
	})
	return c
}

// stop cancels the contender and waits for Run to return; again is a no-op.
func (c *contender) stop(t *testing.T) {
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

func (c *contender) gauge(t *testing.T) float64 {
	t.Helper()
	v, ok := c.gaugeValue(t)
	if !ok {
		t.Fatalf("%s: no purser_leader{name=controller}", c.identity)
	}
	return v
}

func (c *contender) gaugeValue(t *testing.T) (float64, bool) {
	t.Helper()
	families, err := c.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "purser_leader" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "controller" {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func readLease(t *testing.T, s *store.Store) store.Lease {
	t.Helper()
	var l store.Lease
	err := s.Read(t.Context(), func(tx *store.Tx) (err error) {
		l, err = tx.Leases().Get(t.Context(), "controller")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func forEngines(t *testing.T, fn func(t *testing.T, dsn string)) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, eng.NewDSN(t))
		})
	}
}

// A leader keeps the lease past its first expiry by renewing it, the
// standby waits, and stopping the leader hands the lease over through its
// release, well before it would have expired.
func TestLeaseHandoverOnRelease(t *testing.T) {
	forEngines(t, func(t *testing.T, dsn string) {
		const d = 6 * time.Second // a slow write never costs the holder its term
		ref := newReferee()
		byID := map[string]*contender{}
		for _, id := range []string{"a", "b"} {
			byID[id] = startContender(t, dsn, id, d, ref.work(id, nil))
		}
		first := ref.next(t)
		leader := byID[first.identity]
		standby := byID[map[string]string{"a": "b", "b": "a"}[first.identity]]
		taken := readLease(t, leader.store)
		if taken.Holder != leader.identity {
			t.Fatalf("lease %+v, but %s works", taken, leader.identity)
		}
		if leader.gauge(t) != 1 || standby.gauge(t) != 0 {
			t.Errorf("purser_leader: leader %v, standby %v", leader.gauge(t), standby.gauge(t))
		}

		// Renewals carry the lease past the expiry of its first take.
		for {
			l := readLease(t, standby.store)
			if l.Holder != leader.identity || l.Transitions != taken.Transitions {
				t.Fatalf("lease moved while its holder renewed it: %+v", l)
			}
			if l.RenewedAt.After(taken.ExpiresAt) {
				break
			}
			time.Sleep(d / 10)
		}

		before := readLease(t, standby.store)
		leader.stop(t)
		if g := leader.gauge(t); g != 0 {
			t.Errorf("purser_leader of the stopped leader: %v", g)
		}
		next := ref.next(t)
		if next.identity != standby.identity {
			t.Fatalf("%s leads again after it stopped", next.identity)
		}
		after := readLease(t, standby.store)
		if after.Holder != standby.identity || after.Transitions != before.Transitions+1 {
			t.Fatalf("lease after the handover: %+v", after)
		}
		// By the database's clock: the standby took over before the old
		// lease would have expired, so through its release.
		if !after.RenewedAt.Before(before.ExpiresAt) {
			t.Errorf("taken over at %v, not before the expiry %v: the release did not hand over", after.RenewedAt, before.ExpiresAt)
		}
		if standby.gauge(t) != 1 {
			t.Errorf("purser_leader of the new leader: %v", standby.gauge(t))
		}
		standby.stop(t)
		ref.check(t)
		// Released: a live lease expires exactly d after its renewal.
		if l := readLease(t, standby.store); l.Holder != standby.identity || l.ExpiresAt.Sub(l.RenewedAt) >= d {
			t.Errorf("lease after the last replica stopped: %+v, want released", l)
		}
	})
}

// A leader that can no longer write to the database stops its work before
// the lease expires, and the standby takes over only after the expiry.
func TestLeaseStopsWhenRenewalsFail(t *testing.T) {
	forEngines(t, func(t *testing.T, dsn string) {
		const d = 4 * time.Second
		ref := newReferee()
		var aStopped atomic.Int64
		a := startContender(t, dsn, "a", d, ref.work("a", &aStopped))
		if s := ref.next(t); s.identity != "a" {
			t.Fatalf("%s leads", s.identity)
		}
		b := startContender(t, dsn, "b", d, ref.work("b", nil))

		// Cut a off the database. Close waits for statements in flight,
		// so the lease as read next is a's last word.
		if err := a.store.Close(); err != nil {
			t.Fatal(err)
		}
		last := readLease(t, b.store)
		if last.Holder != "a" {
			t.Fatalf("lease %+v, want a's", last)
		}

		s := ref.next(t)
		if s.identity != "b" {
			t.Fatalf("%s leads, want b", s.identity)
		}
		stopped := aStopped.Load()
		if stopped == 0 || time.Unix(0, stopped).After(s.at) {
			t.Errorf("a stopped at %v, after b started at %v", time.Unix(0, stopped), s.at)
		}
		taken := readLease(t, b.store)
		if taken.Holder != "b" || taken.Transitions != last.Transitions+1 {
			t.Fatalf("lease %+v", taken)
		}
		if taken.RenewedAt.Before(last.ExpiresAt) {
			t.Errorf("b took over at %v, before a's lease expired at %v", taken.RenewedAt, last.ExpiresAt)
		}
		if a.gauge(t) != 0 {
			t.Errorf("purser_leader of the cut-off replica: %v", a.gauge(t))
		}
		a.stop(t)
		b.stop(t)
		ref.check(t)
	})
}

// Leaders come and go; at no moment do two work at once.
func TestLeaseChurn(t *testing.T) {
	forEngines(t, func(t *testing.T, dsn string) {
		const d = time.Second
		ref := newReferee()
		var mu sync.Mutex
		live := map[string]*contender{}
		spawn := func(id string) {
			c := startContender(t, dsn, id, d, ref.work(id, nil))
			mu.Lock()
			live[id] = c
			mu.Unlock()
		}
		for i := range 3 {
			spawn(fmt.Sprintf("r%d", i))
		}
		for round := range 4 {
			s := ref.next(t)
			mu.Lock()
			c := live[s.identity]
			delete(live, s.identity)
			mu.Unlock()
			if c == nil {
				t.Fatalf("round %d: %s leads, but it was stopped", round, s.identity)
			}
			c.stop(t)
			// A restarted replica is a new process, under a new identity.
			spawn(fmt.Sprintf("r%d", round+3))
		}
		for _, c := range live {
			c.stop(t)
		}
		ref.check(t)
	})
}

// Work that returns by itself ends Run with its error and frees the lease
// for another replica at once.
func TestLeaseWorkEndsRun(t *testing.T) {
	forEngines(t, func(t *testing.T, dsn string) {
		boom := errors.New("boom")
		c := startContender(t, dsn, "a", time.Hour, func(context.Context) error { return boom })
		select {
		case err := <-c.done:
			close(c.done)
			if !errors.Is(err, boom) {
				t.Fatalf("Run: %v, want the work's error", err)
			}
		case <-time.After(patience):
			t.Fatal("Run did not return when its work did")
		}
		var ok bool
		err := c.store.Tx(t.Context(), func(tx *store.Tx) (err error) {
			_, ok, err = tx.Leases().Try(t.Context(), "controller", "b", time.Hour, false)
			return err
		})
		if err != nil || !ok {
			t.Fatalf("b could not take the lease a's ended work left: ok=%v err=%v", ok, err)
		}
	})
}

// A live lease naming this replica's identity that it did not take (an
// earlier life of it, which may still work) is waited out like anyone
// else's: client-go alone would renew it at once.
func TestLeaseOfAnEarlierLifeIsWaitedOut(t *testing.T) {
	forEngines(t, func(t *testing.T, dsn string) {
		const d = 2 * time.Second
		s, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		var earlier store.Lease
		err = s.Tx(t.Context(), func(tx *store.Tx) (err error) {
			earlier, _, err = tx.Leases().Try(t.Context(), "controller", "a", d, false)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ref := newReferee()
		c := startContender(t, dsn, "a", d, ref.work("a", nil))
		ref.next(t)
		if l := readLease(t, c.store); l.Holder != "a" || l.RenewedAt.Before(earlier.ExpiresAt) {
			t.Errorf("took over at %v its earlier life's lease, which expired at %v", l.RenewedAt, earlier.ExpiresAt)
		}
		ref.check(t)
	})
}

func TestLeaseConfig(t *testing.T) {
	if err := Run(t.Context(), Config{Name: "controller"}, nil); err == nil {
		t.Error("Run without a Store succeeded")
	}
}
