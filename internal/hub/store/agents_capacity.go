package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
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
// cluster and start, and its status (which holds its requests).
type Placed struct {
	UID, Namespace, Cluster string
	StartedAt               time.Time
	Status                  []byte
}

// ListPlaced returns the runnables in one of phases whose open attempt
// started after since: the placements an agent's report may not count
// yet. Bounded by since, it reads the recent placements only.
func (rs Runnables) ListPlaced(ctx context.Context, since time.Time, phases ...string) ([]Placed, error) {
	if len(phases) == 0 {
		return nil, nil
	}
	args := []any{rs.tx.s.d.ts(since)}
	for _, p := range phases {
		args = append(args, p)
	}
	rows, err := rs.tx.query(ctx, `SELECT r.uid, r.namespace, a.cluster, a.started_at, r.status FROM runnables r
		JOIN attempts a ON a.runnable_uid = r.uid AND a.ended_at IS NULL
		WHERE a.started_at > ? AND r.phase IN (?`+strings.Repeat(", ?", len(phases)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("list placed runnables: %w", classify(err))
	}
	defer rows.Close()
	var out []Placed
	for rows.Next() {
		var p Placed
		var started *time.Time
		var status sql.NullString
		if err := rows.Scan(&p.UID, &p.Namespace, &p.Cluster, nullTimeCol{&started}, &status); err != nil {
			return nil, fmt.Errorf("list placed runnables: %w", classify(err))
		}
		if started != nil {
			p.StartedAt = *started
		}
		if status.Valid {
			p.Status = []byte(status.String)
		}
		out = append(out, p)
	}
	return out, classify(rows.Err())
}
