package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Runnable is the stored form of a runnable: work placed on one cluster at a
// time. Spec and Status are JSON and are stored byte for byte.
type Runnable struct {
	ID         int64
	Namespace  string
	Name       string
	UID        string
	Generation int64
	Spec       []byte
	SpecHash   string
	Phase      string
	Cluster    string
	Submitter  string
	Status     []byte // nil until something has been observed
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// ResourceVersion is 1 on create and grows by one with every update;
	// UpdateRunnable only succeeds against the current value.
	ResourceVersion int64
	// EndedAt is when the runnable reached an ended phase; RemoveAfter,
	// when retention removes it (nil: never).
	EndedAt     *time.Time
	RemoveAfter *time.Time
}

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
	// SetCreateLandedBy sets it; PutAttempt leaves it as it is.
	CreateLandedBy *time.Time
}

// Attempt cleanup states.
const (
	CleanupPending = "Pending"
	CleanupDone    = "Done"
)

// RunnableFilter selects runnables for ListRunnables; empty fields match
// everything.
type RunnableFilter struct {
	Namespace string
	Phase     string
	Cluster   string
	Limit     int    // <= 0: 500; capped at 1000
	Continue  string // from the previous page's next
}

const runnableColumns = `id, namespace, name, uid, generation, spec, spec_hash, phase, cluster,
	submitter, status, created_at, updated_at, resource_version, ended_at, remove_after`

func scanRunnable(row interface{ Scan(...any) error }) (*Runnable, error) {
	r := &Runnable{}
	err := row.Scan(&r.ID, &r.Namespace, &r.Name, &r.UID, &r.Generation, &r.Spec, &r.SpecHash,
		&r.Phase, &r.Cluster, &r.Submitter, &r.Status, timeCol{&r.CreatedAt}, timeCol{&r.UpdatedAt},
		&r.ResourceVersion, nullTimeCol{&r.EndedAt}, nullTimeCol{&r.RemoveAfter})
	return r, err
}

// CreateRunnable inserts r and fills its ID, CreatedAt, UpdatedAt and
// ResourceVersion. The caller chooses UID. It returns ErrConflict when
// namespace/name or UID is taken.
func (tx *Tx) CreateRunnable(ctx context.Context, r *Runnable) error {
	if r.UID == "" {
		return fmt.Errorf("create runnable %s/%s: empty uid", r.Namespace, r.Name)
	}
	now := tx.s.now()
	// ON CONFLICT DO NOTHING instead of catching a unique violation: on
	// PostgreSQL a violation would abort the whole transaction, and the
	// caller may want to carry on (for example, read the existing object).
	err := tx.queryRow(ctx, `INSERT INTO runnables (namespace, name, uid, generation, spec, spec_hash,
			phase, cluster, submitter, status, created_at, updated_at, resource_version, ended_at, remove_after)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT DO NOTHING
		RETURNING id`,
		r.Namespace, r.Name, r.UID, r.Generation, string(r.Spec), r.SpecHash,
		r.Phase, r.Cluster, r.Submitter, nullText(r.Status), tx.s.d.ts(now), tx.s.d.ts(now),
		tx.s.d.nullTS(r.EndedAt), tx.s.d.nullTS(r.RemoveAfter),
	).Scan(&r.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("create runnable %s/%s (uid %s): name or uid already exists: %w", r.Namespace, r.Name, r.UID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create runnable %s/%s: %w", r.Namespace, r.Name, classify(err))
	}
	r.CreatedAt, r.UpdatedAt, r.ResourceVersion = now, now, 1
	return nil
}

// ErrMoved is the answer to an optimistic change of a runnable that is no
// longer as the caller read it.
var ErrMoved = errors.New("runnable changed since it was read")

// GetRunnable returns the runnable namespace/name, or ErrNotFound.
func (tx *Tx) GetRunnable(ctx context.Context, namespace, name string) (*Runnable, error) {
	r, err := scanRunnable(tx.queryRow(ctx,
		`SELECT `+runnableColumns+` FROM runnables WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("runnable %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get runnable %s/%s: %w", namespace, name, classify(err))
	}
	return r, nil
}

// GetRunnableByUID returns the runnable with that UID, or ErrNotFound.
func (tx *Tx) GetRunnableByUID(ctx context.Context, uid string) (*Runnable, error) {
	r, err := scanRunnable(tx.queryRow(ctx,
		`SELECT `+runnableColumns+` FROM runnables WHERE uid = ?`, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("runnable uid %s: %w", uid, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get runnable uid %s: %w", uid, classify(err))
	}
	return r, nil
}

// UpdateRunnable writes every mutable field of r (all but ID, Namespace,
// Name, UID and CreatedAt) to the row with r's UID, provided its
// ResourceVersion is still r.ResourceVersion. On success it bumps
// r.ResourceVersion and sets r.UpdatedAt; a stale r yields ErrConflict, a
// missing row ErrNotFound.
func (tx *Tx) UpdateRunnable(ctx context.Context, r *Runnable) error {
	now := tx.s.now()
	res, err := tx.exec(ctx, `UPDATE runnables SET generation = ?, spec = ?, spec_hash = ?, phase = ?,
			cluster = ?, submitter = ?, status = ?, updated_at = ?, resource_version = resource_version + 1,
			ended_at = ?, remove_after = ?
		WHERE uid = ? AND resource_version = ?`,
		r.Generation, string(r.Spec), r.SpecHash, r.Phase, r.Cluster, r.Submitter, nullText(r.Status),
		tx.s.d.ts(now), tx.s.d.nullTS(r.EndedAt), tx.s.d.nullTS(r.RemoveAfter), r.UID, r.ResourceVersion)
	if err := tx.checkUpdated(ctx, res, err, "runnables", "uid", r.UID, r.ResourceVersion); err != nil {
		return fmt.Errorf("update runnable %s/%s: %w", r.Namespace, r.Name, err)
	}
	r.ResourceVersion++
	r.UpdatedAt = now
	return nil
}

// DeleteRunnable removes the runnable uid, and with it (the foreign key
// cascades) its attempts, provided its ResourceVersion is still rv:
// ErrConflict when it moved on, ErrNotFound when it is gone.
func (tx *Tx) DeleteRunnable(ctx context.Context, uid string, rv int64) error {
	res, err := tx.exec(ctx, `DELETE FROM runnables WHERE uid = ? AND resource_version = ?`, uid, rv)
	if err := tx.checkUpdated(ctx, res, err, "runnables", "uid", uid, rv); err != nil {
		return fmt.Errorf("delete runnable %s: %w", uid, err)
	}
	return nil
}

// checkUpdated turns the outcome of an optimistic UPDATE into nil,
// ErrConflict (the row moved on) or ErrNotFound (there is no row).
func (tx *Tx) checkUpdated(ctx context.Context, res sql.Result, err error, table, keyColumn, key string, rv int64) error {
	if err != nil {
		return classify(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return classify(err)
	}
	if n == 1 {
		return nil
	}
	var current int64
	err = tx.queryRow(ctx, `SELECT resource_version FROM `+table+` WHERE `+keyColumn+` = ?`, key).Scan(&current)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", keyColumn, key, ErrNotFound)
	case err != nil:
		return classify(err)
	}
	return fmt.Errorf("resourceVersion %d is stale, current is %d: %w", rv, current, ErrConflict)
}

// ListRunnables returns one page of runnables ordered by (namespace, name)
// and the token for the next page, "" on the last. Pages are keyed by the
// last row's position, so rows inserted or deleted between calls never make
// a page repeat or skip an unchanged row. A token this package did not make
// yields ErrBadContinue.
func (tx *Tx) ListRunnables(ctx context.Context, f RunnableFilter) ([]*Runnable, string, error) {
	var (
		conds []string
		args  []any
	)
	if f.Namespace != "" {
		conds, args = append(conds, "namespace = ?"), append(args, f.Namespace)
	}
	if f.Phase != "" {
		conds, args = append(conds, "phase = ?"), append(args, f.Phase)
	}
	if f.Cluster != "" {
		conds, args = append(conds, "cluster = ?"), append(args, f.Cluster)
	}
	return listPage(ctx, tx, "runnables", runnableColumns, conds, args, f.Continue, pageLimit(f.Limit), scanRunnable,
		func(r *Runnable) (string, string) { return r.Namespace, r.Name })
}

// PutAttempt inserts or replaces attempt (RunnableUID, Number). It returns
// ErrNotFound when the runnable does not exist.
func (tx *Tx) PutAttempt(ctx context.Context, a *Attempt) error {
	// Checked first, rather than left to the foreign key, because a
	// violation would abort a PostgreSQL transaction.
	if err := tx.mustExist(ctx, "runnables", "uid", a.RunnableUID); err != nil {
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
	_, err = tx.exec(ctx, `INSERT INTO attempts (runnable_uid, number, cluster, object_uid, started_at,
			ended_at, result, reason, message, cleanup, cleanup_after, carried_in, reported, note)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (runnable_uid, number) DO UPDATE SET cluster = excluded.cluster,
			object_uid = excluded.object_uid, started_at = excluded.started_at,
			ended_at = excluded.ended_at, result = excluded.result, reason = excluded.reason,
			message = excluded.message, cleanup = excluded.cleanup, cleanup_after = excluded.cleanup_after,
			carried_in = excluded.carried_in, reported = excluded.reported, note = excluded.note`,
		a.RunnableUID, a.Number, a.Cluster, a.ObjectUID, tx.s.d.ts(a.StartedAt), tx.s.d.nullTS(a.EndedAt),
		a.Result, a.Reason, a.Message, a.Cleanup, tx.s.d.nullTS(a.CleanupAfter), carried, reported, a.Note)
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
// attempt sees every send that may still land (LockCreateLandedBy).
func (tx *Tx) SetCreateLandedBy(ctx context.Context, runnableUID string, number int, landedBy time.Time) (bool, error) {
	res, err := tx.exec(ctx, `UPDATE attempts SET create_landed_by = ?
		WHERE runnable_uid = ? AND number = ? AND ended_at IS NULL`,
		tx.s.d.ts(landedBy), runnableUID, number)
	if err != nil {
		return false, fmt.Errorf("mark the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mark the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return n == 1, nil
}

// UndoCreateLandedBy puts back prev (nil: none) after a send recorded as
// mark was found never to have left, unless another write replaced mark
// meanwhile.
func (tx *Tx) UndoCreateLandedBy(ctx context.Context, runnableUID string, number int, mark time.Time, prev *time.Time) error {
	_, err := tx.exec(ctx, `UPDATE attempts SET create_landed_by = ?
		WHERE runnable_uid = ? AND number = ? AND create_landed_by = ?`,
		tx.s.d.nullTS(prev), runnableUID, number, tx.s.d.ts(mark))
	if err != nil {
		return fmt.Errorf("undo the create mark of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return nil
}

// LockCreateLandedBy reads CreateLandedBy of attempt number; on
// PostgreSQL the row stays locked to the end of the transaction, so that a
// SetCreateLandedBy waits for it and then sees whether it ended the
// attempt. SQLite has a single writer anyway.
func (tx *Tx) LockCreateLandedBy(ctx context.Context, runnableUID string, number int) (*time.Time, error) {
	q := `SELECT create_landed_by FROM attempts WHERE runnable_uid = ? AND number = ?`
	if tx.s.d.engine == EnginePostgres {
		q += " FOR UPDATE"
	}
	var landedBy *time.Time
	err := tx.queryRow(ctx, q, runnableUID, number).Scan(nullTimeCol{&landedBy})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("attempt %d of %s: %w", number, runnableUID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read the create of attempt %d of %s: %w", number, runnableUID, classify(err))
	}
	return landedBy, nil
}

// ListAttempts returns the attempts of a runnable ordered by Number.
func (tx *Tx) ListAttempts(ctx context.Context, runnableUID string) ([]*Attempt, error) {
	out, err := tx.scanAttempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE runnable_uid = ? ORDER BY number`,
		runnableUID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", runnableUID, err)
	}
	return out, nil
}

const attemptColumns = `runnable_uid, number, cluster, object_uid, started_at, ended_at,
	result, reason, message, cleanup, cleanup_after, carried_in, reported, note, create_landed_by`

func (tx *Tx) scanAttempts(ctx context.Context, query string, args ...any) ([]*Attempt, error) {
	rows, err := tx.query(ctx, query, args...)
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
			nullTimeCol{&a.CleanupAfter}, &carried, &reported, &a.Note, nullTimeCol{&a.CreateLandedBy}); err != nil {
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

// mustExist returns ErrNotFound unless table has a row whose keyColumn is key.
func (tx *Tx) mustExist(ctx context.Context, table, keyColumn, key string) error {
	var one int
	err := tx.queryRow(ctx, `SELECT 1 FROM `+table+` WHERE `+keyColumn+` = ?`, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %s=%s: %w", table, keyColumn, key, ErrNotFound)
	}
	return classify(err)
}

// jsonMap encodes a string map for a TEXT column; empty is "".
func jsonMap(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// mapJSON decodes what jsonMap wrote.
func mapJSON(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	err := json.Unmarshal([]byte(s), &m)
	return m, err
}
