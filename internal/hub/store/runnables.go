package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// Runnables.Update only succeeds against the current value.
	ResourceVersion int64
	// EndedAt is when the runnable reached an ended phase; RemoveAfter,
	// when retention removes it (nil: never).
	EndedAt     *time.Time
	RemoveAfter *time.Time
}

// Runnables is the runnables table as one transaction reads and writes it.
type Runnables struct{ tx *Tx }

// Runnables returns the runnables as tx sees them.
func (tx *Tx) Runnables() Runnables { return Runnables{tx} }

// RunnableFilter selects runnables for Runnables.List; empty fields match
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

// Create inserts r and fills its ID, CreatedAt, UpdatedAt and
// ResourceVersion. The caller chooses UID. It returns ErrConflict when
// namespace/name or UID is taken.
func (rs Runnables) Create(ctx context.Context, r *Runnable) error {
	if r.UID == "" {
		return fmt.Errorf("create runnable %s/%s: empty uid", r.Namespace, r.Name)
	}
	now := rs.tx.s.now()
	// ON CONFLICT DO NOTHING instead of catching a unique violation: on
	// PostgreSQL a violation would abort the whole transaction, and the
	// caller may want to carry on (for example, read the existing object).
	err := rs.tx.queryRow(ctx, `INSERT INTO runnables (namespace, name, uid, generation, spec, spec_hash,
			phase, cluster, submitter, status, created_at, updated_at, resource_version, ended_at, remove_after)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT DO NOTHING
		RETURNING id`,
		r.Namespace, r.Name, r.UID, r.Generation, string(r.Spec), r.SpecHash,
		r.Phase, r.Cluster, r.Submitter, nullText(r.Status), rs.tx.s.d.ts(now), rs.tx.s.d.ts(now),
		rs.tx.s.d.nullTS(r.EndedAt), rs.tx.s.d.nullTS(r.RemoveAfter),
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

// CreateMany inserts recs as Create does, in one statement for each few
// hundred: a page of ticks of schedules accepted together. Those whose
// namespace/name or UID is taken are left out (created[i] false); the
// others get their ID, times and ResourceVersion.
func (rs Runnables) CreateMany(ctx context.Context, recs []*Runnable) (created []bool, err error) {
	created = make([]bool, len(recs))
	now := rs.tx.s.now()
	at := rs.tx.s.d.ts(now)
	for lo := 0; lo < len(recs); lo += bulkRows {
		part := recs[lo:min(lo+bulkRows, len(recs))]
		var q strings.Builder
		q.WriteString(`INSERT INTO runnables (namespace, name, uid, generation, spec, spec_hash,
			phase, cluster, submitter, status, created_at, updated_at, resource_version, ended_at, remove_after) VALUES `)
		args := make([]any, 0, 14*len(part))
		index := make(map[string]int, len(part))
		for i, r := range part {
			if r.UID == "" {
				return nil, fmt.Errorf("create runnable %s/%s: empty uid", r.Namespace, r.Name)
			}
			index[r.UID] = lo + i
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)")
			args = append(args, r.Namespace, r.Name, r.UID, r.Generation, string(r.Spec), r.SpecHash,
				r.Phase, r.Cluster, r.Submitter, nullText(r.Status), at, at,
				rs.tx.s.d.nullTS(r.EndedAt), rs.tx.s.d.nullTS(r.RemoveAfter))
		}
		// ON CONFLICT DO NOTHING, as in Create: a name taken is an answer,
		// not an error that would abort a PostgreSQL transaction.
		q.WriteString(` ON CONFLICT DO NOTHING RETURNING id, uid`)
		rows, err := rs.tx.bulkQuery(ctx, len(part), q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("create %d runnables: %w", len(part), classify(err))
		}
		for rows.Next() {
			var id int64
			var uid string
			if err := rows.Scan(&id, &uid); err != nil {
				rows.Close()
				return nil, fmt.Errorf("create %d runnables: %w", len(part), classify(err))
			}
			if i, ok := index[uid]; ok {
				r := recs[i]
				r.ID, r.CreatedAt, r.UpdatedAt, r.ResourceVersion = id, now, now, 1
				created[i] = true
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("create %d runnables: %w", len(part), classify(err))
		}
	}
	return created, nil
}

// ErrMoved is the answer to an optimistic change of a runnable that is no
// longer as the caller read it.
var ErrMoved = errors.New("runnable changed since it was read")

// Get returns the runnable namespace/name, or ErrNotFound.
func (rs Runnables) Get(ctx context.Context, namespace, name string) (*Runnable, error) {
	r, err := scanRunnable(rs.tx.queryRow(ctx,
		`SELECT `+runnableColumns+` FROM runnables WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("runnable %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get runnable %s/%s: %w", namespace, name, classify(err))
	}
	return r, nil
}

// GetByUID returns the runnable with that UID, or ErrNotFound.
func (rs Runnables) GetByUID(ctx context.Context, uid string) (*Runnable, error) {
	r, err := scanRunnable(rs.tx.queryRow(ctx,
		`SELECT `+runnableColumns+` FROM runnables WHERE uid = ?`, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("runnable uid %s: %w", uid, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get runnable uid %s: %w", uid, classify(err))
	}
	return r, nil
}

// Update writes every mutable field of r (all but ID, Namespace,
// Name, UID and CreatedAt) to the row with r's UID, provided its
// ResourceVersion is still r.ResourceVersion. On success it bumps
// r.ResourceVersion and sets r.UpdatedAt; a stale r yields ErrConflict, a
// missing row ErrNotFound.
func (rs Runnables) Update(ctx context.Context, r *Runnable) error {
	now := rs.tx.s.now()
	res, err := rs.tx.exec(ctx, `UPDATE runnables SET generation = ?, spec = ?, spec_hash = ?, phase = ?,
			cluster = ?, submitter = ?, status = ?, updated_at = ?, resource_version = resource_version + 1,
			ended_at = ?, remove_after = ?
		WHERE uid = ? AND resource_version = ?`,
		r.Generation, string(r.Spec), r.SpecHash, r.Phase, r.Cluster, r.Submitter, nullText(r.Status),
		rs.tx.s.d.ts(now), rs.tx.s.d.nullTS(r.EndedAt), rs.tx.s.d.nullTS(r.RemoveAfter), r.UID, r.ResourceVersion)
	if err := rs.tx.checkUpdated(ctx, res, err, "runnables", "uid", r.UID, r.ResourceVersion); err != nil {
		return fmt.Errorf("update runnable %s/%s: %w", r.Namespace, r.Name, err)
	}
	r.ResourceVersion++
	r.UpdatedAt = now
	return nil
}

// Delete removes the runnable uid, and with it (the foreign key
// cascades) its attempts, provided its ResourceVersion is still rv:
// ErrConflict when it moved on, ErrNotFound when it is gone.
func (rs Runnables) Delete(ctx context.Context, uid string, rv int64) error {
	res, err := rs.tx.exec(ctx, `DELETE FROM runnables WHERE uid = ? AND resource_version = ?`, uid, rv)
	if err := rs.tx.checkUpdated(ctx, res, err, "runnables", "uid", uid, rv); err != nil {
		return fmt.Errorf("delete runnable %s: %w", uid, err)
	}
	return nil
}

// List returns one page of runnables ordered by (namespace, name)
// and the token for the next page, "" on the last. Pages are keyed by the
// last row's position, so rows inserted or deleted between calls never make
// a page repeat or skip an unchanged row. A token this package did not make
// yields ErrBadContinue.
func (rs Runnables) List(ctx context.Context, f RunnableFilter) ([]*Runnable, string, error) {
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
	return listPage(ctx, rs.tx, "runnables", runnableColumns, conds, args, f.Continue, pageLimit(f.Limit), scanRunnable,
		func(r *Runnable) (string, string) { return r.Namespace, r.Name })
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

// ListInPhases returns up to limit runnables (<= 0: 500, capped
// at 1000) in any of phases whose ID is above afterID, ordered by ID: the
// controller's scan of the work that occupies clusters, resumed from the
// last ID of the previous page.
func (rs Runnables) ListInPhases(ctx context.Context, phases []string, afterID int64, limit int) ([]*Runnable, error) {
	if len(phases) == 0 {
		return nil, nil
	}
	limit = pageLimit(limit)
	args := []any{afterID}
	for _, p := range phases {
		args = append(args, p)
	}
	args = append(args, limit)
	rows, err := rs.tx.query(ctx, `SELECT `+runnableColumns+` FROM runnables
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

// ListToRemove returns up to limit ended runnables whose
// retention has passed at now, the longest overdue first.
func (rs Runnables) ListToRemove(ctx context.Context, now time.Time, limit int) ([]*Runnable, error) {
	rows, err := rs.tx.query(ctx, `SELECT `+runnableColumns+` FROM runnables
		WHERE remove_after IS NOT NULL AND remove_after <= ? ORDER BY remove_after, id LIMIT ?`,
		rs.tx.s.d.ts(now), pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list runnables to remove: %w", classify(err))
	}
	defer rows.Close()
	var out []*Runnable
	for rows.Next() {
		r, err := scanRunnable(rows)
		if err != nil {
			return nil, fmt.Errorf("list runnables to remove: %w", classify(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runnables to remove: %w", classify(err))
	}
	return out, nil
}

// CountByCluster returns, per cluster, how many runnables are in
// one of phases. The submitter weighs clusters by it on every placement,
// so it is one aggregate query rather than pages of whole rows.
// Runnables with no cluster are not counted.
func (rs Runnables) CountByCluster(ctx context.Context, phases ...string) (map[string]int, error) {
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
	rows, err := rs.tx.query(ctx, q, args...)
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

// UIDsWithOpenAttempt returns the uids of runnables in phase
// with an attempt that has not ended, at most limit of them. The submitter
// uses it to find cancelled runnables whose object may still be on a
// cluster, so that a cancellation never depends on one message arriving.
func (rs Runnables) UIDsWithOpenAttempt(ctx context.Context, phase string, limit int) ([]string, error) {
	limit = pageLimit(limit)
	rows, err := rs.tx.query(ctx, `SELECT DISTINCT r.uid FROM runnables r
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

// UIDsUpdatePending returns the uids of runnables in one of phases whose
// open attempt's object carries an older generation of their spec than
// the runnable's (an update in place still to apply), at most limit of
// them. The submitter lists them so that an update never depends on one
// message arriving.
func (rs Runnables) UIDsUpdatePending(ctx context.Context, phases []string, limit int) ([]string, error) {
	if len(phases) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(phases)+1)
	for _, p := range phases {
		args = append(args, p)
	}
	args = append(args, pageLimit(limit))
	rows, err := rs.tx.query(ctx, `SELECT DISTINCT r.uid FROM runnables r
		JOIN attempts a ON a.runnable_uid = r.uid
		WHERE r.phase IN (?`+strings.Repeat(", ?", len(phases)-1)+`) AND a.ended_at IS NULL AND a.generation < r.generation
		ORDER BY r.uid LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list runnables with an update to apply: %w", classify(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			return nil, fmt.Errorf("list runnables with an update to apply: %w", classify(err))
		}
		out = append(out, uid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runnables with an update to apply: %w", classify(err))
	}
	return out, nil
}

// CountByClusterPhase counts the runnables placed on each cluster
// (their current cluster), by phase: what the console's farm view draws.
// One grouped scan of the runnables' cluster index.
func (rs Runnables) CountByClusterPhase(ctx context.Context) (map[string]map[string]int, error) {
	rows, err := rs.tx.query(ctx, `SELECT cluster, phase, COUNT(*) FROM runnables WHERE cluster <> '' GROUP BY cluster, phase`)
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
