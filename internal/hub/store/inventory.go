package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/internal/platform/resourceversion"
)

// Inventory is the inventory and its tombstones as one transaction reads
// and writes them.
type Inventory struct{ tx *Tx }

// Inventory returns the inventory as tx sees it.
func (tx *Tx) Inventory() Inventory { return Inventory{tx} }

// InventoryRow is purser's copy of one object in one member cluster, keyed
// by (Cluster, UID).
type InventoryRow struct {
	Cluster         string
	APIVersion      string
	Kind            string
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	Labels          map[string]string // nil when there are none
	Health          string
	Phase           string
	// ObservedAt is when the agent saw this state, by the agent's clock;
	// snapshot reconciliation compares it with the snapshot's time when
	// resourceVersions are not comparable.
	ObservedAt time.Time
	// Object is the trimmed object, valid JSON (the API copies it into
	// its answers as it is); nil when listed without it.
	Object []byte
	// Seq is the number of the record's last change in the inventory's
	// change sequence (inventory_feed.go), as listed; ignored on writes.
	Seq int64
}

// InventoryTombstone records that an object was deleted at (or was absent
// from a list taken at) ResourceVersion.
type InventoryTombstone struct {
	Cluster         string
	UID             string
	ResourceVersion string
	DeletedAt       time.Time
}

// supersedes reports whether a state at incoming may replace one at
// current. Incomparable versions are accepted (last writer wins): a
// non-etcd apiserver is the only source of them, and refusing would freeze
// the record forever.
func supersedes(incoming, current string) bool {
	c, ok := resourceversion.Compare(incoming, current)
	return !ok || c > 0
}

// inChunk bounds the number of keys in one IN list or multi-row INSERT, far
// below both engines' parameter limits and small enough to plan quickly.
const inChunk = 500

// objectKey names a record: (cluster, uid), the inventory's primary key.
type objectKey struct{ cluster, uid string }

func compareKeys(a, b objectKey) int {
	if c := strings.Compare(a.cluster, b.cluster); c != 0 {
		return c
	}
	return strings.Compare(a.uid, b.uid)
}

// keyCond is a condition "(cluster, uid) is one of these keys" and its
// arguments, which go first in the statement's (PostgreSQL's query mode
// leads them).
type keyCond struct {
	cond string
	args []any
}

// keyConds splits keys, in key order, into conditions of at most inChunk
// keys each. On PostgreSQL a condition spans clusters: a batch of events
// from a hundred clusters is one statement per chunk, not one per cluster
// (a round trip each, which made a batch of a farm's events cost hundreds
// of round trips: docs/benchmarks.md, "The inventory at design size").
// SQLite keeps one condition per cluster, each a range of the primary key,
// which its single local writer pays nothing for.
func (inv Inventory) keyConds(keys []objectKey) []keyCond {
	var out []keyCond
	if inv.tx.s.d.engine == EnginePostgres {
		for start := 0; start < len(keys); start += inChunk {
			part := keys[start:min(start+inChunk, len(keys))]
			clusters, uids := make([]string, len(part)), make([]string, len(part))
			for i, k := range part {
				clusters[i], uids[i] = k.cluster, k.uid
			}
			// QueryExecModeExec plans the statement with its actual values
			// each time: a cached generic plan, chosen before the table has
			// statistics, scanned the cluster's whole key range and compared
			// each row with every uid, which grew with the table.
			out = append(out, keyCond{cond: "(cluster, uid) IN (SELECT * FROM unnest(?::text[], ?::text[]))",
				args: []any{pgx.QueryExecModeExec, clusters, uids}})
		}
		return out
	}
	for start := 0; start < len(keys); {
		end := start + 1
		for end < len(keys) && end-start < inChunk && keys[end].cluster == keys[start].cluster {
			end++
		}
		args := make([]any, 0, end-start+1)
		args = append(args, keys[start].cluster)
		for _, k := range keys[start:end] {
			args = append(args, k.uid)
		}
		out = append(out, keyCond{cond: "cluster = ? AND uid IN (" + placeholders(end-start) + ")", args: args})
		start = end
	}
	return out
}

// versions returns the resourceVersion of each of keys (in key order) in
// table (inventory or inventory_tombstones). On PostgreSQL the rows are
// locked, so that two ingesters sharing a cluster cannot interleave their
// read-compare-write; SQLite has a single writer anyway.
func (inv Inventory) versions(ctx context.Context, table string, keys []objectKey) (map[objectKey]string, error) {
	out := make(map[objectKey]string, len(keys))
	for _, kc := range inv.keyConds(keys) {
		q := `SELECT cluster, uid, resource_version FROM ` + table + ` WHERE ` + kc.cond
		if inv.tx.s.d.engine == EnginePostgres {
			q += " FOR UPDATE"
		}
		rows, err := inv.tx.query(ctx, q, kc.args...)
		if err != nil {
			return nil, classify(err)
		}
		for rows.Next() {
			var k objectKey
			var rv string
			if err := rows.Scan(&k.cluster, &k.uid, &rv); err != nil {
				rows.Close()
				return nil, classify(err)
			}
			out[k] = rv
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, classify(err)
		}
	}
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// sortedByKey returns items ordered by (cluster, uid), the one order in
// which concurrent ingesters lock and write keys, so that they cannot
// deadlock on PostgreSQL, with their keys and their distinct clusters in
// name order.
func sortedByKey[T any](items []T, key func(T) objectKey) ([]T, []objectKey, []string) {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b T) int { return compareKeys(key(a), key(b)) })
	keys := make([]objectKey, len(sorted))
	var clusters []string
	for i, it := range sorted {
		keys[i] = key(it)
		if i == 0 || keys[i].cluster != keys[i-1].cluster {
			clusters = append(clusters, keys[i].cluster)
		}
	}
	return sorted, keys, clusters
}

// Upsert writes rows whose resourceVersion is newer than both the
// stored record and any tombstone of the same uid, and skips the others,
// so that a replayed or reordered event never puts an older state over a
// newer one. rows must hold at most one row per (cluster, uid): the caller
// collapses a batch to the newest state of each object first. It returns
// the rows it wrote, ordered by cluster and uid: what the inventory now
// holds, so that whoever acts on an observation acts only on one that was
// stored.
func (inv Inventory) Upsert(ctx context.Context, rows []InventoryRow) ([]InventoryRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	if err := inv.lockFeed(ctx); err != nil {
		return nil, fmt.Errorf("upsert inventory: %w", err)
	}
	rows, keys, clusters := sortedByKey(rows, func(r InventoryRow) objectKey { return objectKey{r.Cluster, r.UID} })
	if err := inv.lockAll(ctx, clusters); err != nil {
		return nil, fmt.Errorf("upsert inventory: %w", err)
	}
	current, err := inv.versions(ctx, "inventory", keys)
	if err != nil {
		return nil, fmt.Errorf("upsert inventory: %w", err)
	}
	tombs, err := inv.versions(ctx, "inventory_tombstones", keys)
	if err != nil {
		return nil, fmt.Errorf("upsert inventory: tombstones: %w", err)
	}
	var fresh []InventoryRow
	for i, r := range rows {
		if rv, ok := current[keys[i]]; ok && !supersedes(r.ResourceVersion, rv) {
			continue
		}
		if rv, ok := tombs[keys[i]]; ok && !supersedes(r.ResourceVersion, rv) {
			continue
		}
		fresh = append(fresh, r)
	}
	stored, err := inv.write(ctx, fresh)
	if err != nil {
		return nil, fmt.Errorf("upsert inventory: %w", err)
	}
	var written []InventoryRow
	for _, r := range fresh {
		if stored[objectKey{r.Cluster, r.UID}] {
			written = append(written, r)
		}
	}
	return written, nil
}

// write inserts or replaces rows, in multi-row statements: one
// round trip per chunk is what makes a batch cheap. It returns the keys it
// wrote; a row is not written when a newer version got there first (see
// newerVersionSQL).
func (inv Inventory) write(ctx context.Context, rows []InventoryRow) (map[objectKey]bool, error) {
	const cols = 14
	stored := make(map[objectKey]bool, len(rows))
	for start := 0; start < len(rows); start += inChunk {
		part := rows[start:min(start+inChunk, len(rows))]
		first, err := inv.nextSeqs(ctx, len(part))
		if err != nil {
			return nil, err
		}
		args := make([]any, 0, len(part)*cols)
		values := make([]string, len(part))
		tuple := "(" + placeholders(cols) + ")"
		for i, r := range part {
			labelDoc, err := labelsJSON(r.Labels)
			if err != nil {
				return nil, fmt.Errorf("labels of %s: %w", r.UID, err)
			}
			values[i] = tuple
			args = append(args, r.Cluster, r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID, r.ResourceVersion,
				labelDoc, r.Health, r.Phase, inv.tx.s.d.ts(r.ObservedAt), nullText(r.Object), first+int64(i), first+int64(i))
		}
		// created_seq is written by the insert only: an update keeps the
		// number of the record's first change.
		res, err := inv.tx.query(ctx, `INSERT INTO inventory (cluster, api_version, kind, namespace, name, uid,
				resource_version, labels, health, phase, observed_at, object, seq, created_seq)
			VALUES `+strings.Join(values, ", ")+`
			ON CONFLICT (cluster, uid) DO UPDATE SET api_version = excluded.api_version, kind = excluded.kind,
				namespace = excluded.namespace, name = excluded.name,
				resource_version = excluded.resource_version, labels = excluded.labels,
				health = excluded.health, phase = excluded.phase, observed_at = excluded.observed_at,
				object = excluded.object, seq = excluded.seq
			WHERE `+inv.newerVersionSQL("excluded.resource_version", "inventory.resource_version")+`
			RETURNING cluster, uid`, args...)
		if err != nil {
			return nil, classify(err)
		}
		for res.Next() {
			var k objectKey
			if err := res.Scan(&k.cluster, &k.uid); err != nil {
				res.Close()
				return nil, classify(err)
			}
			stored[k] = true
		}
		if err := res.Close(); err != nil {
			return nil, classify(err)
		}
		if err := res.Err(); err != nil {
			return nil, classify(err)
		}
	}
	return stored, nil
}

// newerVersionSQL is the condition "incoming supersedes current" in SQL,
// the same rule as supersedes. The versions were compared in Go already;
// this repeats it for the one case Go cannot see: two ingesters inserting
// the same new uid at once, where the loser's insert becomes an update
// after the winner commits. Digit strings without leading zeros (etcd's
// versions) compare as integers by length, then bytewise.
func (inv Inventory) newerVersionSQL(incoming, current string) string {
	nonNumeric := func(col string) string {
		if inv.tx.s.d.engine == EnginePostgres {
			return col + ` !~ '^[0-9]+$'`
		}
		return "(" + col + ` = '' OR ` + col + ` GLOB '*[^0-9]*')`
	}
	collate := ""
	if inv.tx.s.d.engine == EnginePostgres {
		collate = ` COLLATE "C"`
	}
	return "(" + nonNumeric(incoming) + " OR " + nonNumeric(current) +
		" OR length(" + incoming + ") > length(" + current + ")" +
		" OR (length(" + incoming + ") = length(" + current + ") AND " + incoming + collate + " > " + current + collate + "))"
}

// lockAll serializes, until commit, the transactions that change the
// inventory of clusters (given in name order). Each compares versions in
// Go before it writes; on PostgreSQL at READ COMMITTED, two ingesters
// sharing a cluster's events could otherwise both read before either
// commits, and an upsert of an older state would insert a record that a
// concurrent deletion's newer tombstone had already ruled out. SQLite has
// one writer: nothing to do. The locks not yet held are taken in one
// statement, in the order given: one round trip for a batch of a hundred
// clusters rather than a hundred. A transaction that changes several
// clusters must take them all at once, in one order, before it changes any
// (LockClusters); taking one more cluster after others is for a
// transaction of one.
func (inv Inventory) lockAll(ctx context.Context, clusters []string) error {
	if inv.tx.s.d.engine != EnginePostgres {
		return nil
	}
	var todo []string
	for _, c := range clusters {
		if !inv.tx.clustersLocked[c] {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// The sorted subquery hands the rows to the aggregate in the array's
	// order, so the locks are taken in it.
	if _, err := inv.tx.exec(ctx, `SELECT count(pg_advisory_xact_lock(hashtext('purser.inventory'), hashtext(c)))
		FROM (SELECT c FROM unnest(?::text[]) WITH ORDINALITY AS t(c, o) ORDER BY o) AS ordered`, todo); err != nil {
		return fmt.Errorf("lock inventory of %d clusters: %w", len(todo), classify(err))
	}
	if inv.tx.clustersLocked == nil {
		inv.tx.clustersLocked = make(map[string]bool)
	}
	for _, c := range todo {
		inv.tx.clustersLocked[c] = true
	}
	return nil
}

// LockClusters takes the change sequence's lock, then, in name order, the
// inventory lock of every cluster a transaction is about to change
// (records, tombstones and agents' rows alike). Two ingesters sharing
// clusters then wait for each other instead of deadlocking: a batch that
// upserted cluster b and then deleted in a held every lock of b while it
// waited for a, and the batch that did the opposite held a, so both held
// what the other waited for (the chaos soak saw six such deadlocks in 30
// minutes, each rolled back and retried).
func (inv Inventory) LockClusters(ctx context.Context, clusters []string) error {
	// The change sequence's lock comes first, as in every writer of the
	// inventory (lockFeed).
	if len(clusters) > 0 {
		if err := inv.lockFeed(ctx); err != nil {
			return err
		}
	}
	return inv.lockAll(ctx, SortedClusters(clusters))
}

// SortedClusters returns the distinct names of clusters in name order:
// the one order in which transactions take what belongs to several
// clusters (their inventory locks, their agents' rows).
func SortedClusters(clusters []string) []string {
	out := slices.Clone(clusters)
	slices.Sort(out)
	return slices.Compact(out)
}

// Delete removes the records named by tombs unless the stored
// record is newer than the deletion, and keeps each tombstone (the newest
// per uid) so that a late event of an older state cannot resurrect the
// object. It returns how many records were removed.
func (inv Inventory) Delete(ctx context.Context, tombs []InventoryTombstone) (int, error) {
	if len(tombs) == 0 {
		return 0, nil
	}
	if err := inv.lockFeed(ctx); err != nil {
		return 0, fmt.Errorf("delete inventory: %w", err)
	}
	tombs, keys, clusters := sortedByKey(tombs, func(t InventoryTombstone) objectKey { return objectKey{t.Cluster, t.UID} })
	if err := inv.lockAll(ctx, clusters); err != nil {
		return 0, fmt.Errorf("delete inventory: %w", err)
	}
	current, err := inv.versions(ctx, "inventory", keys)
	if err != nil {
		return 0, fmt.Errorf("delete inventory: %w", err)
	}
	var gone []objectKey
	for i, t := range tombs {
		// A uid given twice is removed once.
		if i > 0 && keys[i] == keys[i-1] {
			continue
		}
		if rv, ok := current[keys[i]]; ok && !supersedes(rv, t.ResourceVersion) {
			gone = append(gone, keys[i])
		}
	}
	removed, err := inv.remove(ctx, gone)
	if err != nil {
		return removed, fmt.Errorf("delete inventory: %w", err)
	}
	if err := inv.putTombstones(ctx, tombs); err != nil {
		return removed, fmt.Errorf("delete inventory: %w", err)
	}
	return removed, nil
}

// remove deletes the records of keys (in key order) and records their
// removal in the change feed.
func (inv Inventory) remove(ctx context.Context, keys []objectKey) (int, error) {
	removed := 0
	for _, kc := range inv.keyConds(keys) {
		res, err := inv.tx.query(ctx, `DELETE FROM inventory WHERE `+kc.cond+`
			RETURNING cluster, api_version, kind, namespace, name, uid, resource_version, labels, object`, kc.args...)
		if err != nil {
			return removed, classify(err)
		}
		var gone []InventoryRow
		for res.Next() {
			var r InventoryRow
			var labelDoc string
			var obj *string
			if err := res.Scan(&r.Cluster, &r.APIVersion, &r.Kind, &r.Namespace, &r.Name, &r.UID, &r.ResourceVersion, &labelDoc, &obj); err != nil {
				res.Close()
				return removed, classify(err)
			}
			if obj != nil {
				r.Object = []byte(*obj)
			}
			r.Labels, _ = decodeLabels(labelDoc) // written by labelsJSON; kept as is below
			gone = append(gone, r)
		}
		if err := res.Close(); err != nil {
			return removed, classify(err)
		}
		if err := res.Err(); err != nil {
			return removed, classify(err)
		}
		removed += len(gone)
		if err := inv.recordDeletions(ctx, gone); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// putTombstones stores tombs, keeping the newer version when a uid
// already has one.
func (inv Inventory) putTombstones(ctx context.Context, tombs []InventoryTombstone) error {
	tombs, keys, _ := sortedByKey(tombs, func(t InventoryTombstone) objectKey { return objectKey{t.Cluster, t.UID} })
	existing, err := inv.versions(ctx, "inventory_tombstones", keys)
	if err != nil {
		return fmt.Errorf("tombstones: %w", err)
	}
	keep := make(map[objectKey]InventoryTombstone, len(tombs))
	for i, t := range tombs {
		if rv, ok := existing[keys[i]]; ok && !supersedes(t.ResourceVersion, rv) {
			continue
		}
		if prev, ok := keep[keys[i]]; ok && !supersedes(t.ResourceVersion, prev.ResourceVersion) {
			continue
		}
		keep[keys[i]] = t
	}
	list := slices.Collect(maps.Values(keep))
	slices.SortFunc(list, func(a, b InventoryTombstone) int {
		return compareKeys(objectKey{a.Cluster, a.UID}, objectKey{b.Cluster, b.UID})
	})
	for start := 0; start < len(list); start += inChunk {
		part := list[start:min(start+inChunk, len(list))]
		values := make([]string, len(part))
		args := make([]any, 0, 4*len(part))
		for i, t := range part {
			values[i] = "(?, ?, ?, ?)"
			args = append(args, t.Cluster, t.UID, t.ResourceVersion, inv.tx.s.d.ts(t.DeletedAt))
		}
		if _, err := inv.tx.exec(ctx, `INSERT INTO inventory_tombstones (cluster, uid, resource_version, deleted_at)
			VALUES `+strings.Join(values, ", ")+`
			ON CONFLICT (cluster, uid) DO UPDATE SET resource_version = excluded.resource_version,
				deleted_at = excluded.deleted_at`, args...); err != nil {
			return fmt.Errorf("tombstones: %w", classify(err))
		}
	}
	return nil
}

// PruneTombstones forgets deletions recorded before cutoff and
// returns how many it forgot. Past the stream's redelivery horizon no late
// event can arrive, so tombstones need not grow forever.
func (inv Inventory) PruneTombstones(ctx context.Context, cutoff time.Time) (int, error) {
	if err := inv.pruneDeletions(ctx, cutoff); err != nil {
		return 0, fmt.Errorf("prune inventory tombstones: %w", err)
	}
	res, err := inv.tx.exec(ctx, `DELETE FROM inventory_tombstones WHERE deleted_at < ?`, inv.tx.s.d.ts(cutoff))
	if err != nil {
		return 0, fmt.Errorf("prune inventory tombstones: %w", classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune inventory tombstones: %w", classify(err))
	}
	return int(n), nil
}

// InventorySnapshot is the complete list of one kind in one cluster, as the
// agent's cache held it.
type InventorySnapshot struct {
	Cluster    string
	APIVersion string
	Kind       string
	// ListResourceVersion is the version the list is at least as new as;
	// TakenAt is when it was taken, by the agent's clock.
	ListResourceVersion string
	TakenAt             time.Time
	// Items maps every uid in the list to its resourceVersion.
	Items map[string]string
}

// Reconciliation says what a snapshot found.
type Reconciliation struct {
	// Removed zombies: records absent from the snapshot and not newer
	// than its list.
	Removed int
	// Missing: uids in the snapshot without a record; Stale: records
	// older than the snapshot's version of them. The agent's events are
	// expected to bring both; a count that persists calls for a resync.
	Missing, Stale int
	// Kept: records absent from the snapshot but newer than its list,
	// i.e. created after it was taken; they must not be removed.
	Kept int
}

// Reconcile removes the zombie records of one cluster and kind: a
// record whose uid is absent from snap and that was last observed at a
// resourceVersion not newer than snap's list (or, when versions do not
// compare, observed before the snapshot was taken). A record newer than the
// list belongs to an object created after the list was taken and stays.
// Each removal leaves a tombstone at the list's version, since an object
// absent from that list was deleted before it.
func (inv Inventory) Reconcile(ctx context.Context, snap InventorySnapshot) (Reconciliation, error) {
	var rec Reconciliation
	what := fmt.Sprintf("reconcile inventory of %s %s %s", snap.Cluster, snap.APIVersion, snap.Kind)
	if err := inv.lockFeed(ctx); err != nil {
		return rec, fmt.Errorf("%s: %w", what, err)
	}
	if err := inv.lockAll(ctx, []string{snap.Cluster}); err != nil {
		return rec, fmt.Errorf("%s: %w", what, err)
	}
	rows, err := inv.tx.query(ctx, `SELECT uid, resource_version, observed_at FROM inventory
		WHERE cluster = ? AND kind = ? AND api_version = ?`, snap.Cluster, snap.Kind, snap.APIVersion)
	if err != nil {
		return rec, fmt.Errorf("%s: %w", what, classify(err))
	}
	var zombies []string
	seen := 0
	for rows.Next() {
		var (
			uid, rv  string
			observed time.Time
		)
		if err := rows.Scan(&uid, &rv, timeCol{&observed}); err != nil {
			rows.Close()
			return rec, fmt.Errorf("%s: %w", what, classify(err))
		}
		if snapRV, ok := snap.Items[uid]; ok {
			seen++
			if c, ok := resourceversion.Compare(rv, snapRV); ok && c < 0 {
				rec.Stale++
			}
			continue
		}
		c, ok := resourceversion.Compare(rv, snap.ListResourceVersion)
		if (ok && c <= 0) || (!ok && !observed.After(snap.TakenAt)) {
			zombies = append(zombies, uid)
		} else {
			rec.Kept++
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return rec, fmt.Errorf("%s: %w", what, classify(err))
	}
	rec.Missing = len(snap.Items) - seen
	slices.Sort(zombies)
	keys := make([]objectKey, len(zombies))
	for i, uid := range zombies {
		keys[i] = objectKey{snap.Cluster, uid}
	}
	if rec.Removed, err = inv.remove(ctx, keys); err != nil {
		return rec, fmt.Errorf("%s: %w", what, err)
	}
	// Tombstones age by this clock, the one that prunes them, not by the
	// agent's.
	now := inv.tx.s.now()
	tombs := make([]InventoryTombstone, len(zombies))
	for i, uid := range zombies {
		tombs[i] = InventoryTombstone{Cluster: snap.Cluster, UID: uid, ResourceVersion: snap.ListResourceVersion, DeletedAt: now}
	}
	if err := inv.putTombstones(ctx, tombs); err != nil {
		return rec, fmt.Errorf("%s: %w", what, err)
	}
	return rec, nil
}

// InventoryFilter selects records; empty fields match everything.
type InventoryFilter struct {
	Cluster, APIVersion, Kind, Namespace, Name, Health string
	// Selector filters by labels, in SQL; nil selects everything.
	Selector labels.Selector
	// WithoutObject leaves Object nil, for listings that need only
	// metadata and should not pay for reading documents.
	WithoutObject bool
	// System includes the system objects (inventory_system.go), which
	// are left out otherwise.
	System   bool
	Limit    int
	Continue string
}

// List returns one page of records ordered by (kind, namespace,
// name, cluster, uid), and the token of the next page or "".
func (inv Inventory) List(ctx context.Context, f InventoryFilter) ([]InventoryRow, string, error) {
	q, args, limit, err := inv.tx.s.d.listInventoryQuery(f)
	if err != nil {
		return nil, "", err
	}
	if inv.tx.s.d.engine == EnginePostgres && f.Selector != nil {
		// Planned with the selector's values each time: whether a label
		// is rare (use the GIN index) or common (scan in order) is in
		// the values, which a cached generic plan would not see.
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, err := inv.tx.query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list inventory: %w", classify(err))
	}
	defer rows.Close()
	var items []InventoryRow
	for rows.Next() {
		var (
			r        InventoryRow
			labelDoc string
			obj      *string
		)
		if err := rows.Scan(&r.Cluster, &r.APIVersion, &r.Kind, &r.Namespace, &r.Name, &r.UID, &r.ResourceVersion,
			&labelDoc, &r.Health, &r.Phase, timeCol{&r.ObservedAt}, &obj, &r.Seq); err != nil {
			return nil, "", fmt.Errorf("list inventory: %w", classify(err))
		}
		if r.Labels, err = decodeLabels(labelDoc); err != nil {
			return nil, "", fmt.Errorf("list inventory: labels of %s/%s: %w", r.Cluster, r.UID, err)
		}
		if obj != nil {
			r.Object = []byte(*obj)
		}
		items = append(items, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list inventory: %w", classify(err))
	}
	var next string
	if len(items) > limit {
		items = items[:limit]
		l := items[limit-1]
		b, _ := json.Marshal([5]string{l.Kind, l.Namespace, l.Name, l.Cluster, l.UID})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return items, next, nil
}

// listInventoryQuery is the query of one page of Inventory.List; it asks
// for limit+1 rows, the last telling that there is a next page. Its order
// is that of the index inventory_list_order, (kind, namespace, name,
// cluster, uid, ...), so that a page is a range scan of the index from the
// continue token that stops after limit+1 matches, on both engines; a
// label selector is indexed as dialect.labelConditions says.
func (d dialect) listInventoryQuery(f InventoryFilter) (q string, args []any, limit int, err error) {
	var conds []string
	for _, c := range []struct{ col, val string }{
		{"cluster", f.Cluster}, {"api_version", f.APIVersion}, {"kind", f.Kind},
		{"namespace", f.Namespace}, {"name", f.Name}, {"health", f.Health},
	} {
		if c.val != "" {
			conds, args = append(conds, c.col+" = ?"), append(args, c.val)
		}
	}
	if !f.System {
		c, a := notSystemSQL()
		conds, args = append(conds, c), append(args, a...)
	}
	if f.Selector != nil {
		sc, sa, err := d.labelConditions(f.Selector)
		if err != nil {
			return "", nil, 0, err
		}
		conds, args = append(conds, sc...), append(args, sa...)
	}
	if f.Continue != "" {
		key, err := decodeInventoryContinue(f.Continue)
		if err != nil {
			return "", nil, 0, err
		}
		// The columns of the sort key that the filters fix are left out
		// of the comparison: the records they select all share them, so
		// the order of the rest is the listing's order. Both engines then
		// seek to the token with equality on those and a range on the
		// rest, in whichever index leads with them (inventory_list_order
		// for a kind, inventory_namespace_order for a namespace alone),
		// where a comparison of the whole key makes SQLite scan the fixed
		// prefix from its start on every page, and a namespace without a
		// kind could not seek at all.
		sortKey := []string{"kind", "namespace", "name", "cluster", "uid"}
		var cols []string
		for i, v := range []string{f.Kind, f.Namespace, f.Name, f.Cluster, ""} {
			switch {
			case v == "":
				cols = append(cols, sortKey[i])
				args = append(args, key[i])
			case key[i] != v:
				return "", nil, 0, fmt.Errorf("%w: the token is of another listing", ErrBadContinue)
			}
		}
		conds = append(conds, "("+strings.Join(cols, ", ")+") > ("+placeholders(len(cols))+")")
	}
	object := "object"
	if f.WithoutObject {
		object = "NULL"
	}
	q = `SELECT cluster, api_version, kind, namespace, name, uid, resource_version, labels, health, phase,
		observed_at, ` + object + `, seq FROM inventory`
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	limit = pageLimit(f.Limit)
	q += " ORDER BY kind, namespace, name, cluster, uid LIMIT ?"
	return q, append(args, limit+1), limit, nil
}

// decodeLabels reads a labels column as labelsJSON wrote it: a flat
// object of strings, keys sorted, no spaces; nil when empty. Without a
// backslash in it, no string has an escape, and it splits on the quotes,
// several times faster than encoding/json (a listing decodes a page of
// them); anything else goes to encoding/json.
func decodeLabels(s string) (map[string]string, error) {
	if s == "{}" {
		return nil, nil
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' || strings.IndexByte(s, '\\') >= 0 {
		return unmarshalLabels(s)
	}
	out := make(map[string]string, strings.Count(s, ",")+1)
	rest := s[1 : len(s)-1]
	for {
		// "key":"value"
		if rest == "" || rest[0] != '"' {
			return unmarshalLabels(s)
		}
		k := strings.IndexByte(rest[1:], '"') + 1
		if k == 0 || !strings.HasPrefix(rest[k:], `":"`) {
			return unmarshalLabels(s)
		}
		key := rest[1:k]
		rest = rest[k+3:]
		v := strings.IndexByte(rest, '"')
		if v < 0 {
			return unmarshalLabels(s)
		}
		out[key] = rest[:v]
		rest = rest[v+1:]
		if rest == "" {
			return out, nil
		}
		if rest[0] != ',' {
			return unmarshalLabels(s)
		}
		rest = rest[1:]
	}
}

func unmarshalLabels(s string) (map[string]string, error) {
	var out map[string]string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func decodeInventoryContinue(token string) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadContinue, err)
	}
	var key []string
	if err := json.Unmarshal(raw, &key); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadContinue, err)
	}
	if len(key) != 5 {
		return nil, fmt.Errorf("%w: want 5 key parts, got %d", ErrBadContinue, len(key))
	}
	return key, nil
}

// CountByCluster returns how many records each cluster has.
func (inv Inventory) CountByCluster(ctx context.Context) (map[string]int64, error) {
	rows, err := inv.tx.query(ctx, `SELECT cluster, COUNT(*) FROM inventory GROUP BY cluster`)
	if err != nil {
		return nil, fmt.Errorf("count inventory: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var c string
		var n int64
		if err := rows.Scan(&c, &n); err != nil {
			return nil, fmt.Errorf("count inventory: %w", classify(err))
		}
		out[c] = n
	}
	return out, classify(rows.Err())
}
