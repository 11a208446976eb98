package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/purser-io/purser/internal/hub/store"
)

// leasesResource names purser's lease records in the NotFound errors
// client-go reads as "no lease yet, create it".
var leasesResource = schema.GroupResource{Group: "purser.io", Resource: "leases"}

// StoreLock holds an election in a row of the hub database's leases
// table (store.Leases.Try), so that leader election needs no
// infrastructure beyond what every component already talks to.
//
// Besides client-go's own clock, the database's decides: a lease is
// renewed to "now + duration" and taken over only once "now" has passed
// that, both read by the database in the one statement that decides, so
// two contenders never both win and clock skew between replicas does not
// matter (on SQLite every replica shares the machine, and so the clock, of
// the database file). A take-over therefore needs both client-go's wait
// and the database's expiry.
type StoreLock struct {
	store          Store
	name, identity string
	duration       time.Duration

	mu      sync.Mutex
	holding bool // this lock took the lease, and nobody has taken it since
}

// NewStoreLock returns the lock of the lease name, for identity, whose
// writes last d.
func NewStoreLock(s Store, name, identity string, d time.Duration) *StoreLock {
	return &StoreLock{store: s, name: name, identity: identity, duration: d}
}

// Get reads the lease. A live lease naming this identity that this lock
// did not take is reported as another's: it may be an earlier life of
// this replica, still working, which client-go would renew at once. A
// released lease (expiring sooner after its renewal than a lease lasts)
// is reported free; the database has the last word on both.
func (l *StoreLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	var lease store.Lease
	err := l.store.Read(ctx, func(tx *store.Tx) (err error) {
		lease, err = tx.Leases().Get(ctx, l.name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierrors.NewNotFound(leasesResource, l.name)
	}
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(lease)
	if err != nil {
		return nil, nil, err
	}
	rec := &resourcelock.LeaderElectionRecord{
		HolderIdentity:       lease.Holder,
		LeaseDurationSeconds: 0,
		AcquireTime:          metav1.NewTime(lease.RenewedAt),
		RenewTime:            metav1.NewTime(lease.RenewedAt),
		LeaderTransitions:    int(lease.Transitions),
	}
	if left := lease.ExpiresAt.Sub(lease.RenewedAt); left >= l.duration {
		rec.LeaseDurationSeconds = wholeSeconds(left)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lease.Holder == l.identity && !l.holding {
		rec.HolderIdentity = earlierLife(l.identity)
	}
	return rec, raw, nil
}

// Create takes the lease, which did not exist.
func (l *StoreLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

// Update takes the lease, or renews it within a term this lock won, for
// the lock's duration by the database's clock; an error when another
// replica holds it. A record naming nobody releases it.
func (l *StoreLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		return l.Release(ctx)
	}
	if ler.HolderIdentity != l.identity {
		return fmt.Errorf("lease %s: %s cannot write a lease for %s", l.name, l.identity, ler.HolderIdentity)
	}
	l.mu.Lock()
	renew := l.holding
	l.mu.Unlock()
	var lease store.Lease
	var ok bool
	err := l.store.Tx(ctx, func(tx *store.Tx) (err error) {
		lease, ok, err = tx.Leases().Try(ctx, l.name, l.identity, l.duration, renew)
		return err
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = ok
	if !ok {
		return fmt.Errorf("lease %s is held by %s until %s by the database's clock", l.name, lease.Holder, lease.ExpiresAt.Format(time.RFC3339Nano))
	}
	return nil
}

// Release ends the lease at once if this lock holds it; a lease naming
// this identity that this lock did not take is not its to end.
func (l *StoreLock) Release(ctx context.Context) error {
	l.mu.Lock()
	holding := l.holding
	l.holding = false
	l.mu.Unlock()
	if !holding {
		return nil
	}
	return l.store.Tx(ctx, func(tx *store.Tx) error { return tx.Leases().Release(ctx, l.name, l.identity) })
}

// RecordEvent does nothing: the election logs its own events.
func (l *StoreLock) RecordEvent(string) {}

// Identity names this replica in the lease.
func (l *StoreLock) Identity() string { return l.identity }

// Describe names the lease in client-go's logs.
func (l *StoreLock) Describe() string { return l.name }

// earlierLife is how a lock reports its own identity on a lease it did
// not take.
func earlierLife(identity string) string { return identity + " (an earlier life of this replica)" }

// wholeSeconds is d in the whole seconds client-go's record counts,
// rounded up so that a contender never waits less than d.
func wholeSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}
