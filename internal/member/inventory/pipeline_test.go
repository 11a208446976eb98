package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// memSource delivers its batches once each, then a batch handed back
// again; it records how each message was settled.
type memSource struct {
	mu       sync.Mutex
	batches  [][]string
	acked    []string
	retried  []string
	released []string
}

func (s *memSource) fetch(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	if len(s.batches) > 0 {
		b := s.batches[0]
		s.batches = s.batches[1:]
		s.mu.Unlock()
		return b, nil
	}
	s.mu.Unlock()
	// Nothing to deliver: a short wait, as a pull consumer's.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Millisecond):
		return nil, nil
	}
}

func (s *memSource) ack(msgs []string) { s.settle(&s.acked, msgs) }

func (s *memSource) retry(msgs []string) {
	s.settle(&s.retried, msgs)
	s.mu.Lock()
	s.batches = append(s.batches, msgs) // delivered again
	s.mu.Unlock()
}

func (s *memSource) release(msgs []string) { s.settle(&s.released, msgs) }

func (s *memSource) stop() {}

func (s *memSource) settle(to *[]string, msgs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*to = append(*to, msgs...)
}

func (s *memSource) settled() (acked, retried []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked), slices.Clone(s.retried)
}

// uidConverter makes a row of each message, its uid.
type uidConverter struct{}

func (uidConverter) convert(msgs []string) ([]store.InventoryRow, []string) {
	rows := make([]store.InventoryRow, 0, len(msgs))
	for _, uid := range msgs {
		rows = append(rows, store.InventoryRow{Cluster: "c", APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: uid,
			UID: uid, ResourceVersion: "1", Health: "Unknown", ObservedAt: time.Now()})
	}
	return rows, msgs
}

// TestPipelineSettlesAfterCommit: a step that fails rolls back what the
// sink stored, and the batch is handed back, not acknowledged; delivered
// again, it is stored, the steps see what the sink stored, and only then
// is it acknowledged.
func TestPipelineSettlesAfterCommit(t *testing.T) {
	eng := storetest.Engines()[0]
	ctx := t.Context()
	s, err := store.Open(ctx, eng.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()

	src := &memSource{batches: [][]string{{"a", "b"}}}
	var mu sync.Mutex
	runs, failed := 0, false
	var seen [][]string
	p := &pipeline[string, []store.InventoryRow, []store.InventoryRow]{
		name:    "test",
		src:     src,
		convert: uidConverter{},
		sink: func(ctx context.Context, tx *store.Tx, rows []store.InventoryRow) ([]store.InventoryRow, error) {
			return tx.Inventory().Upsert(ctx, rows)
		},
		then: []step[[]store.InventoryRow, []store.InventoryRow]{{"fail once", func(_ context.Context, _ *store.Tx, _, stored []store.InventoryRow) error {
			mu.Lock()
			defer mu.Unlock()
			runs++
			var uids []string
			for _, r := range stored {
				uids = append(uids, r.UID)
			}
			seen = append(seen, uids)
			if !failed {
				failed = true
				return errors.New("the step failed")
			}
			return nil
		}}},
		store: s,
		log:   slog.New(slog.DiscardHandler),
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(runCtx) }()
	defer func() { stop(); <-done }()

	sandboxtest.Eventually(t, time.Minute, "the batch acknowledged", func(context.Context) error {
		if acked, _ := src.settled(); len(acked) < 2 {
			return fmt.Errorf("acked %v", acked)
		}
		return nil
	})
	acked, retried := src.settled()
	if !slices.Equal(retried, []string{"a", "b"}) || !slices.Equal(acked, []string{"a", "b"}) {
		t.Errorf("retried %v, acked %v; want the batch handed back once, then acknowledged", retried, acked)
	}
	mu.Lock()
	// The first run's rows were rolled back, so the second stores them
	// again and its steps see them.
	if runs != 2 || !slices.Equal(seen[1], []string{"a", "b"}) {
		t.Errorf("steps ran %d times, seeing %v; want twice, the second seeing a and b", runs, seen)
	}
	mu.Unlock()
	var rows []store.InventoryRow
	if err := s.Read(ctx, func(tx *store.Tx) (err error) {
		rows, _, err = tx.Inventory().List(ctx, store.InventoryFilter{Cluster: "c"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Errorf("%d rows stored, want 2", len(rows))
	}
}
