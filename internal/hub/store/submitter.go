package store

import (
	"context"
	"fmt"
	"strings"
)

// CountRunnablesByCluster returns, per cluster, how many runnables are in
// one of phases. The submitter weighs clusters by it on every placement,
// so it is one aggregate query rather than pages of whole rows.
// Runnables with no cluster are not counted.
func (tx *Tx) CountRunnablesByCluster(ctx context.Context, phases ...string) (map[string]int, error) {
	out := map[string]int{}
	if len(phases) == 0 {
		return out, nil
	}
	args := make([]any, len(phases))
	for i, p := range phases {
		args[i] = p
	}
	q := `SELECT cluster, COUNT(*) FROM runnables WHERE cluster <> '' AND phase IN (?` +
		strings.Repeat(", ?", len(phases)-1) + `) GROUP BY cluster`
	rows, err := tx.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("count runnables by cluster: %w", classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var cluster string
		var n int
		if err := rows.Scan(&cluster, &n); err != nil {
			return nil, fmt.Errorf("count runnables by cluster: %w", classify(err))
		}
		out[cluster] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runnables by cluster: %w", classify(err))
	}
	return out, nil
}

// ListRunnableUIDsWithOpenAttempt returns the uids of runnables in phase
// with an attempt that has not ended, at most limit of them. The submitter
// uses it to find cancelled runnables whose object may still be on a
// cluster, so that a cancellation never depends on one message arriving.
func (tx *Tx) ListRunnableUIDsWithOpenAttempt(ctx context.Context, phase string, limit int) ([]string, error) {
	limit = pageLimit(limit)
	rows, err := tx.query(ctx, `SELECT DISTINCT r.uid FROM runnables r
		JOIN attempts a ON a.runnable_uid = r.uid
		WHERE r.phase = ? AND a.ended_at IS NULL
		ORDER BY r.uid LIMIT ?`, phase, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s runnables with an open attempt: %w", phase, classify(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			return nil, fmt.Errorf("list %s runnables with an open attempt: %w", phase, classify(err))
		}
		out = append(out, uid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s runnables with an open attempt: %w", phase, classify(err))
	}
	return out, nil
}
