package store

import (
	"context"
	"fmt"
	"time"
)

// LeftoverCopy is an object that an attempt of a removed runnable may
// have left on its cluster: the controller deletes it (only if it still
// carries the runnable's labels) and then drops the row.
type LeftoverCopy struct {
	RunnableUID string
	Attempt     int
	Cluster     string
	APIVersion  string
	Kind        string
	Namespace   string
	Name        string
	// Runnable is namespace/name of the removed runnable, for the audit log.
	Runnable  string
	CreatedAt time.Time
}

// LeftoverCopies is the leftover_copies table as one transaction reads and
// writes it.
type LeftoverCopies struct{ tx *Tx }

// LeftoverCopies returns the leftover copies as tx sees them.
func (tx *Tx) LeftoverCopies() LeftoverCopies { return LeftoverCopies{tx} }

// Put records c; recording it again changes nothing.
func (lc LeftoverCopies) Put(ctx context.Context, c *LeftoverCopy) error {
	_, err := lc.tx.exec(ctx, `INSERT INTO leftover_copies (runnable_uid, attempt, cluster, api_version, kind,
			namespace, name, runnable, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (runnable_uid, attempt) DO NOTHING`,
		c.RunnableUID, c.Attempt, c.Cluster, c.APIVersion, c.Kind, c.Namespace, c.Name, c.Runnable,
		lc.tx.s.d.ts(lc.tx.s.now()))
	if err != nil {
		return fmt.Errorf("record leftover copy of %s attempt %d: %w", c.Runnable, c.Attempt, classify(err))
	}
	return nil
}

// List returns up to limit copies (<= 0: 500, capped at
// 1000), oldest first.
func (lc LeftoverCopies) List(ctx context.Context, limit int) ([]*LeftoverCopy, error) {
	rows, err := lc.tx.query(ctx, `SELECT runnable_uid, attempt, cluster, api_version, kind, namespace, name,
			runnable, created_at
		FROM leftover_copies ORDER BY created_at, runnable_uid, attempt LIMIT ?`, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list leftover copies: %w", classify(err))
	}
	defer rows.Close()
	var out []*LeftoverCopy
	for rows.Next() {
		c := &LeftoverCopy{}
		if err := rows.Scan(&c.RunnableUID, &c.Attempt, &c.Cluster, &c.APIVersion, &c.Kind, &c.Namespace,
			&c.Name, &c.Runnable, timeCol{&c.CreatedAt}); err != nil {
			return nil, fmt.Errorf("list leftover copies: %w", classify(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list leftover copies: %w", classify(err))
	}
	return out, nil
}

// Delete drops the row of c; ErrNotFound when it is gone
// already (another controller got there first).
func (lc LeftoverCopies) Delete(ctx context.Context, c *LeftoverCopy) error {
	res, err := lc.tx.exec(ctx, `DELETE FROM leftover_copies WHERE runnable_uid = ? AND attempt = ?`, c.RunnableUID, c.Attempt)
	if err != nil {
		return fmt.Errorf("drop leftover copy of %s attempt %d: %w", c.Runnable, c.Attempt, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return classify(err)
	} else if n == 0 {
		return fmt.Errorf("leftover copy of %s attempt %d: %w", c.Runnable, c.Attempt, ErrNotFound)
	}
	return nil
}
