package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// DeployableRollout is the rollout state of one deployable: the previous
// generation that clusters a rollout has not reached keep (its Secret
// values sealed as in the deployables table), the syncer's latest
// decision (Status) and what people set (Control), both JSON.
type DeployableRollout struct {
	DeployableUID      string
	PreviousGeneration int64 // 0: none
	PreviousSpec       []byte
	PreviousSecret     []byte
	PreviousSpecHash   string
	Status             []byte
	Control            []byte
	// Kept are the other generations that clusters hold or fall back to
	// under the latest decision: one superseded mid-rollout stays on the
	// clusters it reached (KeepPrevious adds it, the syncer drops it when
	// no decision names it).
	Kept []KeptGeneration
	// ResourceVersion is 0 for a row not stored yet.
	ResourceVersion int64
}

// KeptGeneration is one generation of a deployable's spec kept for the
// clusters that hold it: the spec as the deployables table stores it, its
// Secret values sealed as there.
type KeptGeneration struct {
	Generation int64           `json:"generation"`
	Spec       json.RawMessage `json:"spec"`
	Secret     []byte          `json:"secret,omitempty"`
	SpecHash   string          `json:"specHash"`
}

// KeepOnly drops the kept generations that gens does not name, and says
// whether any was dropped.
func (r *DeployableRollout) KeepOnly(gens []int64) bool {
	n := len(r.Kept)
	r.Kept = slices.DeleteFunc(r.Kept, func(k KeptGeneration) bool { return !slices.Contains(gens, k.Generation) })
	return len(r.Kept) != n
}

const rolloutColumns = `deployable_uid, previous_generation, previous_spec, previous_secret, previous_spec_hash,
	status, control, kept, resource_version`

func scanRollout(row interface{ Scan(...any) error }) (*DeployableRollout, error) {
	r := &DeployableRollout{}
	var spec, status, control, kept sql.NullString
	err := row.Scan(&r.DeployableUID, &r.PreviousGeneration, &spec, &r.PreviousSecret, &r.PreviousSpecHash,
		&status, &control, &kept, &r.ResourceVersion)
	if spec.Valid {
		r.PreviousSpec = []byte(spec.String)
	}
	if status.Valid {
		r.Status = []byte(status.String)
	}
	if control.Valid {
		r.Control = []byte(control.String)
	}
	if err == nil && kept.Valid && kept.String != "" {
		if jerr := json.Unmarshal([]byte(kept.String), &r.Kept); jerr != nil {
			return r, fmt.Errorf("kept generations of deployable %s: %w", r.DeployableUID, jerr)
		}
	}
	return r, err
}

// keptColumn is the kept generations as the column stores them.
func (r *DeployableRollout) keptColumn() (any, error) {
	if len(r.Kept) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(r.Kept)
	if err != nil {
		return nil, fmt.Errorf("kept generations of deployable %s: %w", r.DeployableUID, err)
	}
	return string(b), nil
}

// GetRollout returns the rollout row of a deployable, or ErrNotFound.
func (ds Deployables) GetRollout(ctx context.Context, uid string) (*DeployableRollout, error) {
	r, err := scanRollout(ds.tx.queryRow(ctx, `SELECT `+rolloutColumns+` FROM deployable_rollouts WHERE deployable_uid = ?`, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("rollout of deployable %s: %w", uid, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get rollout of deployable %s: %w", uid, classify(err))
	}
	return r, nil
}

// ListRollouts returns every rollout row.
func (ds Deployables) ListRollouts(ctx context.Context) ([]*DeployableRollout, error) {
	rows, err := ds.tx.query(ctx, `SELECT `+rolloutColumns+` FROM deployable_rollouts ORDER BY deployable_uid`)
	if err != nil {
		return nil, fmt.Errorf("list rollouts: %w", classify(err))
	}
	defer rows.Close()
	var out []*DeployableRollout
	for rows.Next() {
		r, err := scanRollout(rows)
		if err != nil {
			return nil, fmt.Errorf("list rollouts: %w", classify(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list rollouts: %w", classify(err))
	}
	return out, nil
}

// PutRollout writes r: inserted when r.ResourceVersion is 0 (ErrConflict
// if a row exists), else updated under the optimistic rule (ErrConflict
// when stale). Its deployable must exist, else ErrNotFound.
func (ds Deployables) PutRollout(ctx context.Context, r *DeployableRollout) error {
	if err := ds.tx.mustExist(ctx, "deployables", "uid", r.DeployableUID); err != nil {
		return fmt.Errorf("put rollout: %w", err)
	}
	kept, err := r.keptColumn()
	if err != nil {
		return err
	}
	if r.ResourceVersion == 0 {
		var uid string
		err := ds.tx.queryRow(ctx, `INSERT INTO deployable_rollouts (`+rolloutColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING RETURNING deployable_uid`,
			r.DeployableUID, r.PreviousGeneration, nullText(r.PreviousSpec), nullBlob(r.PreviousSecret), r.PreviousSpecHash,
			nullText(r.Status), nullText(r.Control), kept).Scan(&uid)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("create rollout of deployable %s: it exists already: %w", r.DeployableUID, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("create rollout of deployable %s: %w", r.DeployableUID, classify(err))
		}
		r.ResourceVersion = 1
		return nil
	}
	res, err := ds.tx.exec(ctx, `UPDATE deployable_rollouts SET previous_generation = ?, previous_spec = ?,
			previous_secret = ?, previous_spec_hash = ?, status = ?, control = ?, kept = ?, resource_version = resource_version + 1
		WHERE deployable_uid = ? AND resource_version = ?`,
		r.PreviousGeneration, nullText(r.PreviousSpec), nullBlob(r.PreviousSecret), r.PreviousSpecHash,
		nullText(r.Status), nullText(r.Control), kept, r.DeployableUID, r.ResourceVersion)
	if err := ds.tx.checkUpdated(ctx, res, err, "deployable_rollouts", "deployable_uid", r.DeployableUID, r.ResourceVersion); err != nil {
		return fmt.Errorf("update rollout of deployable %s: %w", r.DeployableUID, err)
	}
	r.ResourceVersion++
	return nil
}

// KeepPrevious runs in the transaction that replaces the live spec of
// rec, before rec is changed, when the new spec rolls out in waves: the
// generation being replaced becomes the previous one, which clusters
// that no decision named (those that join) fall back to, unless it
// rolled out in waves itself (oldRollsOut) and did not complete, in which
// case the previous generation stays as it was, and the one replaced is
// kept beside it (Kept) for the clusters the latest decision gave it:
// each keeps it until its wave gives it the new one. Secret values stay
// sealed as the deployables table holds them.
func (ds Deployables) KeepPrevious(ctx context.Context, rec *Deployable, oldRollsOut bool) error {
	if rec.Generation == 0 || rec.DeletedAt != nil {
		return nil
	}
	r, err := ds.GetRollout(ctx, rec.UID)
	if errors.Is(err, ErrNotFound) {
		r, err = &DeployableRollout{DeployableUID: rec.UID}, nil
	}
	if err != nil {
		return err
	}
	var st rolloutDecision
	decided := len(r.Status) > 0 && json.Unmarshal(r.Status, &st) == nil && st.Generation == rec.Generation
	done := !oldRollsOut || (decided && st.State == "Complete")
	// Only a generation a decision gave some cluster is kept: one replaced
	// before any cluster was given it is held by none, and a stream of
	// changes cannot grow the row.
	given := decided && st.gives(rec.Generation)
	switch {
	case done:
		r.PreviousGeneration, r.PreviousSpec, r.PreviousSecret, r.PreviousSpecHash = rec.Generation, rec.Spec, rec.Secret, rec.SpecHash
	case given && !slices.ContainsFunc(r.Kept, func(k KeptGeneration) bool { return k.Generation == rec.Generation }):
		r.Kept = append(r.Kept, KeptGeneration{Generation: rec.Generation, Spec: rec.Spec, Secret: rec.Secret, SpecHash: rec.SpecHash})
	case !given:
		return nil
	}
	return ds.PutRollout(ctx, r)
}

// rolloutDecision is the part of the syncer's decision (the JSON of
// v1alpha1.RolloutStatus) that KeepPrevious reads.
type rolloutDecision struct {
	Generation int64  `json:"generation"`
	State      string `json:"state"`
	Clusters   []struct {
		Generation int64 `json:"generation"`
	} `json:"clusters"`
}

// gives reports whether the decision gives gen to some cluster.
func (d rolloutDecision) gives(gen int64) bool {
	for _, c := range d.Clusters {
		if c.Generation == gen {
			return true
		}
	}
	return false
}
