package store

import (
	"context"
	"fmt"
)

// ListAttemptsOf returns the attempts of several runnables, by runnable
// uid, each in order: what a list of runnables shows beside each one,
// read in a few queries rather than one per runnable.
func (tx *Tx) ListAttemptsOf(ctx context.Context, runnableUIDs []string) (map[string][]*Attempt, error) {
	out := make(map[string][]*Attempt, len(runnableUIDs))
	for start := 0; start < len(runnableUIDs); start += inChunk {
		part := runnableUIDs[start:min(start+inChunk, len(runnableUIDs))]
		args := make([]any, len(part))
		for i, uid := range part {
			args[i] = uid
		}
		got, err := tx.scanAttempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE runnable_uid IN (`+
			placeholders(len(part))+`) ORDER BY runnable_uid, number`, args...)
		if err != nil {
			return nil, fmt.Errorf("list attempts of %d runnables: %w", len(part), err)
		}
		for _, a := range got {
			out[a.RunnableUID] = append(out[a.RunnableUID], a)
		}
	}
	return out, nil
}
