package feed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestFeed: every subscriber gets every change after its position, in
// order, from one poller that reads only while someone subscribes.
func TestFeed(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			put := func(uid, rv string) {
				t.Helper()
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{{Cluster: "c1", APIVersion: "v1", Kind: "ConfigMap",
						Namespace: "ns", Name: uid, UID: uid, ResourceVersion: rv, Health: "Unknown", ObservedAt: time.Now()}})
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			put("before", "1")
			f := feed.New(feed.Config{Store: st, Poll: 20 * time.Millisecond})
			subs := make([]*feed.Subscription[store.InventoryChange], 3)
			for i := range subs {
				if subs[i], err = f.Subscribe(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := f.Stats().Subscribers; n != 3 {
				t.Fatalf("%d subscribers, want 3", n)
			}
			put("a", "2")
			put("b", "3")
			put("a", "4")
			// Each subscriber ends at every record's last state (a record
			// written twice between two polls shows once, at its last).
			for i, s := range subs {
				last := map[string]string{}
				pos := s.From
				for last["a"] != "4" || last["b"] != "3" {
					select {
					case b := <-s.Events():
						for _, c := range b.Changes {
							if c.Seq <= pos {
								t.Errorf("subscriber %d: change %d at or before its position %d", i, c.Seq, pos)
							}
							last[c.Row.UID] = c.Row.ResourceVersion
						}
						pos = b.Head
					case <-time.After(10 * time.Second):
						t.Fatalf("subscriber %d: stopped at %v", i, last)
					}
				}
				if _, ok := last["before"]; ok {
					t.Errorf("subscriber %d was told of a change before it subscribed", i)
				}
			}
			for _, s := range subs {
				s.Close()
			}
			if n := f.Stats().Subscribers; n != 0 {
				t.Fatalf("%d subscribers after all closed", n)
			}
			sandboxtest.Eventually(t, 5*time.Second, "the poller stopping", func(context.Context) error {
				p := f.Stats().Polls
				time.Sleep(100 * time.Millisecond)
				if f.Stats().Polls != p {
					return context.DeadlineExceeded
				}
				return nil
			})
		})
	}
}

// TestFeedWokenByTheIngester: a change reaches the subscribers when the
// ingester's word that it committed comes over NATS, without waiting for
// a poll (here an hour away); a burst of words costs far fewer reads than
// words, and the feed stops listening when its last subscriber leaves.
func TestFeedWokenByTheIngester(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	nats := streamtest.Start(t, t.TempDir())
	streams := streamtest.Connect(t, nats.URL)
	put := func(uid string) {
		t.Helper()
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{{Cluster: "c1", APIVersion: "v1", Kind: "ConfigMap",
				Namespace: "ns", Name: uid, UID: uid, ResourceVersion: "1", Health: "Unknown", ObservedAt: time.Now()}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	f := feed.New(feed.Config{Store: st, Changes: streams, Poll: time.Hour})
	s, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first read happens at once; the feed then listens.
	sandboxtest.Eventually(t, 5*time.Second, "the first read", func(context.Context) error {
		if f.Stats().Polls == 0 {
			return context.DeadlineExceeded
		}
		return nil
	})
	for i := range 3 {
		uid := fmt.Sprintf("cm-%d", i)
		put(uid)
		t0 := time.Now()
		// The word may reach a feed that is not subscribed yet: say it
		// until the change arrives, as each commit of the ingester would.
		seen := false
		for !seen && time.Since(t0) < 10*time.Second {
			streams.NotifyInventoryChanged()
			select {
			case b := <-s.Events():
				for _, c := range b.Changes {
					seen = seen || c.Row.UID == uid
				}
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !seen {
			t.Fatalf("change %s not delivered within 10 s of the words that it was committed (poll an hour away)", uid)
		}
	}
	before := f.Stats()
	for range 500 {
		streams.NotifyInventoryChanged()
	}
	sandboxtest.Eventually(t, 5*time.Second, "the burst's words heard", func(context.Context) error {
		if f.Stats().Wakes < before.Wakes+500 {
			return context.DeadlineExceeded
		}
		return nil
	})
	// Each read is at least MinGap (10 ms) after the one before: the
	// burst, heard within a few milliseconds, costs a few reads.
	if reads := f.Stats().Polls - before.Polls; reads > 100 {
		t.Errorf("500 words cost %d reads of the database; they should coalesce", reads)
	}
	s.Close()
	time.Sleep(200 * time.Millisecond)
	wakes := f.Stats().Wakes
	streams.NotifyInventoryChanged()
	time.Sleep(200 * time.Millisecond)
	if f.Stats().Wakes != wakes {
		t.Error("the feed still listens with no subscriber")
	}
}
