package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Quota is one namespace's quota as stored.
type Quota struct {
	Namespace       string
	Spec            []byte // JSON of v1alpha1.QuotaSpec
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Quotas is the quotas table as one transaction reads and writes it.
type Quotas struct{ tx *Tx }

// Quotas returns the quotas as tx sees them.
func (tx *Tx) Quotas() Quotas { return Quotas{tx} }

// Get returns namespace's quota, ErrNotFound when it has none.
func (qs Quotas) Get(ctx context.Context, namespace string) (*Quota, error) {
	return qs.get(ctx, namespace, "")
}

// GetForPlacement is Get, holding the quota's row until the end of the
// transaction on PostgreSQL: two submitter replicas placing in one
// namespace check its quota one after the other (SQLite has a single
// writer anyway).
func (qs Quotas) GetForPlacement(ctx context.Context, namespace string) (*Quota, error) {
	if qs.tx.s.d.engine == EnginePostgres {
		return qs.get(ctx, namespace, " FOR UPDATE")
	}
	return qs.get(ctx, namespace, "")
}

func (qs Quotas) get(ctx context.Context, namespace, lock string) (*Quota, error) {
	q := &Quota{}
	err := qs.tx.queryRow(ctx, `SELECT namespace, spec, created_at, updated_at, resource_version FROM quotas WHERE namespace = ?`+lock, namespace).
		Scan(&q.Namespace, &q.Spec, timeCol{&q.CreatedAt}, timeCol{&q.UpdatedAt}, &q.ResourceVersion)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("quota of %s: %w", namespace, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("quota of %s: %w", namespace, classify(err))
	}
	return q, nil
}

// Put creates q (ResourceVersion 0) or replaces it at q.ResourceVersion
// (ErrConflict when it moved meanwhile, or when one was created first),
// and fills in its times and new ResourceVersion.
func (qs Quotas) Put(ctx context.Context, q *Quota) error {
	now := qs.tx.s.now()
	if q.ResourceVersion == 0 {
		_, err := qs.tx.exec(ctx, `INSERT INTO quotas (namespace, spec, created_at, updated_at, resource_version) VALUES (?, ?, ?, ?, 1)`,
			q.Namespace, string(q.Spec), qs.tx.s.d.ts(now), qs.tx.s.d.ts(now))
		if err != nil {
			return fmt.Errorf("create quota of %s: %w", q.Namespace, classify(err))
		}
		q.CreatedAt, q.UpdatedAt, q.ResourceVersion = now, now, 1
		return nil
	}
	res, err := qs.tx.exec(ctx, `UPDATE quotas SET spec = ?, updated_at = ?, resource_version = resource_version + 1
		WHERE namespace = ? AND resource_version = ?`, string(q.Spec), qs.tx.s.d.ts(now), q.Namespace, q.ResourceVersion)
	if err := qs.tx.checkUpdated(ctx, res, err, "quotas", "namespace", q.Namespace, q.ResourceVersion); err != nil {
		return fmt.Errorf("update quota of %s: %w", q.Namespace, err)
	}
	q.ResourceVersion++
	q.UpdatedAt = now
	return nil
}

// Delete removes namespace's quota; ErrNotFound when it has none.
func (qs Quotas) Delete(ctx context.Context, namespace string) error {
	res, err := qs.tx.exec(ctx, `DELETE FROM quotas WHERE namespace = ?`, namespace)
	if err != nil {
		return fmt.Errorf("delete quota of %s: %w", namespace, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete quota of %s: %w", namespace, classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete quota of %s: %w", namespace, ErrNotFound)
	}
	return nil
}

// List returns every quota, by namespace; one per namespace, so the set
// is small.
func (qs Quotas) List(ctx context.Context) ([]*Quota, error) {
	rows, err := qs.tx.query(ctx, `SELECT namespace, spec, created_at, updated_at, resource_version FROM quotas ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("list quotas: %w", classify(err))
	}
	defer rows.Close()
	var out []*Quota
	for rows.Next() {
		q := &Quota{}
		if err := rows.Scan(&q.Namespace, &q.Spec, timeCol{&q.CreatedAt}, timeCol{&q.UpdatedAt}, &q.ResourceVersion); err != nil {
			return nil, fmt.Errorf("list quotas: %w", classify(err))
		}
		out = append(out, q)
	}
	return out, classify(rows.Err())
}

// ActiveStatuses returns the statuses of namespace's active runnables
// (Scheduled, Submitted, Running): what its quota's usage sums.
func (rs Runnables) ActiveStatuses(ctx context.Context, namespace string) ([][]byte, error) {
	by, err := rs.ActiveStatusesByCluster(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, sts := range by {
		out = append(out, sts...)
	}
	return out, nil
}

// ActiveStatusesByCluster is ActiveStatuses by the cluster each runnable
// is on: what a quota per cluster label value sums.
func (rs Runnables) ActiveStatusesByCluster(ctx context.Context, namespace string) (map[string][][]byte, error) {
	rows, err := rs.tx.query(ctx, `SELECT cluster, status FROM runnables
		WHERE namespace = ? AND phase IN ('Scheduled', 'Submitted', 'Running')`, namespace)
	if err != nil {
		return nil, fmt.Errorf("active runnables of %s: %w", namespace, classify(err))
	}
	defer rows.Close()
	out := map[string][][]byte{}
	for rows.Next() {
		var cluster string
		var st sql.NullString
		if err := rows.Scan(&cluster, &st); err != nil {
			return nil, fmt.Errorf("active runnables of %s: %w", namespace, classify(err))
		}
		out[cluster] = append(out[cluster], []byte(st.String))
	}
	return out, classify(rows.Err())
}
