package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Drill states, as the drills table and the API name them.
const (
	// DrillRunning: the drill's moves (or, after its end with move-back,
	// the moves back) are under way; the drill follower watches them.
	DrillRunning = "Running"
	// DrillEnded: every move finished or failed.
	DrillEnded = "Ended"
	// DrillFailed: every move planned failed; nothing was moved.
	DrillFailed = "Failed"
)

// Drill is one real drill as stored.
type Drill struct {
	ID         int64
	TargetKind string
	TargetName string
	// Force: started although the what-if's verdict was not Absorbed.
	Force bool
	// Actor is the admin who started it: the actor of its audit entries.
	Actor     string
	State     string
	StartedAt time.Time
	// EndedAt is when it left Running the last time.
	EndedAt *time.Time
	// Planned is the what-if's report at start (JSON of
	// v1alpha1.DrillReport), never changed after.
	Planned []byte
	// Actual is the follower's record (JSON of v1alpha1.DrillStatus's
	// actual parts); empty until written.
	Actual []byte
	// MoveBack: its end asked the moved work to go back.
	MoveBack        bool
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Name is the drill's name in the API: its id.
func (d *Drill) Name() string { return strconv.FormatInt(d.ID, 10) }

// Drills is the drills table as one transaction reads and writes it.
type Drills struct{ tx *Tx }

// Drills returns the drills as tx sees them.
func (tx *Tx) Drills() Drills { return Drills{tx} }

const drillColumns = `id, target_kind, target_name, force, actor, state, started_at, ended_at, planned, actual, move_back, updated_at, resource_version`

func scanDrill(row interface{ Scan(...any) error }) (*Drill, error) {
	d := &Drill{}
	var planned, actual string
	err := row.Scan(&d.ID, &d.TargetKind, &d.TargetName, &d.Force, &d.Actor, &d.State, timeCol{&d.StartedAt}, nullTimeCol{&d.EndedAt},
		&planned, &actual, &d.MoveBack, timeCol{&d.UpdatedAt}, &d.ResourceVersion)
	d.Planned = []byte(planned)
	if actual != "" {
		d.Actual = []byte(actual)
	}
	return d, err
}

// Create inserts d and fills in its ID, UpdatedAt and ResourceVersion;
// StartedAt is the caller's (the time of the what-if).
func (ds Drills) Create(ctx context.Context, d *Drill) error {
	now := ds.tx.s.now()
	err := ds.tx.queryRow(ctx, `INSERT INTO drills (target_kind, target_name, force, actor, state, started_at, ended_at, planned, actual,
			move_back, updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING id`,
		d.TargetKind, d.TargetName, d.Force, d.Actor, d.State, ds.tx.s.d.ts(d.StartedAt), ds.tx.s.d.nullTS(d.EndedAt),
		string(d.Planned), string(d.Actual), d.MoveBack, ds.tx.s.d.ts(now)).Scan(&d.ID)
	if err != nil {
		return fmt.Errorf("create drill of %s %s: %w", d.TargetKind, d.TargetName, classify(err))
	}
	d.StartedAt, d.UpdatedAt, d.ResourceVersion = truncate(d.StartedAt), now, 1
	return nil
}

// Get returns drill id, or ErrNotFound.
func (ds Drills) Get(ctx context.Context, id int64) (*Drill, error) {
	d, err := scanDrill(ds.tx.queryRow(ctx, `SELECT `+drillColumns+` FROM drills WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("drill %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get drill %d: %w", id, classify(err))
	}
	return d, nil
}

// Update writes d's state, end, actual record and move-back flag,
// provided its ResourceVersion is still d.ResourceVersion (ErrConflict
// otherwise, ErrNotFound when it is gone); it bumps the version. What was
// planned, by whom and against what never changes.
func (ds Drills) Update(ctx context.Context, d *Drill) error {
	now := ds.tx.s.now()
	res, err := ds.tx.exec(ctx, `UPDATE drills SET state = ?, ended_at = ?, actual = ?, move_back = ?, updated_at = ?,
		resource_version = resource_version + 1 WHERE id = ? AND resource_version = ?`,
		d.State, ds.tx.s.d.nullTS(d.EndedAt), string(d.Actual), d.MoveBack, ds.tx.s.d.ts(now), d.ID, d.ResourceVersion)
	if err := ds.tx.checkUpdated(ctx, res, err, "drills", "id", strconv.FormatInt(d.ID, 10), d.ResourceVersion); err != nil {
		return fmt.Errorf("update drill %d: %w", d.ID, err)
	}
	d.ResourceVersion++
	d.UpdatedAt = now
	return nil
}

// DrillFilter selects drills for List; empty fields match all.
type DrillFilter struct {
	State string
	// Before, when positive, lists only drills of a smaller id: the
	// next page after one whose last id it is.
	Before int64
	Limit  int // <= 0: 500; capped at 1000
}

// List returns drills newest first.
func (ds Drills) List(ctx context.Context, f DrillFilter) ([]*Drill, error) {
	q := `SELECT ` + drillColumns + ` FROM drills WHERE 1 = 1`
	var args []any
	if f.State != "" {
		q, args = q+` AND state = ?`, append(args, f.State)
	}
	if f.Before > 0 {
		q, args = q+` AND id < ?`, append(args, f.Before)
	}
	rows, err := ds.tx.query(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, pageLimit(f.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("list drills: %w", classify(err))
	}
	defer rows.Close()
	var out []*Drill
	for rows.Next() {
		d, err := scanDrill(rows)
		if err != nil {
			return nil, fmt.Errorf("list drills: %w", classify(err))
		}
		out = append(out, d)
	}
	return out, classify(rows.Err())
}
