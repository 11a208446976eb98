package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// workers stands for the syncer's cluster workers: which replica works on
// each cluster, and every moment two did at once.
type workers struct {
	mu       sync.Mutex
	by       map[string]string
	overlaps []string
}

func (w *workers) own(id string, owned map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range owned {
		if other, ok := w.by[c]; ok && other != id {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s: %s and %s", c, other, id))
		}
		w.by[c] = id
	}
}

// release is the syncer's stopWorker for replica id.
func (w *workers) release(id string) func(string) {
	return func(c string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.by[c] == id {
			delete(w.by, c)
		}
	}
}

func (w *workers) of(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for c, by := range w.by {
		if by == id {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Two replicas' leasers share the clusters, each its fair share, never
// both on one; when one releases everything, the other takes its clusters
// over at once, not a lease later.
func TestLeasesShareAndMoveOnRelease(t *testing.T) {
	srv := streamtest.Start(t, "")
	const d = 3 * time.Second
	all := []string{"c1", "c2", "c3", "c4"}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	newL := func(id string) *leaser {
		l, err := newLeaser(t.Context(), streamtest.Declared(t, srv.URL), id, d, log.With("identity", id))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := newL("a"), newL("b")
	w := &workers{by: map[string]string{}}
	ctx, cancel := context.WithCancel(t.Context())
	var steps sync.WaitGroup
	stepping := func(id string, l *leaser) {
		steps.Go(func() {
			for ctx.Err() == nil {
				w.own(id, l.step(ctx, slices.Clone(all), w.release(id)))
				time.Sleep(d / 3)
			}
		})
	}
	stepping("a", a)
	stepping("b", b)
	sandboxtest.Eventually(t, wait, "the clusters shared two and two", func(context.Context) error {
		if len(w.of("a")) != 2 || len(w.of("b")) != 2 {
			return fmt.Errorf("a %v, b %v", w.of("a"), w.of("b"))
		}
		return nil
	})
	for _, c := range w.of("a") {
		if until, ok := a.validUntil(c); !ok || time.Until(until) <= 0 || time.Until(until) > d-d/3 {
			t.Errorf("a may work on %s until %v (%v from now): want within two thirds of the lease", c, until, time.Until(until))
		}
	}

	// a stops: its workers first, then its leases, which go at once.
	cancel()
	steps.Wait()
	aHeld := w.of("a")
	for _, c := range aHeld {
		w.release("a")(c)
	}
	a.releaseAll(t.Context())
	for _, c := range aHeld {
		if e, err := a.kv.Get(t.Context(), leaseKey(c)); err == nil {
			t.Errorf("a's lease on %s is still there after its release: %s", c, e.Value())
		}
	}
	bCtx, stopB := context.WithCancel(t.Context())
	defer stopB()
	var bSteps sync.WaitGroup
	bSteps.Go(func() {
		for bCtx.Err() == nil {
			w.own("b", b.step(bCtx, slices.Clone(all), w.release("b")))
			time.Sleep(d / 3)
		}
	})
	sandboxtest.Eventually(t, wait, "b took every cluster over", func(context.Context) error {
		if got := w.of("b"); !slices.Equal(got, all) {
			return fmt.Errorf("b %v", got)
		}
		return nil
	})
	stopB()
	bSteps.Wait()
	b.releaseAll(t.Context())
	for _, c := range all {
		if _, ok := b.validUntil(c); ok {
			t.Errorf("b may still work on %s after releasing everything", c)
		}
	}
	if len(w.overlaps) > 0 {
		t.Errorf("two replicas worked on one cluster at once: %v", w.overlaps)
	}
}
