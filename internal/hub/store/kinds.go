package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ServedKind is a kind a member cluster serves, with its preferred version
// and whether its objects are namespaced, as the cluster's discovery says.
type ServedKind struct {
	Group, Version, Kind string
	Namespaced           bool
}

// Kinds is the kinds each member cluster serves, as one transaction reads
// and writes them.
type Kinds struct{ tx *Tx }

// Kinds returns the served kinds as tx sees them.
func (tx *Tx) Kinds() Kinds { return Kinds{tx} }

// Replace records the kinds cluster serves, as discovered at
// observedAt, in place of what was recorded before. A report older than
// the recorded one changes nothing, so that replicas and replays can write
// in any order.
func (ks Kinds) Replace(ctx context.Context, cluster string, observedAt time.Time, kinds []ServedKind) error {
	var newest int
	err := ks.tx.queryRow(ctx, `SELECT COUNT(*) FROM cluster_kinds WHERE cluster = ? AND observed_at > ?`,
		cluster, ks.tx.s.d.ts(observedAt)).Scan(&newest)
	if err != nil {
		return fmt.Errorf("served kinds of %s: %w", cluster, classify(err))
	}
	if newest > 0 {
		return nil
	}
	if _, err := ks.tx.exec(ctx, `DELETE FROM cluster_kinds WHERE cluster = ?`, cluster); err != nil {
		return fmt.Errorf("replace served kinds of %s: %w", cluster, classify(err))
	}
	// A few hundred kinds at most, written only when they change: rows of
	// a multi-row insert, chunked to stay well under either engine's
	// limit on parameters.
	const perInsert = 100
	for start := 0; start < len(kinds); start += perInsert {
		chunk := kinds[start:min(start+perInsert, len(kinds))]
		var q strings.Builder
		q.WriteString(`INSERT INTO cluster_kinds (cluster, api_group, kind, version, namespaced, observed_at) VALUES `)
		args := make([]any, 0, 6*len(chunk))
		for i, k := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, cluster, k.Group, k.Kind, k.Version, k.Namespaced, ks.tx.s.d.ts(observedAt))
		}
		// A kind listed twice keeps its first entry.
		q.WriteString(` ON CONFLICT DO NOTHING`)
		if _, err := ks.tx.exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("replace served kinds of %s: %w", cluster, classify(err))
		}
	}
	return nil
}

// Scopes returns, for each registered cluster whose discovery lists
// the kind, whether it is namespaced there.
func (ks Kinds) Scopes(ctx context.Context, group, kind string) ([]bool, error) {
	rows, err := ks.tx.query(ctx, `SELECT k.namespaced FROM cluster_kinds k JOIN clusters c ON c.name = k.cluster
		WHERE k.api_group = ? AND k.kind = ?`, group, kind)
	if err != nil {
		return nil, fmt.Errorf("scope of %s.%s: %w", kind, group, classify(err))
	}
	defer rows.Close()
	var out []bool
	for rows.Next() {
		var namespaced bool
		if err := rows.Scan(&namespaced); err != nil {
			return nil, fmt.Errorf("scope of %s.%s: %w", kind, group, classify(err))
		}
		out = append(out, namespaced)
	}
	return out, classify(rows.Err())
}

// List returns the kinds recorded for cluster, ordered by
// group and kind.
func (ks Kinds) List(ctx context.Context, cluster string) ([]ServedKind, error) {
	rows, err := ks.tx.query(ctx, `SELECT api_group, version, kind, namespaced FROM cluster_kinds
		WHERE cluster = ? ORDER BY api_group, kind`, cluster)
	if err != nil {
		return nil, fmt.Errorf("served kinds of %s: %w", cluster, classify(err))
	}
	defer rows.Close()
	var out []ServedKind
	for rows.Next() {
		var k ServedKind
		if err := rows.Scan(&k.Group, &k.Version, &k.Kind, &k.Namespaced); err != nil {
			return nil, fmt.Errorf("served kinds of %s: %w", cluster, classify(err))
		}
		out = append(out, k)
	}
	return out, classify(rows.Err())
}
