package store

import (
	"context"
	"fmt"
	"time"
)

// The change sequence of purser's own kinds (migration 00034), which the
// watches of /k8s read. Database triggers on runnables, deployables (and
// their per-cluster status) and quotas append a row to own_changes in the
// writer's transaction, so that every write path, present or future, is
// told; the writer pays one small insert and takes no shared lock.
//
// The row gets its position (pos) later, from Number, and not at insert:
// on PostgreSQL a number taken at insert (the id, a sequence) can commit
// out of order, so that a watcher who read up to 12 would never see 11,
// committed after it. Serializing the writers on one counter row, as the
// inventory does (lockFeed), would make every writer of a runnable wait
// for every other and, taken from a trigger after the row's own lock,
// deadlock two writers that touch two runnables in opposite orders.
// Number instead numbers only rows already committed (those its snapshot
// sees), one numberer at a time (own_feed's row lock, held to commit), so
// that positions commit in their order and a row committed later gets a
// higher one: a reader whose snapshot holds position N holds every
// position below N. The price is that a change is watchable from the
// next Number on, not from its commit.

// OwnChange is one change of one of purser's own objects.
type OwnChange struct {
	Seq                   int64
	Kind, Namespace, Name string
	// UID tells one object from a later one of the same name (a quota:
	// its creation time).
	UID string
	// Type is ADDED, MODIFIED or DELETED.
	Type string
	At   time.Time
}

// OwnFeed is the change sequence of purser's own kinds.
type OwnFeed struct{ tx *Tx }

// OwnFeed returns the sequence as tx sees it.
func (tx *Tx) OwnFeed() OwnFeed { return OwnFeed{tx} }

// Number gives positions, in order, to up to limit committed changes
// without one, and returns how many it numbered. It takes
// own_feed's row lock until commit; run it in its own short transaction.
func (f OwnFeed) Number(ctx context.Context, limit int) (int, error) {
	var seq int64
	// The lock first, and the rows to number in a statement after it: at
	// READ COMMITTED that statement's snapshot sees what a numberer ahead
	// of this one committed.
	lock := `SELECT seq FROM own_feed WHERE id = 1`
	if f.tx.s.d.engine == EnginePostgres {
		lock += ` FOR UPDATE`
	}
	if err := f.tx.queryRow(ctx, lock).Scan(&seq); err != nil {
		return 0, fmt.Errorf("number own changes: %w", classify(err))
	}
	res, err := f.tx.exec(ctx, `WITH todo AS (
			SELECT id, row_number() OVER (ORDER BY id) AS n FROM own_changes
			WHERE pos IS NULL ORDER BY id LIMIT ?)
		UPDATE own_changes SET pos = ? + (SELECT n FROM todo WHERE todo.id = own_changes.id)
		WHERE id IN (SELECT id FROM todo)`, limit, seq)
	if err != nil {
		return 0, fmt.Errorf("number own changes: %w", classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("number own changes: %w", classify(err))
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := f.tx.exec(ctx, `UPDATE own_feed SET seq = seq + ? WHERE id = 1`, n); err != nil {
		return 0, fmt.Errorf("number own changes: %w", classify(err))
	}
	return int(n), nil
}

// Head reads where the sequence stands as of the transaction's snapshot.
func (f OwnFeed) Head(ctx context.Context) (FeedHead, error) {
	var h FeedHead
	if err := f.tx.queryRow(ctx, `SELECT seq, pruned_to FROM own_feed WHERE id = 1`).Scan(&h.Seq, &h.PrunedTo); err != nil {
		return h, fmt.Errorf("own change sequence: %w", classify(err))
	}
	return h, nil
}

// Changes returns up to limit numbered changes after after, in their
// order.
func (f OwnFeed) Changes(ctx context.Context, after int64, limit int) ([]OwnChange, error) {
	rows, err := f.tx.query(ctx, `SELECT pos, kind, namespace, name, uid, type, at FROM own_changes
		WHERE pos > ? ORDER BY pos LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("own changes: %w", classify(err))
	}
	defer rows.Close()
	var out []OwnChange
	for rows.Next() {
		var c OwnChange
		if err := rows.Scan(&c.Seq, &c.Kind, &c.Namespace, &c.Name, &c.UID, &c.Type, timeCol{&c.At}); err != nil {
			return nil, fmt.Errorf("own changes: %w", classify(err))
		}
		out = append(out, c)
	}
	return out, classify(rows.Err())
}

// Prune forgets the numbered changes made before cutoff (the caller
// numbers first, so that little is left unnumbered), and moves the
// horizon of watches past them: a watch from below it is told to list
// again (410). It returns how many it forgot.
func (f OwnFeed) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	var top *int64
	if err := f.tx.queryRow(ctx, `SELECT MAX(pos) FROM own_changes WHERE pos IS NOT NULL AND at < ?`,
		f.tx.s.d.ts(cutoff)).Scan(&top); err != nil {
		return 0, fmt.Errorf("prune own changes: %w", classify(err))
	}
	if top == nil {
		return 0, nil
	}
	res, err := f.tx.exec(ctx, `DELETE FROM own_changes WHERE pos <= ?`, *top)
	if err != nil {
		return 0, fmt.Errorf("prune own changes: %w", classify(err))
	}
	if _, err := f.tx.exec(ctx, `UPDATE own_feed SET pruned_to = ? WHERE id = 1 AND pruned_to < ?`, *top, *top); err != nil {
		return 0, fmt.Errorf("prune own changes: %w", classify(err))
	}
	n, err := res.RowsAffected()
	return int(n), classify(err)
}
