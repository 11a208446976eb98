package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// CapacityReport is what a cluster's agent last said it has free.
type CapacityReport struct {
	Cluster string
	// At is the time of the heartbeat that carried it, as the stream
	// stored it.
	At time.Time
	// Report is its JSON (stream.Capacity).
	Report []byte
}

// RecordCapacity stores a cluster's capacity report of the heartbeat at
// time at, unless a later one is stored already: a beat redelivered late
// cannot put back an older figure.
func (ag Agents) RecordCapacity(ctx context.Context, cluster string, at time.Time, report []byte) error {
	var last *time.Time
	err := ag.tx.queryRow(ctx, `SELECT capacity_at FROM cluster_agents WHERE cluster = ?`, cluster).Scan(nullTimeCol{&last})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("capacity of %s: %w", cluster, classify(err))
	}
	if last != nil && !at.After(*last) {
		return nil
	}
	_, err = ag.tx.exec(ctx, `INSERT INTO cluster_agents (cluster, capacity, capacity_at) VALUES (?, ?, ?)
		ON CONFLICT (cluster) DO UPDATE SET capacity = excluded.capacity, capacity_at = excluded.capacity_at`,
		cluster, nullText(report), ag.tx.s.d.ts(at))
	if err != nil {
		return fmt.Errorf("record capacity of %s: %w", cluster, classify(err))
	}
	return nil
}

// Capacities returns every cluster's latest capacity report, by cluster.
func (ag Agents) Capacities(ctx context.Context) (map[string]CapacityReport, error) {
	rows, err := ag.tx.query(ctx, `SELECT cluster, capacity_at, capacity FROM cluster_agents WHERE capacity IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list capacity: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]CapacityReport{}
	for rows.Next() {
		var r CapacityReport
		var at *time.Time
		var report sql.NullString
		if err := rows.Scan(&r.Cluster, nullTimeCol{&at}, &report); err != nil {
			return nil, fmt.Errorf("list capacity: %w", classify(err))
		}
		if at != nil {
			r.At = *at
		}
		r.Report = []byte(report.String)
		out[r.Cluster] = r
	}
	return out, classify(rows.Err())
}

// Placed is one runnable that occupies a cluster: its current attempt's
// cluster, when it last changed, and its status (which holds its
// requests).
type Placed struct {
	UID, Namespace, Cluster, Phase string
	UpdatedAt                      time.Time
	Status                         []byte
}

// ListPlaced returns the runnables an agent's report may not count yet:
// those placed and not seen running (Scheduled, Submitted: their pods may
// not exist yet), and those Running that changed after since. An open
// attempt names the cluster.
func (rs Runnables) ListPlaced(ctx context.Context, since time.Time) ([]Placed, error) {
	rows, err := rs.tx.query(ctx, `SELECT r.uid, r.namespace, a.cluster, r.phase, r.updated_at, r.status FROM runnables r
		JOIN attempts a ON a.runnable_uid = r.uid AND a.ended_at IS NULL
		WHERE r.phase IN ('Scheduled', 'Submitted') OR (r.phase = 'Running' AND r.updated_at > ?)`, rs.tx.s.d.ts(since))
	if err != nil {
		return nil, fmt.Errorf("list placed runnables: %w", classify(err))
	}
	defer rows.Close()
	var out []Placed
	for rows.Next() {
		var p Placed
		var status sql.NullString
		if err := rows.Scan(&p.UID, &p.Namespace, &p.Cluster, &p.Phase, timeCol{&p.UpdatedAt}, &status); err != nil {
			return nil, fmt.Errorf("list placed runnables: %w", classify(err))
		}
		if status.Valid {
			p.Status = []byte(status.String)
		}
		out = append(out, p)
	}
	return out, classify(rows.Err())
}

// CapacityOf returns cluster's latest capacity report; ErrNotFound when
// its agent has reported none.
func (ag Agents) CapacityOf(ctx context.Context, cluster string) (CapacityReport, error) {
	r := CapacityReport{Cluster: cluster}
	var at *time.Time
	var report sql.NullString
	err := ag.tx.queryRow(ctx, `SELECT capacity_at, capacity FROM cluster_agents WHERE cluster = ? AND capacity IS NOT NULL`, cluster).
		Scan(nullTimeCol{&at}, &report)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("capacity of %s: %w", cluster, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("capacity of %s: %w", cluster, classify(err))
	}
	if at != nil {
		r.At = *at
	}
	r.Report = []byte(report.String)
	return r, nil
}

// PlacedOn is ListPlaced for one cluster: the runnables on it that its
// agent's report of at may not count yet. The submitter checks the one
// cluster it chose against it, inside the transaction that writes the
// placement (its kept sums chose; the store decides).
func (rs Runnables) PlacedOn(ctx context.Context, cluster string, since time.Time) ([]Placed, error) {
	rows, err := rs.tx.query(ctx, `SELECT r.uid, r.namespace, a.cluster, r.phase, r.updated_at, r.status FROM runnables r
		JOIN attempts a ON a.runnable_uid = r.uid AND a.ended_at IS NULL
		WHERE r.cluster = ? AND a.cluster = ? AND (r.phase IN ('Scheduled', 'Submitted') OR (r.phase = 'Running' AND r.updated_at > ?))`,
		cluster, cluster, rs.tx.s.d.ts(since))
	if err != nil {
		return nil, fmt.Errorf("list runnables placed on %s: %w", cluster, classify(err))
	}
	defer rows.Close()
	var out []Placed
	for rows.Next() {
		var p Placed
		var status sql.NullString
		if err := rows.Scan(&p.UID, &p.Namespace, &p.Cluster, &p.Phase, timeCol{&p.UpdatedAt}, &status); err != nil {
			return nil, fmt.Errorf("list runnables placed on %s: %w", cluster, classify(err))
		}
		if status.Valid {
			p.Status = []byte(status.String)
		}
		out = append(out, p)
	}
	return out, classify(rows.Err())
}

// RunnableState is what the submitter keeps of a runnable for its sums:
// where it is, in what phase, since when, what it asks for (in its
// status), and the version of the row it read.
type RunnableState struct {
	UID, Namespace, Cluster, Phase string
	UpdatedAt                      time.Time
	Status                         []byte
	ResourceVersion                int64
}

// ActiveStates returns the state of every runnable in an active phase
// (Scheduled, Submitted, Running): what the submitter's sums are built
// from.
func (rs Runnables) ActiveStates(ctx context.Context) ([]RunnableState, error) {
	return rs.states(ctx, `WHERE phase IN ('Scheduled', 'Submitted', 'Running')`)
}

// ChangedSince returns the state of every runnable whose row changed
// after since, whatever its phase: how a submitter learns of the moves
// the others made (the ingester's starts and ends, the controller's
// evictions, another replica's placements). It reads the whole table's
// updated_at (there is no index on it): one scan a second, never one
// per placement.
func (rs Runnables) ChangedSince(ctx context.Context, since time.Time) ([]RunnableState, error) {
	return rs.states(ctx, `WHERE updated_at > ?`, rs.tx.s.d.ts(since))
}

func (rs Runnables) states(ctx context.Context, where string, args ...any) ([]RunnableState, error) {
	rows, err := rs.tx.query(ctx, `SELECT uid, namespace, cluster, phase, updated_at, status, resource_version FROM runnables `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read runnable states: %w", classify(err))
	}
	defer rows.Close()
	var out []RunnableState
	for rows.Next() {
		var s RunnableState
		var status sql.NullString
		if err := rows.Scan(&s.UID, &s.Namespace, &s.Cluster, &s.Phase, timeCol{&s.UpdatedAt}, &status, &s.ResourceVersion); err != nil {
			return nil, fmt.Errorf("read runnable states: %w", classify(err))
		}
		if status.Valid {
			s.Status = []byte(status.String)
		}
		out = append(out, s)
	}
	return out, classify(rows.Err())
}
