package store

import (
	"context"
	"fmt"
	"strings"
)

// ListRunnablesInPhases returns up to limit runnables (<= 0: 500, capped
// at 1000) in any of phases whose ID is above afterID, ordered by ID: the
// controller's scan of the work that occupies clusters, resumed from the
// last ID of the previous page.
func (tx *Tx) ListRunnablesInPhases(ctx context.Context, phases []string, afterID int64, limit int) ([]*Runnable, error) {
	if len(phases) == 0 {
		return nil, nil
	}
	limit = pageLimit(limit)
	args := []any{afterID}
	for _, p := range phases {
		args = append(args, p)
	}
	args = append(args, limit)
	rows, err := tx.query(ctx, `SELECT `+runnableColumns+` FROM runnables
		WHERE id > ? AND phase IN (?`+strings.Repeat(", ?", len(phases)-1)+`)
		ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list runnables in phases %v: %w", phases, classify(err))
	}
	defer rows.Close()
	var out []*Runnable
	for rows.Next() {
		r, err := scanRunnable(rows)
		if err != nil {
			return nil, fmt.Errorf("list runnables in phases %v: %w", phases, classify(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runnables in phases %v: %w", phases, classify(err))
	}
	return out, nil
}

// ListPendingCleanups returns up to limit attempts (<= 0: 500, capped at
// 1000) whose object is still to be removed, oldest end first.
func (tx *Tx) ListPendingCleanups(ctx context.Context, limit int) ([]*Attempt, error) {
	out, err := tx.scanAttempts(ctx, `SELECT `+attemptColumns+` FROM attempts
		WHERE cleanup = ? ORDER BY ended_at, runnable_uid, number LIMIT ?`, CleanupPending, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list pending cleanups: %w", err)
	}
	return out, nil
}
