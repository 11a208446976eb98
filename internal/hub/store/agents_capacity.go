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
