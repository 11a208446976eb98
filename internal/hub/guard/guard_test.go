package guard

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// TestGuard checks a real database and a real NATS server: both reached,
// then the NATS server stopped (the stream has no quorum), then the
// database closed.
func TestGuard(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }() // for an early failure: the test closes it below
	srv := streamtest.Start(t, "")
	streams, err := stream.Connect(ctx, srv.URL, stream.Config{Name: "guard-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()
	if err := streams.Declare(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var changes []error
	g := New(Config{Name: "test", Database: db, Stream: streams, Timeout: time.Second, MaxAge: time.Nanosecond})
	g.OnChange(func(err error) { mu.Lock(); changes = append(changes, err); mu.Unlock() })
	if err := g.Err(); !errors.Is(err, ErrUnreached) {
		t.Fatalf("before any check: %v", err)
	}
	g.cfg.MaxAge = time.Minute
	g.Check(ctx)
	if err := g.Err(); err != nil {
		t.Fatalf("both reached: %v", err)
	}

	// From here a good check is stale at once, so that Err reflects the
	// failed check just made.
	srv.Stop()
	g.cfg.MaxAge = time.Nanosecond
	g.Check(ctx)
	if err := g.Err(); !errors.Is(err, ErrUnreached) || !errors.Is(err, ErrNoQuorum) || errors.Is(err, ErrNoPrimary) {
		t.Fatalf("the stream gone: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	g.Check(ctx)
	err = g.Err()
	if !errors.Is(err, ErrUnreached) || !errors.Is(err, ErrNoPrimary) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the database gone too: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || changes[0] != nil || changes[1] == nil {
		t.Errorf("changes reported: %v", changes)
	}
	var nilGuard *Guard
	if err := nilGuard.Err(); err != nil {
		t.Errorf("no guard: %v", err)
	}

}
