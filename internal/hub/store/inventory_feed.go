package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The inventory's change sequence (migration 00019): every write of a
// record and every removal takes the next number of one global sequence,
// handed out from the single inventory_feed row. A writer bumps that row
// first in its transaction (lockFeed), before any cluster's lock, and
// holds its lock until it commits, so that numbers commit in their order:
// a reader whose snapshot holds number N holds every change below N. That
// is what lets one number stand for every cluster's position, and a watch
// resume from it missing nothing and repeating nothing. It serializes the
// inventory's writers on PostgreSQL (SQLite has one writer anyway), which
// the per-cluster locks below it did not; the ingester writes in batches,
// so a transaction is one lock for many records.

// FeedHead is where the change sequence stands.
type FeedHead struct {
	// Seq is the number of the last committed change.
	Seq int64
	// PrunedTo: the deletions at or below it are forgotten, so changes
	// after a number below it can no longer all be told.
	PrunedTo int64
}

// InventoryChange is one change of the inventory: a record as written by
// change Seq, or as it was when removed (Deleted).
type InventoryChange struct {
	Seq int64
	// CreatedSeq is the number of the record's first change: a watcher
	// from before it sees the record ADDED, else MODIFIED.
	CreatedSeq int64
	Deleted    bool
	Row        InventoryRow
}

// lockFeed takes the sequence's row lock until commit (PostgreSQL), first
// of the inventory's locks, so that every writer takes them in one order.
func (inv Inventory) lockFeed(ctx context.Context) error {
	if inv.tx.s.d.engine != EnginePostgres || inv.tx.feedLocked {
		return nil
	}
	var seq int64
	if err := inv.tx.queryRow(ctx, `SELECT seq FROM inventory_feed WHERE id = 1 FOR UPDATE`).Scan(&seq); err != nil {
		return fmt.Errorf("lock the inventory's change sequence: %w", classify(err))
	}
	inv.tx.feedLocked = true
	return nil
}

// nextSeqs hands out n numbers and returns the first.
func (inv Inventory) nextSeqs(ctx context.Context, n int) (int64, error) {
	var last int64
	if err := inv.tx.queryRow(ctx, `UPDATE inventory_feed SET seq = seq + ? WHERE id = 1 RETURNING seq`, n).Scan(&last); err != nil {
		return 0, fmt.Errorf("number inventory changes: %w", classify(err))
	}
	return last - int64(n) + 1, nil
}

// recordDeletions numbers the removal of rows and keeps their last state.
func (inv Inventory) recordDeletions(ctx context.Context, rows []InventoryRow) error {
	if len(rows) == 0 {
		return nil
	}
	first, err := inv.nextSeqs(ctx, len(rows))
	if err != nil {
		return err
	}
	now := inv.tx.s.d.ts(inv.tx.s.now())
	const cols = 11
	values := make([]string, len(rows))
	args := make([]any, 0, cols*len(rows))
	for i, r := range rows {
		labelDoc, err := labelsJSON(r.Labels)
		if err != nil {
			return fmt.Errorf("labels of %s: %w", r.UID, err)
		}
		values[i] = "(" + placeholders(cols) + ")"
		args = append(args, first+int64(i), r.Cluster, r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID, r.ResourceVersion,
			labelDoc, nullText(r.Object), now)
	}
	if _, err := inv.tx.exec(ctx, `INSERT INTO inventory_deletions (seq, cluster, api_version, kind, namespace, name, uid,
		resource_version, labels, object, deleted_at) VALUES `+strings.Join(values, ", "), args...); err != nil {
		return fmt.Errorf("record inventory deletions: %w", classify(err))
	}
	return nil
}

// pruneDeletions forgets removals recorded before cutoff, and moves the
// horizon of watches past them.
func (inv Inventory) pruneDeletions(ctx context.Context, cutoff time.Time) error {
	var top *int64
	if err := inv.tx.queryRow(ctx, `SELECT MAX(seq) FROM inventory_deletions WHERE deleted_at < ?`,
		inv.tx.s.d.ts(cutoff)).Scan(&top); err != nil {
		return fmt.Errorf("deletions: %w", classify(err))
	}
	if top == nil {
		return nil
	}
	if _, err := inv.tx.exec(ctx, `DELETE FROM inventory_deletions WHERE seq <= ?`, *top); err != nil {
		return fmt.Errorf("deletions: %w", classify(err))
	}
	if _, err := inv.tx.exec(ctx, `UPDATE inventory_feed SET pruned_to = ? WHERE id = 1 AND pruned_to < ?`, *top, *top); err != nil {
		return fmt.Errorf("deletions: %w", classify(err))
	}
	return nil
}

// FeedHead reads where the change sequence stands, as of the
// transaction's snapshot: read in the transaction of a list, it is the
// number the list is at.
func (inv Inventory) FeedHead(ctx context.Context) (FeedHead, error) {
	var h FeedHead
	if err := inv.tx.queryRow(ctx, `SELECT seq, pruned_to FROM inventory_feed WHERE id = 1`).Scan(&h.Seq, &h.PrunedTo); err != nil {
		return h, fmt.Errorf("inventory change sequence: %w", classify(err))
	}
	return h, nil
}

// Changes returns up to limit changes numbered after after, in their
// order, each record as its last change left it (a record changed twice
// after after shows once, at its last number). System objects are left
// out unless system.
func (inv Inventory) Changes(ctx context.Context, after int64, limit int, system bool) ([]InventoryChange, error) {
	cond, args := "seq > ?", []any{after}
	if !system {
		c, a := notSystemSQL()
		cond, args = cond+" AND "+c, append(args, a...)
	}
	args = append(args, limit)
	var out []InventoryChange
	for _, q := range []struct {
		sql     string
		deleted bool
	}{
		{`SELECT seq, created_seq, cluster, api_version, kind, namespace, name, uid, resource_version, labels, health,
			phase, observed_at, object FROM inventory WHERE ` + cond + ` ORDER BY seq LIMIT ?`, false},
		{`SELECT seq, seq, cluster, api_version, kind, namespace, name, uid, resource_version, labels, '', '',
			deleted_at, object FROM inventory_deletions WHERE ` + cond + ` ORDER BY seq LIMIT ?`, true},
	} {
		rows, err := inv.tx.query(ctx, q.sql, args...)
		if err != nil {
			return nil, fmt.Errorf("inventory changes: %w", classify(err))
		}
		for rows.Next() {
			var (
				c        InventoryChange
				labelDoc string
				obj      *string
			)
			r := &c.Row
			if err := rows.Scan(&c.Seq, &c.CreatedSeq, &r.Cluster, &r.APIVersion, &r.Kind, &r.Namespace, &r.Name, &r.UID,
				&r.ResourceVersion, &labelDoc, &r.Health, &r.Phase, timeCol{&r.ObservedAt}, &obj); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inventory changes: %w", classify(err))
			}
			if r.Labels, err = decodeLabels(labelDoc); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inventory changes: labels of %s/%s: %w", r.Cluster, r.UID, err)
			}
			if obj != nil {
				r.Object = []byte(*obj)
			}
			c.Deleted, r.Seq = q.deleted, c.Seq
			out = append(out, c)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("inventory changes: %w", classify(err))
		}
	}
	// Each query returned the first limit of its own; the first limit of
	// both are among them.
	slices.SortFunc(out, func(a, b InventoryChange) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// InventoryKind is a kind the inventory holds records of, in a cluster.
type InventoryKind struct {
	Cluster, APIVersion, Kind string
}

// Kinds returns every (cluster, apiVersion, kind) the inventory holds
// records of. It reads the whole table: callers cache it.
func (inv Inventory) Kinds(ctx context.Context) ([]InventoryKind, error) {
	rows, err := inv.tx.query(ctx, `SELECT DISTINCT cluster, api_version, kind FROM inventory`)
	if err != nil {
		return nil, fmt.Errorf("inventory kinds: %w", classify(err))
	}
	defer rows.Close()
	var out []InventoryKind
	for rows.Next() {
		var k InventoryKind
		if err := rows.Scan(&k.Cluster, &k.APIVersion, &k.Kind); err != nil {
			return nil, fmt.Errorf("inventory kinds: %w", classify(err))
		}
		out = append(out, k)
	}
	return out, classify(rows.Err())
}
