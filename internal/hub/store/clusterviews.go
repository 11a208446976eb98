package store

import (
	"context"
	"fmt"
	"time"
)

// ClusterView is what one observer (a DC's controller) saw of one
// cluster at its latest probe, in table cluster_views. Its times are the
// database's clock.
type ClusterView struct {
	Cluster, Observer string
	// Outcome is "ok", "not-ready" or "unreachable"; Detail what failed.
	Outcome, Detail string
	ObservedAt      time.Time
	// FailingSince is when the observer's current run of failed probes
	// began; nil when the probe succeeded.
	FailingSince *time.Time
}

// ViewRecord is one probe result to record.
type ViewRecord struct {
	Cluster, Outcome, Detail string
	// Failing: the probe failed, and the observer's run of failed probes
	// has lasted FailingFor (by its own monotonic clock) at the probe.
	Failing    bool
	FailingFor time.Duration
}

// viewRetention is how long a view that is no longer written (a removed
// cluster, an observer gone for good) stays.
const viewRetention = time.Hour

// RecordClusterViews writes observer's views, stamped with the
// database's clock, and drops views nobody wrote for an hour. Stamping by
// one clock, the database's, lets the leader compare views from every DC
// whatever their controllers' clocks say.
func (tx *Tx) RecordClusterViews(ctx context.Context, observer string, views []ViewRecord) error {
	now := tx.s.d.dbNow()
	for _, v := range views {
		since, sinceArg := "NULL", []any{}
		if v.Failing {
			since, sinceArg = tx.s.d.dbNowPlus(), []any{intervalArg(-v.FailingFor)}
		}
		args := append([]any{v.Cluster, observer, v.Outcome, v.Detail}, sinceArg...)
		if _, err := tx.exec(ctx, `INSERT INTO cluster_views (cluster, observer, outcome, detail, observed_at, failing_since)
			VALUES (?, ?, ?, ?, `+now+`, `+since+`)
			ON CONFLICT (cluster, observer) DO UPDATE SET outcome = excluded.outcome, detail = excluded.detail,
				observed_at = excluded.observed_at, failing_since = excluded.failing_since`, args...); err != nil {
			return fmt.Errorf("record view of %s from %q: %w", v.Cluster, observer, classify(err))
		}
	}
	if _, err := tx.exec(ctx, `DELETE FROM cluster_views WHERE observed_at < `+tx.s.d.dbNowPlus(), intervalArg(-viewRetention)); err != nil {
		return fmt.Errorf("drop old cluster views: %w", classify(err))
	}
	return nil
}

// ListClusterViews returns every recorded view and the database's clock
// at the time of the read, against which their ages are measured.
func (tx *Tx) ListClusterViews(ctx context.Context) ([]ClusterView, time.Time, error) {
	var now time.Time
	if err := tx.queryRow(ctx, `SELECT `+tx.s.d.dbNow()).Scan(timeCol{&now}); err != nil {
		return nil, time.Time{}, fmt.Errorf("database clock: %w", classify(err))
	}
	rows, err := tx.query(ctx, `SELECT cluster, observer, outcome, detail, observed_at, failing_since FROM cluster_views
		ORDER BY cluster, observer`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list cluster views: %w", classify(err))
	}
	defer rows.Close()
	var out []ClusterView
	for rows.Next() {
		var v ClusterView
		if err := rows.Scan(&v.Cluster, &v.Observer, &v.Outcome, &v.Detail, timeCol{&v.ObservedAt}, nullTimeCol{&v.FailingSince}); err != nil {
			return nil, time.Time{}, fmt.Errorf("list cluster views: %w", classify(err))
		}
		out = append(out, v)
	}
	return out, now, classify(rows.Err())
}
