package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Cluster is a registered member cluster. The kubeconfig is kept apart from
// Spec, sealed, so that Spec can be returned to clients as is.
type Cluster struct {
	Name            string
	Labels          map[string]string // nil when there are none
	Spec            []byte            // JSON without kubeconfig
	Kubeconfig      []byte            // sealed
	Status          []byte            // JSON or nil
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ResourceVersion int64
}

// Clusters is the registered clusters, with their status, the views each
// DC records of them and their capacity, as one transaction reads and
// writes them.
type Clusters struct{ tx *Tx }

// Clusters returns the clusters as tx sees them.
func (tx *Tx) Clusters() Clusters { return Clusters{tx} }

const clusterColumns = `name, labels, spec, kubeconfig, status, created_at, updated_at, resource_version`

func scanCluster(row interface{ Scan(...any) error }) (*Cluster, error) {
	c := &Cluster{}
	var labels []byte
	if err := row.Scan(&c.Name, &labels, &c.Spec, &c.Kubeconfig, &c.Status, timeCol{&c.CreatedAt},
		timeCol{&c.UpdatedAt}, &c.ResourceVersion); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(labels, &c.Labels); err != nil {
		return nil, fmt.Errorf("cluster %s: stored labels: %w", c.Name, err)
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c, nil
}

// labelsJSON encodes labels for storage; encoding/json sorts the keys, so
// equal label sets are stored identically.
func labelsJSON(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	return string(b), err
}

// Create registers c and fills its times and ResourceVersion. It
// returns ErrConflict when the name is taken.
func (cs Clusters) Create(ctx context.Context, c *Cluster) error {
	labels, err := labelsJSON(c.Labels)
	if err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, err)
	}
	now := cs.tx.s.now()
	res, err := cs.tx.exec(ctx, `INSERT INTO clusters (name, labels, spec, kubeconfig, status, created_at,
			updated_at, resource_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT DO NOTHING`,
		c.Name, labels, string(c.Spec), nullBlob(c.Kubeconfig), nullText(c.Status), cs.tx.s.d.ts(now), cs.tx.s.d.ts(now))
	if err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create cluster %s: %w", c.Name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("create cluster %s: name already exists: %w", c.Name, ErrConflict)
	}
	c.CreatedAt, c.UpdatedAt, c.ResourceVersion = now, now, 1
	return nil
}

// Get returns the cluster called name, or ErrNotFound.
func (cs Clusters) Get(ctx context.Context, name string) (*Cluster, error) {
	c, err := scanCluster(cs.tx.queryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get cluster %s: %w", name, classify(err))
	}
	return c, nil
}

// Update writes Labels, Spec and Kubeconfig of the cluster called
// c.Name under the optimistic rule: ErrConflict when c.ResourceVersion is
// stale, ErrNotFound when there is no such cluster. The status is the
// controller's and is written only by Clusters.UpdateStatus, so that an
// admin's update never puts back a status it read before a change.
func (cs Clusters) Update(ctx context.Context, c *Cluster) error {
	labels, err := labelsJSON(c.Labels)
	if err != nil {
		return fmt.Errorf("update cluster %s: %w", c.Name, err)
	}
	now := cs.tx.s.now()
	res, err := cs.tx.exec(ctx, `UPDATE clusters SET labels = ?, spec = ?, kubeconfig = ?,
			updated_at = ?, resource_version = resource_version + 1
		WHERE name = ? AND resource_version = ?`,
		labels, string(c.Spec), nullBlob(c.Kubeconfig), cs.tx.s.d.ts(now), c.Name, c.ResourceVersion)
	if err := cs.tx.checkUpdated(ctx, res, err, "clusters", "name", c.Name, c.ResourceVersion); err != nil {
		return fmt.Errorf("update cluster %s: %w", c.Name, err)
	}
	c.ResourceVersion++
	c.UpdatedAt = now
	return nil
}

// Delete removes the cluster and, by cascade, the deployables' sync
// status on it. It returns ErrNotFound when there is no such cluster.
func (cs Clusters) Delete(ctx context.Context, name string) error {
	res, err := cs.tx.exec(ctx, `DELETE FROM clusters WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete cluster %s: %w", name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete cluster %s: %w", name, classify(err))
	} else if n == 0 {
		return fmt.Errorf("delete cluster %s: %w", name, ErrNotFound)
	}
	return nil
}

// List returns every registered cluster ordered by name. The set is
// small (the design sizes for 100), so it is not paginated.
func (cs Clusters) List(ctx context.Context) ([]*Cluster, error) {
	rows, err := cs.tx.query(ctx, `SELECT `+clusterColumns+` FROM clusters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", classify(err))
	}
	defer rows.Close()
	var out []*Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, fmt.Errorf("list clusters: %w", classify(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", classify(err))
	}
	return out, nil
}

// UpdateStatus replaces the status of the cluster called name and
// nothing else; ErrNotFound when there is no such cluster. It is the
// controller's write: the status is its own, so there is no optimistic
// check against what an admin did meanwhile.
//
// It leaves resource_version and updated_at alone. They version what
// admins write (labels, spec, kubeconfig), and components key on them:
// the standalone runner restarts a cluster's agent and the syncer
// re-decides placements when the version moves, which a health change must
// not cause. The price: Clusters.Update writes back the status it read, so
// on PostgreSQL an admin's update that read the row just before this write
// commits may put the previous status back. The controller compares the
// stored status with its own on every pass and writes it again, so such a
// lapse lasts one probe interval. (On SQLite writers are serialized and it
// cannot happen.)
func (cs Clusters) UpdateStatus(ctx context.Context, name string, status []byte) error {
	res, err := cs.tx.exec(ctx, `UPDATE clusters SET status = ? WHERE name = ?`, nullText(status), name)
	if err != nil {
		return fmt.Errorf("update status of cluster %s: %w", name, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update status of cluster %s: %w", name, classify(err))
	}
	if n == 0 {
		return fmt.Errorf("update status of cluster %s: %w", name, ErrNotFound)
	}
	return nil
}

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

// RecordViews writes observer's views, stamped with the
// database's clock, and drops views nobody wrote for an hour. Stamping by
// one clock, the database's, lets the leader compare views from every DC
// whatever their controllers' clocks say.
func (cs Clusters) RecordViews(ctx context.Context, observer string, views []ViewRecord) error {
	now := cs.tx.s.d.dbNow()
	for _, v := range views {
		since, sinceArg := "NULL", []any{}
		if v.Failing {
			since, sinceArg = cs.tx.s.d.dbNowPlus(), []any{intervalArg(-v.FailingFor)}
		}
		args := append([]any{v.Cluster, observer, v.Outcome, v.Detail}, sinceArg...)
		if _, err := cs.tx.exec(ctx, `INSERT INTO cluster_views (cluster, observer, outcome, detail, observed_at, failing_since)
			VALUES (?, ?, ?, ?, `+now+`, `+since+`)
			ON CONFLICT (cluster, observer) DO UPDATE SET outcome = excluded.outcome, detail = excluded.detail,
				observed_at = excluded.observed_at, failing_since = excluded.failing_since`, args...); err != nil {
			return fmt.Errorf("record view of %s from %q: %w", v.Cluster, observer, classify(err))
		}
	}
	if _, err := cs.tx.exec(ctx, `DELETE FROM cluster_views WHERE observed_at < `+cs.tx.s.d.dbNowPlus(), intervalArg(-viewRetention)); err != nil {
		return fmt.Errorf("drop old cluster views: %w", classify(err))
	}
	return nil
}

// ListViews returns every recorded view and the database's clock
// at the time of the read, against which their ages are measured.
func (cs Clusters) ListViews(ctx context.Context) ([]ClusterView, time.Time, error) {
	var now time.Time
	if err := cs.tx.queryRow(ctx, `SELECT `+cs.tx.s.d.dbNow()).Scan(timeCol{&now}); err != nil {
		return nil, time.Time{}, fmt.Errorf("database clock: %w", classify(err))
	}
	rows, err := cs.tx.query(ctx, `SELECT cluster, observer, outcome, detail, observed_at, failing_since FROM cluster_views
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

// Capacity is what the schedulable nodes of one member cluster can
// allocate, summed over the cluster's Node records in the inventory.
type Capacity struct {
	// MilliCPU is allocatable CPU in millicores, Memory allocatable memory
	// in bytes, Pods the number of pods the nodes admit.
	MilliCPU, Memory, Pods int64
	// Nodes counts the schedulable nodes summed; Unschedulable those left
	// out because they are cordoned (spec.unschedulable).
	Nodes, Unschedulable int
}

// Capacity sums, per cluster, the allocatable resources of the
// nodes in the inventory (core v1 Node records) that are not cordoned. A
// cluster with no Node record is absent from the map: its capacity is not
// known, which is not the same as zero (every node cordoned).
//
// It reads one small index, never the Node documents: the column
// node_allocatable holds the few values needed, extracted when a record is
// written (migration 00005). Records are grouped by those values, since
// the nodes of one pool report the same quantities.
func (cs Clusters) Capacity(ctx context.Context) (map[string]Capacity, error) {
	rows, err := cs.tx.query(ctx, `SELECT cluster, node_allocatable, count(*) FROM inventory
		WHERE kind = 'Node' AND api_version = 'v1' GROUP BY cluster, node_allocatable`)
	if err != nil {
		return nil, fmt.Errorf("cluster capacity: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]Capacity{}
	// Clusters built from the same machine types share values: each
	// distinct one is decoded and parsed once.
	parsed := map[string]nodeAllocatable{}
	for rows.Next() {
		var (
			cluster string
			values  sql.NullString
			nodes   int
		)
		if err := rows.Scan(&cluster, &values, &nodes); err != nil {
			return nil, fmt.Errorf("cluster capacity: %w", classify(err))
		}
		a, ok := parsed[values.String]
		if !ok {
			a = parseNodeAllocatable(values.String)
			parsed[values.String] = a
		}
		c := out[cluster]
		if a.unschedulable {
			c.Unschedulable += nodes
		} else {
			n := int64(nodes)
			c.Nodes += nodes
			c.MilliCPU += n * a.milliCPU
			c.Memory += n * a.memory
			c.Pods += n * a.pods
		}
		out[cluster] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster capacity: %w", classify(err))
	}
	return out, nil
}

// nodeAllocatable is one node's share of a Capacity.
type nodeAllocatable struct {
	milliCPU, memory, pods int64
	unschedulable          bool
}

// parseNodeAllocatable reads a node_allocatable value. The database
// writes it from the column's definition; a value that is missing (a
// record without its object, which was too large to publish) or does not
// decode counts as a node with nothing, and so does a malformed quantity:
// the kube-apiserver validates them, and one odd node must not stop
// placement.
func parseNodeAllocatable(s string) nodeAllocatable {
	var v struct{ CPU, Memory, Pods, Unschedulable string }
	if s != "" {
		_ = json.Unmarshal([]byte(s), &v)
	}
	return nodeAllocatable{
		milliCPU:      quantity(v.CPU, (*resource.Quantity).MilliValue),
		memory:        quantity(v.Memory, (*resource.Quantity).Value),
		pods:          quantity(v.Pods, (*resource.Quantity).Value),
		unschedulable: v.Unschedulable == "true",
	}
}

func quantity(s string, unit func(*resource.Quantity) int64) int64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return unit(&q)
}

// LockForPlacement holds cluster's row until the end of the transaction on
// PostgreSQL, so that two submitter replicas placing on the same cluster
// check its room one after the other, each seeing the other's placement
// once committed (SQLite has a single writer anyway). ErrNotFound when the
// cluster was removed.
func (cs Clusters) LockForPlacement(ctx context.Context, name string) error {
	q := `SELECT name FROM clusters WHERE name = ?`
	if cs.tx.s.d.engine == EnginePostgres {
		q += " FOR UPDATE"
	}
	var got string
	err := cs.tx.queryRow(ctx, q, name).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("lock cluster %s: %w", name, classify(err))
	}
	return nil
}
