package lease

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// KVLock holds an election in one key of a NATS JetStream key-value
// bucket. Every write is a compare-and-swap on the revision last read or
// written, so of two contenders only one wins; expiry is client-go's
// alone (a revision seen unchanged for the lease's duration on the
// contender's own clock), since the bucket keeps no clock of its own.
type KVLock struct {
	kv            jetstream.KeyValue
	key, identity string
	duration      time.Duration
	// life tells this lock's writes from those of an earlier life of the
	// same identity, and finds a write whose answer was lost.
	life string

	mu       sync.Mutex
	revision uint64 // the revision last read or written
}

// NewKVLock returns the lock of key in kv, for identity, whose writes last
// d.
func NewKVLock(kv jetstream.KeyValue, key, identity string, d time.Duration) *KVLock {
	return &KVLock{kv: kv, key: key, identity: identity, duration: d, life: rand.Text()}
}

// kvRecord is a lease as the bucket holds it: the holder and the lease's
// duration to the millisecond, which client-go's record counts in whole
// seconds.
type kvRecord struct {
	Holder      string      `json:"holder"`
	DurationMS  int64       `json:"durationMs"`
	AcquireTime metav1.Time `json:"acquireTime"`
	RenewTime   metav1.Time `json:"renewTime"`
	Transitions int         `json:"transitions"`
	Life        string      `json:"life,omitempty"`
}

// Get reads the lease. A lease naming this identity that this lock did
// not write is reported as another's: it may be an earlier life of this
// replica, still working, which client-go would renew at once.
func (l *KVLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	e, r, err := l.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	d := time.Duration(r.DurationMS) * time.Millisecond
	if d <= 0 {
		d = l.duration
	}
	rec := &resourcelock.LeaderElectionRecord{
		HolderIdentity:       r.Holder,
		LeaseDurationSeconds: wholeSeconds(d),
		AcquireTime:          r.AcquireTime,
		RenewTime:            r.RenewTime,
		LeaderTransitions:    r.Transitions,
	}
	if r.Holder == l.identity && r.Life != l.life {
		rec.HolderIdentity = earlierLife(l.identity)
	}
	// The revision is part of what client-go compares: a renewal that
	// wrote the same bytes is still a renewal.
	raw := append(strconv.AppendUint(nil, e.Revision(), 10), ':')
	return rec, append(raw, e.Value()...), nil
}

// read reads the lease and notes its revision, which the next write
// swaps.
func (l *KVLock) read(ctx context.Context) (jetstream.KeyValueEntry, kvRecord, error) {
	e, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		l.setRevision(0)
		return nil, kvRecord{}, apierrors.NewNotFound(leasesResource, l.key)
	}
	if err != nil {
		return nil, kvRecord{}, fmt.Errorf("lease %s: %w", l.key, err)
	}
	var r kvRecord
	if json.Unmarshal(e.Value(), &r) != nil {
		// A lease written by a replica of an earlier version: the
		// holder's identity alone, of the same duration.
		r = kvRecord{Holder: string(e.Value())}
	}
	l.setRevision(e.Revision())
	return e, r, nil
}

func (l *KVLock) setRevision(rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revision = rev
}

// Create takes the lease, which did not exist (or was released).
func (l *KVLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	value, err := l.value(ler)
	if err != nil {
		return err
	}
	rev, err := l.kv.Create(ctx, l.key, value)
	if err != nil {
		return fmt.Errorf("lease %s: %w", l.key, err)
	}
	l.setRevision(rev)
	return nil
}

// Update takes or renews the lease, provided it is still at the revision
// last read or written. A record naming nobody releases it.
func (l *KVLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		return l.Release(ctx)
	}
	value, err := l.value(ler)
	if err != nil {
		return err
	}
	l.mu.Lock()
	at := l.revision
	l.mu.Unlock()
	if at == 0 {
		return fmt.Errorf("lease %s: read it before updating it", l.key)
	}
	rev, err := l.kv.Update(ctx, l.key, value, at)
	if err != nil {
		// The revision moved (another replica took the lease, or a
		// write of this lock landed unanswered: the next read tells).
		return fmt.Errorf("lease %s: %w", l.key, err)
	}
	l.setRevision(rev)
	return nil
}

func (l *KVLock) value(ler resourcelock.LeaderElectionRecord) ([]byte, error) {
	if ler.HolderIdentity != l.identity {
		return nil, fmt.Errorf("lease %s: %s cannot write a lease for %s", l.key, l.identity, ler.HolderIdentity)
	}
	return json.Marshal(kvRecord{Holder: ler.HolderIdentity, DurationMS: l.duration.Milliseconds(),
		AcquireTime: ler.AcquireTime, RenewTime: ler.RenewTime, Transitions: ler.LeaderTransitions, Life: l.life})
}

// Release deletes the lease if this lock wrote it last: a lease that
// moved on is not this replica's to delete. It reads the lease first, so
// that a renewal whose answer was lost is released too.
//
// A renewal whose answer the election gave up waiting for may still land
// after the read (the stream stores it after answering the read): the
// delete then meets a newer revision, of this lock's own writing, and is
// tried again on it.
func (l *KVLock) Release(ctx context.Context) error {
	var err error
	for range 3 {
		var e jetstream.KeyValueEntry
		var r kvRecord
		e, r, err = l.read(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if r.Holder != l.identity || r.Life != l.life {
			return nil
		}
		err = l.kv.Delete(ctx, l.key, jetstream.LastRevision(e.Revision()))
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}

// RecordEvent does nothing: the election logs its own events.
func (l *KVLock) RecordEvent(string) {}

// Identity names this replica in the lease.
func (l *KVLock) Identity() string { return l.identity }

// Describe names the lease in client-go's logs.
func (l *KVLock) Describe() string { return l.key }
