package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Cluster is a registered member cluster. The kubeconfig is kept apart from
// Spec, sealed, so that Spec can be returned to clients as is.
type Cluster struct {
	Name            string
	Labels          map[string]string // nil when there are none
	Spec            []byte            // JSON without kubeconfig
	Kubeconfig      []byte            // sealed
	Status          []byte            // JSON or nil
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

const clusterColumns = `name, labels, spec, kubeconfig, status, created_at, updated_at, resource_version`

func scanCluster(row interface{ Scan(...any) error }) (*Cluster, error) {
	c := &Cluster{}
	var labels []byte
	if err := row.Scan(&c.Name, &labels, &c.Spec, &c.Kubeconfig, &c.Status, timeCol{&c.CreatedAt},
		timeCol{&c.UpdatedAt}, &c.ResourceVersion); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(labels, &c.Labels); err != nil {
		return nil, fmt.Errorf("cluster %s: stored labels: %w", c.Name, err)
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c, nil
}

// labelsJSON encodes labels for storage; encoding/json sorts the keys, so
// equal label sets are stored identically.
func labelsJSON(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	return string(b), err
}

// CreateCluster registers c and fills its times and ResourceVersion. It
// returns ErrConflict when the name is taken.
func (tx *Tx) CreateCluster(ctx context.Context, c *Cluster) error {
	labels, err := labelsJSON(c.Labels)
	if err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, err)
	}
	now := tx.s.now()
	res, err := tx.exec(ctx, `INSERT INTO clusters (name, labels, spec, kubeconfig, status, created_at,
			updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT DO NOTHING`,
		c.Name, labels, string(c.Spec), nullBlob(c.Kubeconfig), nullText(c.Status), tx.s.d.ts(now), tx.s.d.ts(now))
	if err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("create cluster %s: name already exists: %w", c.Name, ErrConflict)
	}
	c.CreatedAt, c.UpdatedAt, c.ResourceVersion = now, now, 1
	return nil
}

// GetCluster returns the cluster called name, or ErrNotFound.
func (tx *Tx) GetCluster(ctx context.Context, name string) (*Cluster, error) {
	c, err := scanCluster(tx.queryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get cluster %s: %w", name, classify(err))
	}
	return c, nil
}

// UpdateCluster writes Labels, Spec and Kubeconfig of the cluster called
// c.Name under the optimistic rule: ErrConflict when c.ResourceVersion is
// stale, ErrNotFound when there is no such cluster. The status is the
// controller's and is written only by UpdateClusterStatus, so that an
// admin's update never puts back a status it read before a change.
func (tx *Tx) UpdateCluster(ctx context.Context, c *Cluster) error {
	labels, err := labelsJSON(c.Labels)
	if err != nil {
		return fmt.Errorf("update cluster %s: %w", c.Name, err)
	}
	now := tx.s.now()
	res, err := tx.exec(ctx, `UPDATE clusters SET labels = ?, spec = ?, kubeconfig = ?,
			updated_at = ?, resource_version = resource_version + 1
		WHERE name = ? AND resource_version = ?`,
		labels, string(c.Spec), nullBlob(c.Kubeconfig), tx.s.d.ts(now), c.Name, c.ResourceVersion)
	if err := tx.checkUpdated(ctx, res, err, "clusters", "name", c.Name, c.ResourceVersion); err != nil {
		return fmt.Errorf("update cluster %s: %w", c.Name, err)
	}
	c.ResourceVersion++
	c.UpdatedAt = now
	return nil
}

// DeleteCluster removes the cluster and, by cascade, the deployables' sync
// status on it. It returns ErrNotFound when there is no such cluster.
func (tx *Tx) DeleteCluster(ctx context.Context, name string) error {
	res, err := tx.exec(ctx, `DELETE FROM clusters WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete cluster %s: %w", name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete cluster %s: %w", name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete cluster %s: %w", name, ErrNotFound)
	}
	return nil
}

// ListClusters returns every registered cluster ordered by name. The set is
// small (the design sizes for 100), so it is not paginated.
func (tx *Tx) ListClusters(ctx context.Context) ([]*Cluster, error) {
	rows, err := tx.query(ctx, `SELECT `+clusterColumns+` FROM clusters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", classify(err))
	}
	defer rows.Close()
	var out []*Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, fmt.Errorf("list clusters: %w", classify(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", classify(err))
	}
	return out, nil
}
