package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	return ss.DueAfter(ctx, now, ScheduleDueCursor{}, limit)
}

// ScheduleDueCursor is where a page of DueAfter ends: the last schedule's
// next tick, namespace and name. The zero cursor is the start.
type ScheduleDueCursor struct {
	NextTick        time.Time
	Namespace, Name string
}

// DueCursor is the cursor just after s.
func DueCursor(s *Schedule) ScheduleDueCursor {
	return ScheduleDueCursor{NextTick: *s.NextTick, Namespace: s.Namespace, Name: s.Name}
}

// DueAfter returns up to limit schedules whose next tick is at or before
// now, earliest first, after the cursor: the pages of the schedules due
// at a tick, read ahead of it.
func (ss Schedules) DueAfter(ctx context.Context, now time.Time, after ScheduleDueCursor, limit int) ([]*Schedule, error) {
	q, args := `SELECT `+scheduleColumns+` FROM schedules WHERE next_tick IS NOT NULL AND next_tick <= ?`, []any{ss.tx.s.d.ts(now)}
	if !after.NextTick.IsZero() {
		q, args = q+` AND (next_tick, namespace, name) > (?, ?, ?)`, append(args, ss.tx.s.d.ts(after.NextTick), after.Namespace, after.Name)
	}
	rows, err := ss.tx.query(ctx, q+` ORDER BY next_tick, namespace, name LIMIT ?`, append(args, pageLimit(limit))...)
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
	return rs.ListByNamePrefixes(ctx, namespace, []string{prefix}, pageLimit(limit))
}

// ListByNamePrefixes returns namespace's runnables whose names start
// with any of prefixes, up to limitEach of each prefix, by name, in one
// query: the runs of a page of schedules at once.
func (rs Runnables) ListByNamePrefixes(ctx context.Context, namespace string, prefixes []string, limitEach int) ([]*Runnable, error) {
	if len(prefixes) == 0 {
		return nil, nil
	}
	// Each prefix is a range of the index on (namespace, name): [prefix,
	// the prefix with its last byte one more), the ranges a table of
	// values the query joins, so that each is one seek of the index
	// whatever their number (an OR of as many ranges costs the planners
	// more than the reads: a third of a second for a thousand on
	// PostgreSQL). SQLite's LIKE ignores case, so it cannot use the index
	// for a prefix; PostgreSQL's usual comparisons follow the database's
	// collation, so there the range is in the byte order of the index on
	// (namespace, name text_pattern_ops) (migration 00031), whose
	// operators take a parameter where LIKE's prefix would have to be
	// known when the statement is planned. Each engine's planner is then
	// held to one seek per range: SQLite by CROSS JOIN, which keeps the
	// ranges outside (else it walks the namespace in name order for the
	// ORDER BY, matching each runnable against every range); PostgreSQL
	// by a LATERAL subquery with its own LIMIT, which it cannot flatten
	// (else it scans the table, not knowing how narrow the ranges are).
	join := `CROSS JOIN runnables r WHERE r.namespace = ? AND r.name >= p.lo AND r.name < p.hi ORDER BY r.name LIMIT ?`
	limit := limitEach * len(prefixes) // of the disjoint ranges below, at most as many
	if rs.tx.s.d.engine == EnginePostgres {
		join = `CROSS JOIN LATERAL (SELECT * FROM runnables x WHERE x.namespace = ? AND x.name ~>=~ p.lo AND x.name ~<~ p.hi
			ORDER BY x.name LIMIT ?) r ORDER BY r.name`
		limit = limitEach
	}
	for _, prefix := range prefixes {
		if prefix == "" || strings.ContainsAny(prefix, `%_\`) || prefix[len(prefix)-1] >= 0x7f {
			return nil, fmt.Errorf("runnables of prefix %q: a prefix is not empty, ends in an ASCII byte and holds no %%, _ or \\", prefix)
		}
	}
	// Ranges that overlap would answer a runnable once for each: the runs
	// of schedule "a-b" are in the range of "a-" too, and were listed
	// twice in a-b's status when both fired in one page. A prefix inside
	// another's range is dropped (sorted, a prefix's extensions follow it
	// at once), which leaves disjoint ranges: each row once, and the
	// limit counts rows, not repeats.
	sorted := slices.Clone(prefixes)
	slices.Sort(sorted)
	disjoint := sorted[:0]
	for _, p := range sorted {
		if n := len(disjoint); n > 0 && strings.HasPrefix(p, disjoint[n-1]) {
			continue
		}
		disjoint = append(disjoint, p)
	}
	var ranges strings.Builder
	args := make([]any, 0, 2*len(disjoint)+2)
	for i, prefix := range disjoint {
		if i > 0 {
			ranges.WriteString(", ")
		}
		ranges.WriteString(rs.tx.s.d.castRow("TEXT", "TEXT"))
		args = append(args, prefix, prefix[:len(prefix)-1]+string(prefix[len(prefix)-1]+1))
	}
	q := `WITH p (lo, hi) AS (VALUES ` + ranges.String() + `) SELECT ` + prefixed("r.", runnableColumns) + ` FROM p ` + join
	rows, err := rs.tx.query(ctx, q, append(args, namespace, limit)...)
	if err != nil {
		return nil, fmt.Errorf("runnables of %d prefixes in %s: %w", len(prefixes), namespace, classify(err))
	}
	defer rows.Close()
	var out []*Runnable
	for rows.Next() {
		r, err := scanRunnable(rows)
		if err != nil {
			return nil, fmt.Errorf("runnables of %d prefixes in %s: %w", len(prefixes), namespace, classify(err))
		}
		out = append(out, r)
	}
	return out, classify(rows.Err())
}

// UpdateStatuses writes the status and next tick of each of ss in one
// statement for each few hundred, provided each is still at its
// ResourceVersion: the scheduler's page of schedules fired together. When
// one is not, nothing of the others is written either in the end: the
// caller's transaction fails with ErrConflict and is rolled back.
func (ss Schedules) UpdateStatuses(ctx context.Context, recs []*Schedule) error {
	now := ss.tx.s.now()
	for part := range slices.Chunk(recs, bulkRows) {
		// A CTE of the new values, joined on (uid, resource_version): the
		// casts give PostgreSQL the columns' types.
		var q strings.Builder
		q.WriteString(`WITH v (uid, rv, status, next_tick) AS (VALUES `)
		args := make([]any, 0, 4*len(part)+1)
		for i, s := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(ss.tx.s.d.castRow("TEXT", "BIGINT", "TEXT", "TIMESTAMPTZ"))
			args = append(args, s.UID, s.ResourceVersion, string(s.Status), ss.tx.s.d.nullTS(s.NextTick))
		}
		q.WriteString(`) UPDATE schedules SET status = v.status, next_tick = v.next_tick, updated_at = ?,
			resource_version = schedules.resource_version + 1
			FROM v WHERE schedules.uid = v.uid AND schedules.resource_version = v.rv`)
		res, err := ss.tx.bulkExec(ctx, len(part), q.String(), append(args, ss.tx.s.d.ts(now))...)
		if err != nil {
			return fmt.Errorf("update %d schedules: %w", len(part), classify(err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update %d schedules: %w", len(part), classify(err))
		} else if n != int64(len(part)) {
			return fmt.Errorf("update %d schedules: %d changed meanwhile: %w", len(part), int64(len(part))-n, ErrConflict)
		}
	}
	for _, s := range recs {
		s.ResourceVersion++
		s.UpdatedAt = now
	}
	return nil
}
