package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Deployable is the stored form of configuration that every matching
// cluster must hold. Secret values never appear in Spec: the caller seals
// them into Secret.
type Deployable struct {
	ID         int64
	Namespace  string
	Name       string
	UID        string
	Generation int64
	Spec       []byte // JSON, Secret values removed by the caller
	Secret     []byte // sealed Secret data, nil for other kinds
	SpecHash   string
	// A change awaiting a second person's approval.
	Pending       []byte
	PendingSecret []byte
	PendingBy     string
	PendingDelete bool
	// DeletedAt marks a tombstone: the syncer removes the object from the
	// clusters and then calls Deployables.Purge.
	DeletedAt       *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Deployables is the deployables table, with the per-cluster sync state of
// each, as one transaction reads and writes them.
type Deployables struct{ tx *Tx }

// Deployables returns the deployables as tx sees them.
func (tx *Tx) Deployables() Deployables { return Deployables{tx} }

// DeployableFilter selects deployables for Deployables.List.
type DeployableFilter struct {
	Namespace      string
	IncludeDeleted bool // also return tombstones
	Limit          int  // <= 0: 500; capped at 1000
	Continue       string
}

// DeployableClusterStatus is the sync state of one deployable on one cluster.
type DeployableClusterStatus struct {
	DeployableUID    string
	Cluster          string
	State            string
	SyncedGeneration int64
	LastSyncedAt     *time.Time
	Message          string
	// StateGeneration is the generation State is about: the one last
	// attempted (0 in rows written before it was recorded).
	StateGeneration int64
	// Reason is a word for why State is not Synced, where a script needs
	// one (AdmissionDenied); "" otherwise.
	Reason string
}

const deployableColumns = `id, namespace, name, uid, generation, spec, secret, spec_hash, pending,
	pending_secret, pending_by, pending_delete, deleted_at, created_at, updated_at, resource_version`

func scanDeployable(row interface{ Scan(...any) error }) (*Deployable, error) {
	d := &Deployable{}
	err := row.Scan(&d.ID, &d.Namespace, &d.Name, &d.UID, &d.Generation, &d.Spec, &d.Secret, &d.SpecHash,
		&d.Pending, &d.PendingSecret, &d.PendingBy, &d.PendingDelete, nullTimeCol{&d.DeletedAt},
		timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt}, &d.ResourceVersion)
	return d, err
}

// Create inserts d and fills its ID, CreatedAt, UpdatedAt and
// ResourceVersion. It returns ErrConflict when namespace/name or UID is
// taken, tombstones included.
func (ds Deployables) Create(ctx context.Context, d *Deployable) error {
	if d.UID == "" {
		return fmt.Errorf("create deployable %s/%s: empty uid", d.Namespace, d.Name)
	}
	now := ds.tx.s.now()
	err := ds.tx.queryRow(ctx, `INSERT INTO deployables (namespace, name, uid, generation, spec, secret,
			spec_hash, pending, pending_secret, pending_by, pending_delete, deleted_at, created_at,
			updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT DO NOTHING
		RETURNING id`,
		d.Namespace, d.Name, d.UID, d.Generation, string(d.Spec), nullBlob(d.Secret), d.SpecHash,
		nullText(d.Pending), nullBlob(d.PendingSecret), d.PendingBy, d.PendingDelete,
		ds.tx.s.d.nullTS(d.DeletedAt), ds.tx.s.d.ts(now), ds.tx.s.d.ts(now),
	).Scan(&d.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("create deployable %s/%s (uid %s): name or uid already exists: %w", d.Namespace, d.Name, d.UID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create deployable %s/%s: %w", d.Namespace, d.Name, classify(err))
	}
	d.CreatedAt, d.UpdatedAt, d.ResourceVersion = now, now, 1
	return nil
}

// Get returns the deployable namespace/name, tombstoned or not,
// or ErrNotFound.
func (ds Deployables) Get(ctx context.Context, namespace, name string) (*Deployable, error) {
	d, err := scanDeployable(ds.tx.queryRow(ctx,
		`SELECT `+deployableColumns+` FROM deployables WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deployable %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get deployable %s/%s: %w", namespace, name, classify(err))
	}
	return d, nil
}

// GetByUID returns the deployable with that UID, or ErrNotFound.
func (ds Deployables) GetByUID(ctx context.Context, uid string) (*Deployable, error) {
	d, err := scanDeployable(ds.tx.queryRow(ctx,
		`SELECT `+deployableColumns+` FROM deployables WHERE uid = ?`, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deployable uid %s: %w", uid, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get deployable uid %s: %w", uid, classify(err))
	}
	return d, nil
}

// Update writes every mutable field of d (all but ID, Namespace,
// Name, UID and CreatedAt) under the same optimistic rule as
// Runnables.Update: ErrConflict when d.ResourceVersion is stale.
func (ds Deployables) Update(ctx context.Context, d *Deployable) error {
	now := ds.tx.s.now()
	res, err := ds.tx.exec(ctx, `UPDATE deployables SET generation = ?, spec = ?, secret = ?, spec_hash = ?,
			pending = ?, pending_secret = ?, pending_by = ?, pending_delete = ?, deleted_at = ?,
			updated_at = ?, resource_version = resource_version + 1
		WHERE uid = ? AND resource_version = ?`,
		d.Generation, string(d.Spec), nullBlob(d.Secret), d.SpecHash, nullText(d.Pending),
		nullBlob(d.PendingSecret), d.PendingBy, d.PendingDelete, ds.tx.s.d.nullTS(d.DeletedAt),
		ds.tx.s.d.ts(now), d.UID, d.ResourceVersion)
	if err := ds.tx.checkUpdated(ctx, res, err, "deployables", "uid", d.UID, d.ResourceVersion); err != nil {
		return fmt.Errorf("update deployable %s/%s: %w", d.Namespace, d.Name, err)
	}
	d.ResourceVersion++
	d.UpdatedAt = now
	return nil
}

// Purge removes the deployable and its per-cluster status for
// good, once the syncer has removed it from every cluster.
func (ds Deployables) Purge(ctx context.Context, uid string) error {
	res, err := ds.tx.exec(ctx, `DELETE FROM deployables WHERE uid = ?`, uid)
	if err != nil {
		return fmt.Errorf("purge deployable %s: %w", uid, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("purge deployable %s: %w", uid, classify(err))
	} else if n == 0 {
		return fmt.Errorf("purge deployable %s: %w", uid, ErrNotFound)
	}
	return nil
}

// DeployablesVersion is a fingerprint of the deployables table that moves
// with every change: an update raises the sum of resource versions, a
// create the largest id, a purge lowers the count. A poller that sees it
// unchanged can skip reading every row. (A create and a purge and updates
// that exactly cancel out within one poll could hide a change; a poller
// also reads everything now and then.)
type DeployablesVersion struct {
	Count, VersionSum, MaxID int64
}

// Version returns the table's fingerprint, tombstones
// included.
func (ds Deployables) Version(ctx context.Context) (DeployablesVersion, error) {
	var v DeployablesVersion
	err := ds.tx.queryRow(ctx, `SELECT COUNT(*), COALESCE(SUM(resource_version), 0), COALESCE(MAX(id), 0) FROM deployables`).
		Scan(&v.Count, &v.VersionSum, &v.MaxID)
	if err != nil {
		return v, fmt.Errorf("deployables version: %w", classify(err))
	}
	return v, nil
}

// List returns one page of deployables ordered by (namespace,
// name), paginated like Runnables.List.
func (ds Deployables) List(ctx context.Context, f DeployableFilter) ([]*Deployable, string, error) {
	var (
		conds []string
		args  []any
	)
	if f.Namespace != "" {
		conds, args = append(conds, "namespace = ?"), append(args, f.Namespace)
	}
	if !f.IncludeDeleted {
		conds = append(conds, "deleted_at IS NULL")
	}
	return listPage(ctx, ds.tx, "deployables", deployableColumns, conds, args, f.Continue, pageLimit(f.Limit), scanDeployable,
		func(d *Deployable) (string, string) { return d.Namespace, d.Name })
}

// PutStatus inserts or replaces the status of (DeployableUID,
// Cluster). Both must exist, else ErrNotFound.
func (ds Deployables) PutStatus(ctx context.Context, st *DeployableClusterStatus) error {
	// Checked first, rather than left to the foreign keys, because a
	// violation would abort a PostgreSQL transaction.
	if err := ds.tx.mustExist(ctx, "deployables", "uid", st.DeployableUID); err != nil {
		return fmt.Errorf("put deployable status: %w", err)
	}
	if err := ds.tx.mustExist(ctx, "clusters", "name", st.Cluster); err != nil {
		return fmt.Errorf("put deployable status: %w", err)
	}
	_, err := ds.tx.exec(ctx, `INSERT INTO deployable_status (deployable_uid, cluster, state,
			synced_generation, last_synced_at, message, state_generation, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (deployable_uid, cluster) DO UPDATE SET state = excluded.state,
			synced_generation = excluded.synced_generation, last_synced_at = excluded.last_synced_at,
			message = excluded.message, state_generation = excluded.state_generation, reason = excluded.reason`,
		st.DeployableUID, st.Cluster, st.State, st.SyncedGeneration, ds.tx.s.d.nullTS(st.LastSyncedAt), st.Message, st.StateGeneration, st.Reason)
	if err != nil {
		return fmt.Errorf("put deployable status %s on %s: %w", st.DeployableUID, st.Cluster, classify(err))
	}
	return nil
}

// ListStatus returns the per-cluster status of a deployable
// ordered by cluster name.
func (ds Deployables) ListStatus(ctx context.Context, deployableUID string) ([]*DeployableClusterStatus, error) {
	rows, err := ds.tx.query(ctx, `SELECT deployable_uid, cluster, state, synced_generation, last_synced_at, message,
			state_generation, reason
		FROM deployable_status WHERE deployable_uid = ? ORDER BY cluster`, deployableUID)
	if err != nil {
		return nil, fmt.Errorf("list deployable status of %s: %w", deployableUID, classify(err))
	}
	defer rows.Close()
	var out []*DeployableClusterStatus
	for rows.Next() {
		st := &DeployableClusterStatus{}
		if err := rows.Scan(&st.DeployableUID, &st.Cluster, &st.State, &st.SyncedGeneration,
			nullTimeCol{&st.LastSyncedAt}, &st.Message, &st.StateGeneration, &st.Reason); err != nil {
			return nil, fmt.Errorf("list deployable status of %s: %w", deployableUID, classify(err))
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deployable status of %s: %w", deployableUID, classify(err))
	}
	return out, nil
}
