package store

import (
	"fmt"
	"testing"
	"time"
)

// TestInventoryFeed: every write and removal takes the next number of one
// sequence across clusters; a list's head is a position a reader of
// Changes resumes from, missing nothing and repeating nothing; pruning
// deletions moves the horizon.
func TestInventoryFeed(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := t.Context()
			head := func() FeedHead {
				var h FeedHead
				mustRead(t, s, func(tx *Tx) error {
					var err error
					h, err = tx.Inventory().FeedHead(ctx)
					return err
				})
				return h
			}
			changes := func(after int64, limit int) []InventoryChange {
				var out []InventoryChange
				mustRead(t, s, func(tx *Tx) error {
					var err error
					out, err = tx.Inventory().Changes(ctx, after, limit, false)
					return err
				})
				return out
			}
			describe := func(cs []InventoryChange) string {
				out := ""
				for _, c := range cs {
					kind := "M"
					switch {
					case c.Deleted:
						kind = "D"
					case c.CreatedSeq == c.Seq:
						kind = "A"
					}
					out += fmt.Sprintf("%s:%s/%s@%s ", kind, c.Row.Cluster, c.Row.UID, c.Row.ResourceVersion)
				}
				return out
			}
			start := head()
			upsert(t, s, invRow("c1", "a", "10"), invRow("c2", "a", "5"))
			mid := head()
			if mid.Seq != start.Seq+2 {
				t.Fatalf("head after two writes: %d, want %d", mid.Seq, start.Seq+2)
			}
			// A replayed older state takes no change.
			upsert(t, s, invRow("c1", "a", "9"))
			upsert(t, s, invRow("c1", "a", "11"), invRow("c1", "b", "12"))
			mustTx(t, s, func(tx *Tx) error {
				_, err := tx.Inventory().Delete(ctx, []InventoryTombstone{{Cluster: "c2", UID: "a", ResourceVersion: "6", DeletedAt: time.Now()}})
				return err
			})
			all := changes(start.Seq, 100)
			if got, want := describe(all), "M:c1/a@11 A:c1/b@12 D:c2/a@5 "; got != want {
				t.Errorf("changes from the start: %q, want %q (c1/a once, at its last change)", got, want)
			}
			if got, want := describe(changes(mid.Seq, 100)), "M:c1/a@11 A:c1/b@12 D:c2/a@5 "; got != want {
				t.Errorf("changes from the middle: %q, want %q", got, want)
			}
			// Paging by limit resumes from the last number seen.
			first := changes(start.Seq, 2)
			rest := changes(first[len(first)-1].Seq, 100)
			if got := describe(append(first, rest...)); got != describe(all) {
				t.Errorf("paged changes %q, want %q", got, describe(all))
			}
			// The list carries each record's number.
			mustRead(t, s, func(tx *Tx) error {
				rows, _, err := tx.Inventory().List(ctx, InventoryFilter{Cluster: "c1"})
				for _, r := range rows {
					if r.Seq <= mid.Seq || r.Seq > head().Seq {
						t.Errorf("record %s at seq %d, want in (%d, %d]", r.UID, r.Seq, mid.Seq, head().Seq)
					}
				}
				return err
			})
			if h := head(); h.PrunedTo != 0 {
				t.Errorf("pruned to %d before any pruning", h.PrunedTo)
			}
			mustTx(t, s, func(tx *Tx) error {
				_, err := tx.Inventory().PruneTombstones(ctx, time.Now().Add(time.Minute))
				return err
			})
			if h := head(); h.PrunedTo != all[2].Seq {
				t.Errorf("pruned to %d, want the deletion's number %d", h.PrunedTo, all[2].Seq)
			}
			if got, want := describe(changes(start.Seq, 100)), "M:c1/a@11 A:c1/b@12 "; got != want {
				t.Errorf("changes after pruning: %q, want %q", got, want)
			}
		})
	}
}
