package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is one schedule as stored.
type Schedule struct {
	UID       string
	Namespace string
	Name      string
	Spec      []byte // JSON of a Document of v1alpha1.ScheduleSpec
	Status    []byte // JSON of v1alpha1.ScheduleStatus; empty until the scheduler writes
	// NextTick is when the scheduler must look at the schedule again;
	// nil when it never need (suspended, or a cron that never fires).
	NextTick        *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Schedules is the schedules table as one transaction reads and writes it.
type Schedules struct{ tx *Tx }

// Schedules returns the schedules as tx sees them.
func (tx *Tx) Schedules() Schedules { return Schedules{tx} }

const scheduleColumns = `uid, namespace, name, spec, status, next_tick, created_at, updated_at, resource_version`

func scanSchedule(row interface{ Scan(...any) error }) (*Schedule, error) {
	s := &Schedule{}
	var status string
	err := row.Scan(&s.UID, &s.Namespace, &s.Name, &s.Spec, &status, nullTimeCol{&s.NextTick},
		timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt}, &s.ResourceVersion)
	if status != "" {
		s.Status = []byte(status)
	}
	return s, err
}

// Get returns the schedule namespace/name, or ErrNotFound.
func (ss Schedules) Get(ctx context.Context, namespace, name string) (*Schedule, error) {
	s, err := scanSchedule(ss.tx.queryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule %s/%s: %w", namespace, name, classify(err))
	}
	return s, nil
}

// Create inserts s (the caller chooses its UID) and fills in its times
// and ResourceVersion; ErrConflict when namespace/name is taken.
func (ss Schedules) Create(ctx context.Context, s *Schedule) error {
	if s.UID == "" {
		return fmt.Errorf("create schedule %s/%s: empty uid", s.Namespace, s.Name)
	}
	now := ss.tx.s.now()
	// ON CONFLICT DO NOTHING, as for runnables: a violation would abort a
	// PostgreSQL transaction the caller may want to go on with.
	res, err := ss.tx.exec(ctx, `INSERT INTO schedules (uid, namespace, name, spec, status, next_tick, created_at, updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`,
		s.UID, s.Namespace, s.Name, string(s.Spec), string(s.Status), ss.tx.s.d.nullTS(s.NextTick), ss.tx.s.d.ts(now), ss.tx.s.d.ts(now))
	if err != nil {
		return fmt.Errorf("create schedule %s/%s: %w", s.Namespace, s.Name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create schedule %s/%s: %w", s.Namespace, s.Name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("create schedule %s/%s: already exists: %w", s.Namespace, s.Name, ErrConflict)
	}
	s.CreatedAt, s.UpdatedAt, s.ResourceVersion = now, now, 1
	return nil
}

// Update writes s's spec, status and next tick, provided its
// ResourceVersion is still s.ResourceVersion (ErrConflict otherwise,
// ErrNotFound when it is gone); it bumps the version.
func (ss Schedules) Update(ctx context.Context, s *Schedule) error {
	now := ss.tx.s.now()
	res, err := ss.tx.exec(ctx, `UPDATE schedules SET spec = ?, status = ?, next_tick = ?, updated_at = ?, resource_version = resource_version + 1
		WHERE uid = ? AND resource_version = ?`,
		string(s.Spec), string(s.Status), ss.tx.s.d.nullTS(s.NextTick), ss.tx.s.d.ts(now), s.UID, s.ResourceVersion)
	if err := ss.tx.checkUpdated(ctx, res, err, "schedules", "uid", s.UID, s.ResourceVersion); err != nil {
		return fmt.Errorf("update schedule %s/%s: %w", s.Namespace, s.Name, err)
	}
	s.ResourceVersion++
	s.UpdatedAt = now
	return nil
}

// Delete removes the schedule namespace/name; ErrNotFound when there is
// none. Its runnables stay: they are runnables as any other.
func (ss Schedules) Delete(ctx context.Context, namespace, name string) error {
	res, err := ss.tx.exec(ctx, `DELETE FROM schedules WHERE namespace = ? AND name = ?`, namespace, name)
	if err != nil {
		return fmt.Errorf("delete schedule %s/%s: %w", namespace, name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete schedule %s/%s: %w", namespace, name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete schedule %s/%s: %w", namespace, name, ErrNotFound)
	}
	return nil
}

// ScheduleFilter selects schedules for List; empty fields match all.
type ScheduleFilter struct {
	Namespace string
	Limit     int    // <= 0: 500; capped at 1000
	Continue  string // from the previous page's next
}

// List returns one page of schedules by (namespace, name) and the token
// of the next page, "" on the last.
func (ss Schedules) List(ctx context.Context, f ScheduleFilter) ([]*Schedule, string, error) {
	var conds []string
	var args []any
	if f.Namespace != "" {
		conds, args = append(conds, "namespace = ?"), append(args, f.Namespace)
	}
	return listPage(ctx, ss.tx, "schedules", scheduleColumns, conds, args, f.Continue, pageLimit(f.Limit), scanSchedule,
		func(s *Schedule) (string, string) { return s.Namespace, s.Name })
}

// Due returns up to limit schedules whose next tick is at or before now,
// earliest first.
func (ss Schedules) Due(ctx context.Context, now time.Time, limit int) ([]*Schedule, error) {
	rows, err := ss.tx.query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE next_tick IS NOT NULL AND next_tick <= ? ORDER BY next_tick, uid LIMIT ?`, ss.tx.s.d.ts(now), pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", classify(err))
	}
	defer rows.Close()
	var out []*Schedule
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("due schedules: %w", classify(err))
		}
		out = append(out, s)
	}
	return out, classify(rows.Err())
}

// NextTick returns the earliest next tick of any schedule; nil when none
// has one.
func (ss Schedules) NextTick(ctx context.Context) (*time.Time, error) {
	var next *time.Time
	err := ss.tx.queryRow(ctx, `SELECT MIN(next_tick) FROM schedules WHERE next_tick IS NOT NULL`).Scan(nullTimeCol{&next})
	if err != nil {
		return nil, fmt.Errorf("next schedule tick: %w", classify(err))
	}
	return next, nil
}

// ListByNamePrefix returns namespace's runnables whose names start with
// prefix, by name: a schedule's runs are named after it, and the caller
// tells them from others by their purser.io/schedule label.
func (rs Runnables) ListByNamePrefix(ctx context.Context, namespace, prefix string, limit int) ([]*Runnable, error) {
	if strings.ContainsAny(prefix, `%_\`) {
		return nil, fmt.Errorf("runnables of prefix %q: a name holds no %%, _ or \\", prefix)
	}
	q, args := `SELECT `+runnableColumns+` FROM runnables WHERE namespace = ? AND name LIKE ? ORDER BY name LIMIT ?`,
		[]any{namespace, prefix + "%", pageLimit(limit)}
	if rs.tx.s.d.engine != EnginePostgres && prefix != "" && prefix[len(prefix)-1] < 0x7f {
		// SQLite's LIKE ignores case, so it cannot use the index on
		// (namespace, name) for the prefix and would read every runnable
		// of the namespace, for each schedule at each tick. Names compare
		// bytewise (BINARY), so the prefix is the range [prefix, the
		// prefix with its last byte one more). PostgreSQL's order depends
		// on the database's collation, so there the LIKE stays, answered
		// by the index on (namespace, name text_pattern_ops) (migration
		// 00031).
		upper := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
		q = `SELECT ` + runnableColumns + ` FROM runnables WHERE namespace = ? AND name >= ? AND name < ? ORDER BY name LIMIT ?`
		args = []any{namespace, prefix, upper, pageLimit(limit)}
	}
	rows, err := rs.tx.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("runnables of prefix %s/%s: %w", namespace, prefix, classify(err))
	}
	defer rows.Close()
	var out []*Runnable
	for rows.Next() {
		r, err := scanRunnable(rows)
		if err != nil {
			return nil, fmt.Errorf("runnables of prefix %s/%s: %w", namespace, prefix, classify(err))
		}
		out = append(out, r)
	}
	return out, classify(rows.Err())
}
