package store

import (
	"context"
	"fmt"
	"time"
)

// RecordHubLeases writes, before the hub renews its lease in each of
// clusters (the Lease purser-hub that their agents read), that a renewal
// issued now can land until the database's clock plus within: the
// renewal's own timeout. It is written first, and the renewal is not sent
// when the write fails, so that the failover controller, which counts an
// AtMostOne runnable's wait from this time (HubLeases), never misses a
// renewal its agent may have seen. A time never goes back: of two
// observers renewing one cluster, the later bound stands.
func (cs Clusters) RecordHubLeases(ctx context.Context, clusters []string, within time.Duration) error {
	later := "GREATEST(cluster_hub_leases.lands_by, excluded.lands_by)"
	if cs.tx.s.d.engine != EnginePostgres {
		later = "MAX(cluster_hub_leases.lands_by, excluded.lands_by)"
	}
	for _, c := range clusters {
		if _, err := cs.tx.exec(ctx, `INSERT INTO cluster_hub_leases (cluster, lands_by) VALUES (?, `+cs.tx.s.d.dbNowPlus()+`)
			ON CONFLICT (cluster) DO UPDATE SET lands_by = `+later, c, intervalArg(within)); err != nil {
			return fmt.Errorf("record the hub's lease renewal in %s: %w", c, classify(err))
		}
	}
	return nil
}

// HubLeases returns, by cluster, the latest time a renewal of the hub's
// lease in it can land (RecordHubLeases), and the database's clock at the
// read, against which the caller moves those times to its own clock.
func (cs Clusters) HubLeases(ctx context.Context) (map[string]time.Time, time.Time, error) {
	var now time.Time
	if err := cs.tx.queryRow(ctx, `SELECT `+cs.tx.s.d.dbNow()).Scan(timeCol{&now}); err != nil {
		return nil, time.Time{}, fmt.Errorf("database clock: %w", classify(err))
	}
	rows, err := cs.tx.query(ctx, `SELECT cluster, lands_by FROM cluster_hub_leases`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list the hub's lease renewals: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, timeCol{&at}); err != nil {
			return nil, time.Time{}, fmt.Errorf("list the hub's lease renewals: %w", classify(err))
		}
		out[name] = at
	}
	return out, now, classify(rows.Err())
}
