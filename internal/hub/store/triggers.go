package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Trigger is one trigger as stored.
type Trigger struct {
	UID       string
	Namespace string
	Name      string
	Spec      []byte // JSON of a Document of v1alpha1.TriggerSpec
	Status    []byte // JSON of v1alpha1.TriggerStatus; empty until the loop writes
	// TokenHash is the SHA-256 (hex) of the webhook's token; the token
	// itself is never stored.
	TokenHash string
	// Watermark is the end time up to which the namespace's ended
	// runnables were looked at; it starts at the trigger's creation.
	Watermark time.Time
	// Seen is the trigger loop's memory of events (JSON): the generations
	// of deployables dealt with, the recent runs.
	Seen            []byte
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Triggers is the triggers table as one transaction reads and writes it.
type Triggers struct{ tx *Tx }

// Triggers returns the triggers as tx sees them.
func (tx *Tx) Triggers() Triggers { return Triggers{tx} }

const triggerColumns = `uid, namespace, name, spec, status, token_hash, watermark, seen, created_at, updated_at, resource_version`

func scanTrigger(row interface{ Scan(...any) error }) (*Trigger, error) {
	t := &Trigger{}
	var status, seen string
	err := row.Scan(&t.UID, &t.Namespace, &t.Name, &t.Spec, &status, &t.TokenHash, timeCol{&t.Watermark}, &seen,
		timeCol{&t.CreatedAt}, timeCol{&t.UpdatedAt}, &t.ResourceVersion)
	if status != "" {
		t.Status = []byte(status)
	}
	if seen != "" {
		t.Seen = []byte(seen)
	}
	return t, err
}

// Get returns the trigger namespace/name, or ErrNotFound.
func (ts Triggers) Get(ctx context.Context, namespace, name string) (*Trigger, error) {
	t, err := scanTrigger(ts.tx.queryRow(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("trigger %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get trigger %s/%s: %w", namespace, name, classify(err))
	}
	return t, nil
}

// Create inserts t (the caller chooses its UID and watermark) and fills
// in its times and ResourceVersion; ErrConflict when namespace/name is
// taken.
func (ts Triggers) Create(ctx context.Context, t *Trigger) error {
	if t.UID == "" {
		return fmt.Errorf("create trigger %s/%s: empty uid", t.Namespace, t.Name)
	}
	now := ts.tx.s.now()
	// ON CONFLICT DO NOTHING, as for runnables: a violation would abort a
	// PostgreSQL transaction the caller may want to go on with.
	res, err := ts.tx.exec(ctx, `INSERT INTO triggers (uid, namespace, name, spec, status, token_hash, watermark, seen, created_at, updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`,
		t.UID, t.Namespace, t.Name, string(t.Spec), string(t.Status), t.TokenHash, ts.tx.s.d.ts(t.Watermark), string(t.Seen),
		ts.tx.s.d.ts(now), ts.tx.s.d.ts(now))
	if err != nil {
		return fmt.Errorf("create trigger %s/%s: %w", t.Namespace, t.Name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create trigger %s/%s: %w", t.Namespace, t.Name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("create trigger %s/%s: already exists: %w", t.Namespace, t.Name, ErrConflict)
	}
	t.CreatedAt, t.UpdatedAt, t.ResourceVersion = now, now, 1
	t.Watermark = truncate(t.Watermark)
	return nil
}

// Update writes t's spec, status, token hash, watermark and seen,
// provided its ResourceVersion is still t.ResourceVersion (ErrConflict
// otherwise, ErrNotFound when it is gone); it bumps the version.
func (ts Triggers) Update(ctx context.Context, t *Trigger) error {
	now := ts.tx.s.now()
	res, err := ts.tx.exec(ctx, `UPDATE triggers SET spec = ?, status = ?, token_hash = ?, watermark = ?, seen = ?, updated_at = ?,
		resource_version = resource_version + 1 WHERE uid = ? AND resource_version = ?`,
		string(t.Spec), string(t.Status), t.TokenHash, ts.tx.s.d.ts(t.Watermark), string(t.Seen), ts.tx.s.d.ts(now), t.UID, t.ResourceVersion)
	if err := ts.tx.checkUpdated(ctx, res, err, "triggers", "uid", t.UID, t.ResourceVersion); err != nil {
		return fmt.Errorf("update trigger %s/%s: %w", t.Namespace, t.Name, err)
	}
	t.ResourceVersion++
	t.UpdatedAt = now
	t.Watermark = truncate(t.Watermark)
	return nil
}

// Delete removes the trigger namespace/name; ErrNotFound when there is
// none. Its runnables stay.
func (ts Triggers) Delete(ctx context.Context, namespace, name string) error {
	res, err := ts.tx.exec(ctx, `DELETE FROM triggers WHERE namespace = ? AND name = ?`, namespace, name)
	if err != nil {
		return fmt.Errorf("delete trigger %s/%s: %w", namespace, name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete trigger %s/%s: %w", namespace, name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete trigger %s/%s: %w", namespace, name, ErrNotFound)
	}
	return nil
}

// TriggerFilter selects triggers for List; empty fields match all.
type TriggerFilter struct {
	Namespace string
	Limit     int    // <= 0: 500; capped at 1000
	Continue  string // from the previous page's next
}

// List returns one page of triggers by (namespace, name) and the token of
// the next page, "" on the last.
func (ts Triggers) List(ctx context.Context, f TriggerFilter) ([]*Trigger, string, error) {
	var conds []string
	var args []any
	if f.Namespace != "" {
		conds, args = append(conds, "namespace = ?"), append(args, f.Namespace)
	}
	return listPage(ctx, ts.tx, "triggers", triggerColumns, conds, args, f.Continue, pageLimit(f.Limit), scanTrigger,
		func(t *Trigger) (string, string) { return t.Namespace, t.Name })
}

// EndedSince returns up to limit runnables of namespace that ended at or
// after since, by end time: what a trigger on ended runnables has not
// looked at yet.
func (rs Runnables) EndedSince(ctx context.Context, namespace string, since time.Time, limit int) ([]*Runnable, error) {
	rows, err := rs.tx.query(ctx, `SELECT `+runnableColumns+` FROM runnables
		WHERE namespace = ? AND ended_at IS NOT NULL AND ended_at >= ? ORDER BY ended_at, id LIMIT ?`,
		namespace, rs.tx.s.d.ts(since), pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("runnables of %s ended since %s: %w", namespace, since.Format(time.RFC3339), classify(err))
	}
	defer rows.Close()
	var out []*Runnable
	for rows.Next() {
		r, err := scanRunnable(rows)
		if err != nil {
			return nil, fmt.Errorf("runnables of %s ended since: %w", namespace, classify(err))
		}
		out = append(out, r)
	}
	return out, classify(rows.Err())
}
