package store

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestLeases runs on both engines, outside the suite's list, with every
// expiry set up by durations of zero or an hour so that nothing depends on
// how fast the machine is.
func TestLeases(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Run("TakeRenewRelease", func(t *testing.T) { t.Parallel(); testLeaseTakeRenewRelease(t, eng) })
			t.Run("Expiry", func(t *testing.T) { t.Parallel(); testLeaseExpiry(t, eng) })
			t.Run("OneWinner", func(t *testing.T) { t.Parallel(); testLeaseOneWinner(t, eng) })
		})
	}
}

func tryLease(t *testing.T, s *Store, name, holder string, d time.Duration, renew bool) (Lease, bool) {
	t.Helper()
	var l Lease
	var ok bool
	mustTx(t, s, func(tx *Tx) (err error) {
		l, ok, err = tx.Leases().Try(t.Context(), name, holder, d, renew)
		return err
	})
	return l, ok
}

func testLeaseTakeRenewRelease(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	err := s.Read(ctx, func(tx *Tx) error { _, err := tx.Leases().Get(ctx, "controller"); return err })
	wantErr(t, err, ErrNotFound)

	l, ok := tryLease(t, s, "controller", "a", time.Hour, false)
	if !ok || l.Holder != "a" || l.Transitions != 0 {
		t.Fatalf("first take: %+v ok=%v", l, ok)
	}
	if got := l.ExpiresAt.Sub(l.RenewedAt); got != time.Hour {
		t.Errorf("expires %v after renewal, want 1h", got)
	}
	if l.RenewedAt.Location() != time.UTC {
		t.Errorf("location %v, want UTC", l.RenewedAt.Location())
	}
	// The database's clock, not a constant: within a day of this machine's
	// (the test database runs here).
	if d := time.Since(l.RenewedAt); d < -24*time.Hour || d > 24*time.Hour {
		t.Errorf("renewed at %v, far from now", l.RenewedAt)
	}

	if got, ok := tryLease(t, s, "controller", "b", time.Hour, false); ok || got.Holder != "a" {
		t.Fatalf("b took a's live lease: %+v ok=%v", got, ok)
	}
	if got, ok := tryLease(t, s, "controller", "b", time.Hour, true); ok || got.Holder != "a" {
		t.Fatalf("b renewed a's lease: %+v ok=%v", got, ok)
	}
	// An earlier life of a still holds it: only a renewal extends it.
	if _, ok := tryLease(t, s, "controller", "a", time.Hour, false); ok {
		t.Fatal("a took its own live lease without renew")
	}
	renewed, ok := tryLease(t, s, "controller", "a", 2*time.Hour, true)
	if !ok || renewed.Transitions != 0 || renewed.RenewedAt.Before(l.RenewedAt) || renewed.ExpiresAt.Sub(renewed.RenewedAt) != 2*time.Hour {
		t.Fatalf("renewal: %+v ok=%v, after %+v", renewed, ok, l)
	}

	// Other names are other leases.
	if _, ok := tryLease(t, s, "other", "b", time.Hour, false); !ok {
		t.Fatal("b could not take a free lease of another name")
	}

	// Releasing someone else's lease changes nothing.
	mustTx(t, s, func(tx *Tx) error { return tx.Leases().Release(ctx, "controller", "b") })
	if _, ok := tryLease(t, s, "controller", "b", time.Hour, false); ok {
		t.Fatal("b's release freed a's lease")
	}
	mustTx(t, s, func(tx *Tx) error { return tx.Leases().Release(ctx, "controller", "a") })
	var released Lease
	mustRead(t, s, func(tx *Tx) (err error) { released, err = tx.Leases().Get(ctx, "controller"); return })
	if released.Holder != "a" || released.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("released lease %+v", released)
	}
	taken, ok := tryLease(t, s, "controller", "b", time.Hour, false)
	if !ok || taken.Holder != "b" || taken.Transitions != 1 {
		t.Fatalf("take after release: %+v ok=%v", taken, ok)
	}
	// a no longer holds it, so its renewal fails.
	if got, ok := tryLease(t, s, "controller", "a", time.Hour, true); ok || got.Holder != "b" {
		t.Fatalf("a renewed a lease it lost: %+v ok=%v", got, ok)
	}
	// A second release by a is a no-op, and so is one of an expired lease.
	mustTx(t, s, func(tx *Tx) error { return tx.Leases().Release(ctx, "controller", "a") })
	mustTx(t, s, func(tx *Tx) error { return tx.Leases().Release(ctx, "never-taken", "a") })
}

func testLeaseExpiry(t *testing.T, eng engine) {
	s := eng.open(t)
	// A zero duration expires the moment it is taken, by the database's
	// clock.
	if _, ok := tryLease(t, s, "controller", "a", 0, false); !ok {
		t.Fatal("a could not take a free lease")
	}
	l, ok := tryLease(t, s, "controller", "b", time.Hour, false)
	if !ok || l.Holder != "b" || l.Transitions != 1 {
		t.Fatalf("b could not take a's expired lease: %+v ok=%v", l, ok)
	}
	// The same holder takes its own expired lease without counting a
	// transition.
	if _, ok := tryLease(t, s, "x", "a", 0, false); !ok {
		t.Fatal("a could not take a free lease")
	}
	if l, ok := tryLease(t, s, "x", "a", time.Hour, false); !ok || l.Transitions != 0 {
		t.Fatalf("a could not take its own expired lease: %+v ok=%v", l, ok)
	}
}

func testLeaseOneWinner(t *testing.T, eng engine) {
	// Separate Stores, as separate replicas would have.
	dsn := eng.newDSN(t)
	const contenders = 8
	stores := make([]*Store, contenders)
	for i := range stores {
		stores[i] = openDSN(t, dsn)
	}
	for round := range 5 {
		name := fmt.Sprintf("round-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		start := make(chan struct{})
		for i, s := range stores {
			holder := fmt.Sprintf("r%d", i)
			wg.Go(func() {
				<-start
				var ok bool
				err := s.Tx(t.Context(), func(tx *Tx) (err error) {
					_, ok, err = tx.Leases().Try(t.Context(), name, holder, time.Hour, true)
					return err
				})
				if err != nil {
					t.Errorf("%s: %v", holder, err)
				}
				if ok {
					mu.Lock()
					winners = append(winners, holder)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", round, winners)
		}
		var l Lease
		mustRead(t, stores[0], func(tx *Tx) (err error) { l, err = tx.Leases().Get(t.Context(), name); return })
		if l.Holder != winners[0] {
			t.Fatalf("round %d: lease held by %q, winner %q", round, l.Holder, winners[0])
		}
	}
}
