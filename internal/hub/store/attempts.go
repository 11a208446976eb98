package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Attempt is one placement of a runnable on one cluster.
type Attempt struct {
	RunnableUID string
	Number      int
	Cluster     string
	ObjectUID   string
	StartedAt   time.Time
	EndedAt     *time.Time
	Result      string
	Reason      string
	Message     string
	// Cleanup is what is left to remove of an ended attempt's object:
	// "" nothing, CleanupPending, CleanupDone.
	Cleanup string
	// CleanupAfter holds a pending cleanup back until then (nil: at once).
	CleanupAfter *time.Time
	// CarriedIn is what the attempt started with: preserved values and the
	// restore point's path. Reported is what its object reported when it
	// was left. Note says why something reported was not carried on.
	CarriedIn map[string]string
	Reported  map[string]string
	Note      string
	// CreateLandedBy is the latest moment a create the submitter sent for
	// the object can take effect on the cluster (nil: none was sent). Only
	// Attempts.SetCreateLandedBy sets it; Attempts.Put leaves it as it is.
	CreateLandedBy *time.Time
	// Generation is the generation of the runnable's spec the attempt's
	// object carries: the spec's when the attempt was placed, a later one
	// once an update in place reached the object. Put writes it for a new
	// attempt only; Attempts.SetGeneration moves it.
	Generation int64
}

// Attempts is the attempts table as one transaction reads and writes it.
type Attempts struct{ tx *Tx }

// Attempts returns the attempts as tx sees them.
func (tx *Tx) Attempts() Attempts { return Attempts{tx} }

// Attempt cleanup states.
const (
	CleanupPending = "Pending"
	CleanupDone    = "Done"
)

// Put inserts or replaces attempt (RunnableUID, Number). It returns
// ErrNotFound when the runnable does not exist.
func (at Attempts) Put(ctx context.Context, a *Attempt) error {
	// Checked first, rather than left to the foreign key, because a
	// violation would abort a PostgreSQL transaction.
	if err := at.tx.mustExist(ctx, "runnables", "uid", a.RunnableUID); err != nil {
		return fmt.Errorf("put attempt %d: %w", a.Number, err)
	}
	carried, err := jsonMap(a.CarriedIn)
	if err != nil {
		return fmt.Errorf("put attempt %d: carried in: %w", a.Number, err)
	}
	reported, err := jsonMap(a.Reported)
	if err != nil {
		return fmt.Errorf("put attempt %d: reported: %w", a.Number, err)
	}
	_, err = at.tx.exec(ctx, `INSERT INTO attempts (runnable_uid, number, cluster, object_uid, started_at,
			ended_at, result, reason, message, cleanup, cleanup_after, carried_in, reported, note, generation)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (runnable_uid, number) DO UPDATE SET cluster = excluded.cluster,
			object_uid = excluded.object_uid, started_at = excluded.started_at,
			ended_at = excluded.ended_at, result = excluded.result, reason = excluded.reason,
			message = excluded.message, cleanup = excluded.cleanup, cleanup_after = excluded.cleanup_after,
			carried_in = excluded.carried_in, reported = excluded.reported, note = excluded.note`,
		a.RunnableUID, a.Number, a.Cluster, a.ObjectUID, at.tx.s.d.ts(a.StartedAt), at.tx.s.d.nullTS(a.EndedAt),
		a.Result, a.Reason, a.Message, a.Cleanup, at.tx.s.d.nullTS(a.CleanupAfter), carried, reported, a.Note, a.Generation)
	if err != nil {
		return fmt.Errorf("put attempt %d of runnable %s: %w", a.Number, a.RunnableUID, classify(err))
	}
	return nil
}

// SetCreateLandedBy records when a create of attempt number's object can
// last take effect: before a send, the send's bound; once the cluster
// answered, the time of the answer. It reports false, and records nothing,
// when the attempt has ended: a create must not be sent then, since the
// runnable may be on its way elsewhere. Recorded in the row the attempt's
// end is written to, the two are ordered: a controller that ends the
// attempt sees every send that may still land (Attempts.LockCreateLandedBy).
func (at Attempts) SetCreateLandedBy(ctx context.Context, runnableUID string, number int, landedBy time.Time) (bool, error) {
	res, err := at.tx.exec(ctx, `UPDATE attempts SET create_landed_by = ?
		WHERE runnable_uid = ? AND number = ? AND ended_at IS NULL`,
		at.tx.s.d.ts(landedBy), runnableUID, number)
	if err != nil {
		return false, fmt.Errorf("mark the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mark the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return n == 1, nil
}

// SetGeneration records that the object of attempt number carries the
// runnable's spec of generation gen (an update applied in place). It
// reports false, and records nothing, when the attempt has ended.
func (at Attempts) SetGeneration(ctx context.Context, runnableUID string, number int, gen int64) (bool, error) {
	res, err := at.tx.exec(ctx, `UPDATE attempts SET generation = ?
		WHERE runnable_uid = ? AND number = ? AND ended_at IS NULL`, gen, runnableUID, number)
	if err != nil {
		return false, fmt.Errorf("set the generation of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("set the generation of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return n == 1, nil
}

// UndoCreateLandedBy puts back prev (nil: none) after a send recorded as
// mark was found never to have left, unless another write replaced mark
// meanwhile.
func (at Attempts) UndoCreateLandedBy(ctx context.Context, runnableUID string, number int, mark time.Time, prev *time.Time) error {
	_, err := at.tx.exec(ctx, `UPDATE attempts SET create_landed_by = ?
		WHERE runnable_uid = ? AND number = ? AND create_landed_by = ?`,
		at.tx.s.d.nullTS(prev), runnableUID, number, at.tx.s.d.ts(mark))
	if err != nil {
		return fmt.Errorf("undo the create mark of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return nil
}

// LockCreateLandedBy reads CreateLandedBy of attempt number; on
// PostgreSQL the row stays locked to the end of the transaction, so that a
// SetCreateLandedBy waits for it and then sees whether it ended the
// attempt. SQLite has a single writer anyway.
func (at Attempts) LockCreateLandedBy(ctx context.Context, runnableUID string, number int) (*time.Time, error) {
	q := `SELECT create_landed_by FROM attempts WHERE runnable_uid = ? AND number = ?`
	if at.tx.s.d.engine == EnginePostgres {
		q += " FOR UPDATE"
	}
	var landedBy *time.Time
	err := at.tx.queryRow(ctx, q, runnableUID, number).Scan(nullTimeCol{&landedBy})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("attempt %d of %s: %w", number, runnableUID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return landedBy, nil
}

// List returns the attempts of a runnable ordered by Number.
func (at Attempts) List(ctx context.Context, runnableUID string) ([]*Attempt, error) {
	out, err := at.scan(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE runnable_uid = ? ORDER BY number`,
		runnableUID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", runnableUID, err)
	}
	return out, nil
}

const attemptColumns = `runnable_uid, number, cluster, object_uid, started_at, ended_at,
	result, reason, message, cleanup, cleanup_after, carried_in, reported, note, create_landed_by, generation`

func (at Attempts) scan(ctx context.Context, query string, args ...any) ([]*Attempt, error) {
	rows, err := at.tx.query(ctx, query, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []*Attempt
	for rows.Next() {
		a := &Attempt{}
		var carried, reported string
		if err := rows.Scan(&a.RunnableUID, &a.Number, &a.Cluster, &a.ObjectUID, timeCol{&a.StartedAt},
			nullTimeCol{&a.EndedAt}, &a.Result, &a.Reason, &a.Message, &a.Cleanup,
			nullTimeCol{&a.CleanupAfter}, &carried, &reported, &a.Note, nullTimeCol{&a.CreateLandedBy}, &a.Generation); err != nil {
			return nil, classify(err)
		}
		var err error
		if a.CarriedIn, err = mapJSON(carried); err != nil {
			return nil, fmt.Errorf("attempt %d of %s: carried_in: %w", a.Number, a.RunnableUID, err)
		}
		if a.Reported, err = mapJSON(reported); err != nil {
			return nil, fmt.Errorf("attempt %d of %s: reported: %w", a.Number, a.RunnableUID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// Count returns how many attempts each of the given runnables has
// (by uid; a runnable with none is absent), for the lists that do not
// carry the attempts themselves.
func (at Attempts) Count(ctx context.Context, uids []string) (map[string]int, error) {
	out := map[string]int{}
	for start := 0; start < len(uids); start += inChunk {
		part := uids[start:min(start+inChunk, len(uids))]
		args := make([]any, len(part))
		for i, u := range part {
			args[i] = u
		}
		rows, err := at.tx.query(ctx, `SELECT runnable_uid, COUNT(*) FROM attempts WHERE runnable_uid IN (?`+
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

// ListPendingCleanups returns up to limit attempts (<= 0: 500, capped at
// 1000) whose object is still to be removed, oldest end first.
func (at Attempts) ListPendingCleanups(ctx context.Context, limit int) ([]*Attempt, error) {
	out, err := at.scan(ctx, `SELECT `+attemptColumns+` FROM attempts
		WHERE cleanup = ? ORDER BY ended_at, runnable_uid, number LIMIT ?`, CleanupPending, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list pending cleanups: %w", err)
	}
	return out, nil
}
