package store

import (
	"context"
	"fmt"
	"strings"
)

// CountRunnablesByClusterPhase counts the runnables placed on each cluster
// (their current cluster), by phase: what the console's farm view draws.
// One grouped scan of the runnables' cluster index.
func (tx *Tx) CountRunnablesByClusterPhase(ctx context.Context) (map[string]map[string]int, error) {
	rows, err := tx.query(ctx, `SELECT cluster, phase, COUNT(*) FROM runnables WHERE cluster <> '' GROUP BY cluster, phase`)
	if err != nil {
		return nil, fmt.Errorf("count runnables by cluster and phase: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var cluster, phase string
		var n int
		if err := rows.Scan(&cluster, &phase, &n); err != nil {
			return nil, fmt.Errorf("count runnables by cluster and phase: %w", classify(err))
		}
		if out[cluster] == nil {
			out[cluster] = map[string]int{}
		}
		out[cluster][phase] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runnables by cluster and phase: %w", classify(err))
	}
	return out, nil
}

// CountAttempts returns how many attempts each of the given runnables has
// (by uid; a runnable with none is absent), for the lists that do not
// carry the attempts themselves.
func (tx *Tx) CountAttempts(ctx context.Context, uids []string) (map[string]int, error) {
	out := map[string]int{}
	for start := 0; start < len(uids); start += inChunk {
		part := uids[start:min(start+inChunk, len(uids))]
		args := make([]any, len(part))
		for i, u := range part {
			args[i] = u
		}
		rows, err := tx.query(ctx, `SELECT runnable_uid, COUNT(*) FROM attempts WHERE runnable_uid IN (?`+
			strings.Repeat(", ?", len(part)-1)+`) GROUP BY runnable_uid`, args...)
		if err != nil {
			return nil, fmt.Errorf("count attempts: %w", classify(err))
		}
		for rows.Next() {
			var uid string
			var n int
			if err := rows.Scan(&uid, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("count attempts: %w", classify(err))
			}
			out[uid] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("count attempts: %w", classify(err))
		}
	}
	return out, nil
}
