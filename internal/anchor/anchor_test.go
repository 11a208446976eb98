package anchor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/anchor"
	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/store/storetest"
	"github.com/purser-io/purser/internal/stream"
	"github.com/purser-io/purser/internal/stream/streamtest"
)

// Two api replicas publish the head of a growing chain; the stream keeps
// each head once, refuses to be purged, and a chain forged in the database
// (its tail rewritten with recomputed hashes) verifies on its own but not
// against the published heads.
func TestAnchors(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			dsn := eng.NewDSN(t)
			db, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			srv := streamtest.Start(t, "")
			streams := streamtest.Declared(t, srv.URL)

			runCtx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 2 {
				c := streamtest.Connect(t, srv.URL)
				wg.Go(func() {
					_ = anchor.Run(runCtx, anchor.Config{Store: db, Stream: c, Interval: 50 * time.Millisecond})
				})
			}
			stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
			t.Cleanup(stop)

			appendEntries(t, db, 0, 5)
			waitAnchored(t, streams, 5)
			appendEntries(t, db, 5, 3)
			anchors := waitAnchored(t, streams, 8)
			seen := map[int64]bool{}
			for _, a := range anchors {
				if seen[a.Seq] {
					t.Errorf("seq %d anchored twice: %v", a.Seq, anchors)
				}
				seen[a.Seq] = true
			}
			res, err := db.VerifyAuditAnchored(ctx, anchors)
			if err != nil || !res.OK || res.Entries != 8 || res.Anchors != len(anchors) {
				t.Fatalf("the honest chain: %+v, %v", res, err)
			}

			s, err := streams.JetStream().Stream(ctx, stream.AuditStream)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Purge(ctx); err == nil {
				t.Errorf("the stream of anchors was purged")
			}

			// The forgery: entries 3 to 8 rewritten, hashes recomputed, the
			// head moved along, as someone with the database's password can.
			stop()
			var entries []*audit.Entry
			if err := db.Read(ctx, func(tx *store.Tx) (err error) {
				entries, err = tx.ListAudit(ctx, store.AuditFilter{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			storetest.ForgeAuditTail(t, dsn, entries, 3)
			if res, err := db.VerifyAudit(ctx); err != nil || !res.OK {
				t.Fatalf("the forgery should verify on its own: %+v, %v", res, err)
			}
			anchors, err = anchor.Read(ctx, streams)
			if err != nil {
				t.Fatal(err)
			}
			res, err = db.VerifyAuditAnchored(ctx, anchors)
			if err != nil {
				t.Fatal(err)
			}
			// The publishers may have caught any head on the way: the first
			// anchored one from 3 on is where the forgery shows.
			first := int64(0)
			for _, a := range anchors {
				if a.Seq >= 3 && (first == 0 || a.Seq < first) {
					first = a.Seq
				}
			}
			if res.OK || res.BrokenSeq != first {
				t.Fatalf("the forgery against the anchors %v: %+v, want broken at seq %d (the first anchored entry rewritten)", anchors, res, first)
			}
			t.Logf("forgery found: %+v", res)
		})
	}
}

func appendEntries(t *testing.T, db *store.Store, from, n int) {
	t.Helper()
	for i := range n {
		err := db.Tx(t.Context(), func(tx *store.Tx) error {
			return tx.AppendAudit(t.Context(), &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable",
				Namespace: "team-a", Name: fmt.Sprintf("r-%d", from+i), Summary: "submitted", Outcome: "Queued"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitAnchored waits until a head of seq is published and returns every
// anchor read then.
func waitAnchored(t *testing.T, c *stream.Client, seq int64) []audit.Anchor {
	t.Helper()
	var anchors []audit.Anchor
	sandboxtest.Eventually(t, streamtest.Timeout, fmt.Sprintf("seq %d anchored", seq), func(ctx context.Context) error {
		var err error
		if anchors, err = anchor.Read(ctx, c); err != nil {
			return err
		}
		// Any anchor: a replica that read an older head may publish it
		// after another published a newer one.
		if !slices.ContainsFunc(anchors, func(a audit.Anchor) bool { return a.Seq == seq }) {
			return fmt.Errorf("anchors %v", anchors)
		}
		return nil
	})
	return anchors
}
