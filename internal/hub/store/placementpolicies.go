package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// PlacementPolicy is one placement policy as stored: a namespace's, or
// the farm's (Namespace "").
type PlacementPolicy struct {
	UID             string
	Namespace       string
	Name            string
	Spec            []byte // JSON of v1alpha1.PlacementPolicySpec
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// PlacementPolicies is the placement_policies table as one transaction
// reads and writes it.
type PlacementPolicies struct{ tx *Tx }

// PlacementPolicies returns the placement policies as tx sees them.
func (tx *Tx) PlacementPolicies() PlacementPolicies { return PlacementPolicies{tx} }

const placementPolicyColumns = `uid, namespace, name, spec, created_at, updated_at, resource_version`

func scanPlacementPolicy(row interface{ Scan(...any) error }) (*PlacementPolicy, error) {
	p := &PlacementPolicy{}
	err := row.Scan(&p.UID, &p.Namespace, &p.Name, &p.Spec, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}, &p.ResourceVersion)
	return p, err
}

func policyRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Get returns the policy namespace/name ("" for the farm's), or
// ErrNotFound.
func (ps PlacementPolicies) Get(ctx context.Context, namespace, name string) (*PlacementPolicy, error) {
	p, err := scanPlacementPolicy(ps.tx.queryRow(ctx, `SELECT `+placementPolicyColumns+` FROM placement_policies WHERE namespace = ? AND name = ?`, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("placement policy %s: %w", policyRef(namespace, name), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get placement policy %s: %w", policyRef(namespace, name), classify(err))
	}
	return p, nil
}

// Create inserts p (the caller chooses its UID) and fills in its times
// and ResourceVersion; ErrConflict when namespace/name is taken.
func (ps PlacementPolicies) Create(ctx context.Context, p *PlacementPolicy) error {
	if p.UID == "" {
		return fmt.Errorf("create placement policy %s: empty uid", policyRef(p.Namespace, p.Name))
	}
	now := ps.tx.s.now()
	res, err := ps.tx.exec(ctx, `INSERT INTO placement_policies (uid, namespace, name, spec, created_at, updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`,
		p.UID, p.Namespace, p.Name, string(p.Spec), ps.tx.s.d.ts(now), ps.tx.s.d.ts(now))
	if err != nil {
		return fmt.Errorf("create placement policy %s: %w", policyRef(p.Namespace, p.Name), classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create placement policy %s: %w", policyRef(p.Namespace, p.Name), classify(err))
	} else if n == 0 {
		return fmt.Errorf("create placement policy %s: already exists: %w", policyRef(p.Namespace, p.Name), ErrConflict)
	}
	p.CreatedAt, p.UpdatedAt, p.ResourceVersion = now, now, 1
	return nil
}

// Update writes p's spec, provided its ResourceVersion is still
// p.ResourceVersion (ErrConflict otherwise, ErrNotFound when it is gone);
// it bumps the version.
func (ps PlacementPolicies) Update(ctx context.Context, p *PlacementPolicy) error {
	now := ps.tx.s.now()
	res, err := ps.tx.exec(ctx, `UPDATE placement_policies SET spec = ?, updated_at = ?, resource_version = resource_version + 1
		WHERE uid = ? AND resource_version = ?`, string(p.Spec), ps.tx.s.d.ts(now), p.UID, p.ResourceVersion)
	if err := ps.tx.checkUpdated(ctx, res, err, "placement_policies", "uid", p.UID, p.ResourceVersion); err != nil {
		return fmt.Errorf("update placement policy %s: %w", policyRef(p.Namespace, p.Name), err)
	}
	p.ResourceVersion++
	p.UpdatedAt = now
	return nil
}

// Delete removes the policy namespace/name; ErrNotFound when there is
// none. What it placed stays.
func (ps PlacementPolicies) Delete(ctx context.Context, namespace, name string) error {
	res, err := ps.tx.exec(ctx, `DELETE FROM placement_policies WHERE namespace = ? AND name = ?`, namespace, name)
	if err != nil {
		return fmt.Errorf("delete placement policy %s: %w", policyRef(namespace, name), classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete placement policy %s: %w", policyRef(namespace, name), classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete placement policy %s: %w", policyRef(namespace, name), ErrNotFound)
	}
	return nil
}

// List returns one page of the policies of namespace ("" for the farm's),
// by name, and the token of the next page, "" on the last.
func (ps PlacementPolicies) List(ctx context.Context, namespace, cont string, limit int) ([]*PlacementPolicy, string, error) {
	return listPage(ctx, ps.tx, "placement_policies", placementPolicyColumns, []string{"namespace = ?"}, []any{namespace}, cont, pageLimit(limit),
		scanPlacementPolicy, func(p *PlacementPolicy) (string, string) { return p.Namespace, p.Name })
}

// ListAllNamespaces returns one page of the policies of every namespace
// (not the farm's), by namespace and name.
func (ps PlacementPolicies) ListAllNamespaces(ctx context.Context, cont string, limit int) ([]*PlacementPolicy, string, error) {
	return listPage(ctx, ps.tx, "placement_policies", placementPolicyColumns, []string{"namespace <> ''"}, nil, cont, pageLimit(limit),
		scanPlacementPolicy, func(p *PlacementPolicy) (string, string) { return p.Namespace, p.Name })
}

// For returns the policies that may select an object of namespace: the
// namespace's and the farm's, at most MaxPoliciesFor of them.
func (ps PlacementPolicies) For(ctx context.Context, namespace string) ([]*PlacementPolicy, error) {
	rows, err := ps.tx.query(ctx, `SELECT `+placementPolicyColumns+` FROM placement_policies WHERE namespace IN (?, '') ORDER BY namespace, name LIMIT ?`,
		namespace, MaxPoliciesFor)
	if err != nil {
		return nil, fmt.Errorf("placement policies for %s: %w", namespace, classify(err))
	}
	defer rows.Close()
	var out []*PlacementPolicy
	for rows.Next() {
		p, err := scanPlacementPolicy(rows)
		if err != nil {
			return nil, fmt.Errorf("placement policies for %s: %w", namespace, classify(err))
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("placement policies for %s: %w", namespace, classify(err))
	}
	return out, nil
}

// MaxPoliciesFor bounds the policies read for one write of a native
// object; the API refuses a policy beyond it (MaxPlacementPolicies).
const MaxPoliciesFor = 1000
