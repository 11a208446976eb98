package feed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestOwnFeed: the feed of purser's own kinds numbers what was committed
// as it polls and hands every subscriber the changes in order; Keep
// prunes what is past retention whether or not anyone watches.
func TestOwnFeed(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			st, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			create := func(name string) {
				t.Helper()
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					return tx.Runnables().Create(ctx, &store.Runnable{Namespace: "ns", Name: name, UID: "uid-" + name, Generation: 1,
						Spec: []byte(`{}`), SpecHash: "h", Phase: "Queued", Submitter: "test"})
				}); err != nil {
					t.Fatal(err)
				}
			}
			create("before")
			f := feed.NewOwn(feed.Config{Poll: 20 * time.Millisecond}, st)
			sub, err := f.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			for i := range 3 {
				create(fmt.Sprint("r", i))
			}
			var got []string
			last := sub.From
			for len(got) < 3 {
				select {
				case b := <-sub.Events():
					for _, c := range b.Changes {
						if c.Seq <= last {
							t.Fatalf("position %d after %d", c.Seq, last)
						}
						last = c.Seq
						got = append(got, c.Type+" "+c.Name)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("only %v in 10s", got)
				}
			}
			if fmt.Sprint(got) != "[ADDED r0 ADDED r1 ADDED r2]" {
				t.Errorf("changes %v, want the three creates after the subscription, in order", got)
			}

			keepCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); feed.Keep(keepCtx, st, -time.Hour, nil) }()
			defer func() { stop(); <-done }()
			sandboxtest.Eventually(t, 10*time.Second, "the changes pruned", func(context.Context) error {
				var h store.FeedHead
				if err := st.Read(ctx, func(tx *store.Tx) error {
					h, err = tx.OwnFeed().Head(ctx)
					return err
				}); err != nil {
					return err
				}
				if h.PrunedTo != last {
					return fmt.Errorf("pruned to %d, want %d", h.PrunedTo, last)
				}
				return nil
			})
		})
	}
}
