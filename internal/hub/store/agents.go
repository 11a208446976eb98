package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// AgentFreshness is when purser last heard from a cluster's agent; nil
// times mean never.
type AgentFreshness struct {
	Cluster                                string
	LastHeartbeat, LastSnapshot, LastEvent *time.Time
	// KubeAPI is the JSON of what the agent said of its kube-apiserver in
	// its latest heartbeat (v1alpha1.AgentKubeAPI); nil when it said
	// nothing. CurrentUntil is the time of the latest heartbeat in which
	// its caches were synced and connected.
	KubeAPI      []byte
	CurrentUntil *time.Time
}

// Agents is what purser heard from each cluster's agent, as one
// transaction reads and writes it.
type Agents struct{ tx *Tx }

// Agents returns the agents as tx sees them.
func (tx *Tx) Agents() Agents { return Agents{tx} }

// Touch records that a cluster's agent was heard from; each given
// time only ever moves forward, so a late batch cannot make a cluster look
// staler than it is. Nil times are left as they are.
func (ag Agents) Touch(ctx context.Context, cluster string, heartbeat, snapshot, event *time.Time) error {
	return ag.TouchAll(ctx, []AgentFreshness{{Cluster: cluster, LastHeartbeat: heartbeat, LastSnapshot: snapshot, LastEvent: event}})
}

// TouchAll is Touch for several clusters at once (the heartbeat, snapshot
// and event times of each; KubeAPI and CurrentUntil are ignored): one
// read of their current times and one write of those that move, rather
// than two round trips per cluster, which a batch of events from a hundred
// clusters made two hundred. Rows are written in the clusters' name order,
// the order in which every transaction takes what belongs to several
// clusters.
func (ag Agents) TouchAll(ctx context.Context, touches []AgentFreshness) error {
	byCluster := make(map[string]AgentFreshness, len(touches))
	for _, t := range touches {
		prev := byCluster[t.Cluster]
		byCluster[t.Cluster] = AgentFreshness{Cluster: t.Cluster, LastHeartbeat: laterTime(prev.LastHeartbeat, t.LastHeartbeat),
			LastSnapshot: laterTime(prev.LastSnapshot, t.LastSnapshot), LastEvent: laterTime(prev.LastEvent, t.LastEvent)}
	}
	clusters := slices.Sorted(maps.Keys(byCluster))
	for start := 0; start < len(clusters); start += inChunk {
		part := clusters[start:min(start+inChunk, len(clusters))]
		if err := ag.touchChunk(ctx, part, byCluster); err != nil {
			return err
		}
	}
	return nil
}

// laterTime is t when it is after old, old otherwise; a nil t never
// moves old.
func laterTime(old, t *time.Time) *time.Time {
	if t == nil || (old != nil && !t.After(*old)) {
		return old
	}
	return t
}

func (ag Agents) touchChunk(ctx context.Context, clusters []string, touches map[string]AgentFreshness) error {
	args := make([]any, len(clusters))
	for i, c := range clusters {
		args[i] = c
	}
	rows, err := ag.tx.query(ctx, `SELECT cluster, last_heartbeat, last_snapshot, last_event FROM cluster_agents
		WHERE cluster IN (`+placeholders(len(clusters))+`)`, args...)
	if err != nil {
		return fmt.Errorf("agent freshness: %w", classify(err))
	}
	current := make(map[string]AgentFreshness, len(clusters))
	for rows.Next() {
		var cur AgentFreshness
		if err := rows.Scan(&cur.Cluster, nullTimeCol{&cur.LastHeartbeat}, nullTimeCol{&cur.LastSnapshot}, nullTimeCol{&cur.LastEvent}); err != nil {
			rows.Close()
			return fmt.Errorf("agent freshness: %w", classify(err))
		}
		current[cur.Cluster] = cur
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("agent freshness: %w", classify(err))
	}
	var values []string
	args = args[:0]
	for _, c := range clusters {
		cur, t := current[c], touches[c]
		hb, sn, ev := laterTime(cur.LastHeartbeat, t.LastHeartbeat), laterTime(cur.LastSnapshot, t.LastSnapshot), laterTime(cur.LastEvent, t.LastEvent)
		if hb == cur.LastHeartbeat && sn == cur.LastSnapshot && ev == cur.LastEvent {
			continue
		}
		values = append(values, "(?, ?, ?, ?)")
		args = append(args, c, ag.tx.s.d.nullTS(hb), ag.tx.s.d.nullTS(sn), ag.tx.s.d.nullTS(ev))
	}
	if len(values) == 0 {
		return nil
	}
	_, err = ag.tx.exec(ctx, `INSERT INTO cluster_agents (cluster, last_heartbeat, last_snapshot, last_event) VALUES `+
		strings.Join(values, ", ")+`
		ON CONFLICT (cluster) DO UPDATE SET last_heartbeat = excluded.last_heartbeat,
			last_snapshot = excluded.last_snapshot, last_event = excluded.last_event`, args...)
	if err != nil {
		return fmt.Errorf("touch agents of %d clusters: %w", len(values), classify(err))
	}
	return nil
}

// RecordHeartbeat stores one heartbeat of a cluster's agent, at the time
// the stream stored it: the time, and the agent's report of its
// kube-apiserver (kubeAPI, JSON or nil), only when it is the newest beat
// seen, so that a beat redelivered late cannot put back an older report;
// current says the report found the caches synced and connected, which
// moves CurrentUntil to at.
func (ag Agents) RecordHeartbeat(ctx context.Context, cluster string, at time.Time, kubeAPI []byte, current bool) error {
	var last *time.Time
	err := ag.tx.queryRow(ctx, `SELECT last_heartbeat FROM cluster_agents WHERE cluster = ?`, cluster).Scan(nullTimeCol{&last})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("agent freshness of %s: %w", cluster, classify(err))
	}
	if last != nil && !at.After(*last) {
		return nil
	}
	var currentUntil any
	if current {
		currentUntil = ag.tx.s.d.ts(at)
	}
	// COALESCE keeps the last current time through beats that are not.
	_, err = ag.tx.exec(ctx, `INSERT INTO cluster_agents (cluster, last_heartbeat, kube_api, current_until) VALUES (?, ?, ?, ?)
		ON CONFLICT (cluster) DO UPDATE SET last_heartbeat = excluded.last_heartbeat, kube_api = excluded.kube_api,
			current_until = COALESCE(excluded.current_until, cluster_agents.current_until)`,
		cluster, ag.tx.s.d.ts(at), nullText(kubeAPI), currentUntil)
	if err != nil {
		return fmt.Errorf("record heartbeat of %s: %w", cluster, classify(err))
	}
	return nil
}

// ListFreshness returns the freshness of every agent heard from, by
// cluster name.
func (ag Agents) ListFreshness(ctx context.Context) (map[string]AgentFreshness, error) {
	rows, err := ag.tx.query(ctx, `SELECT cluster, last_heartbeat, last_snapshot, last_event, kube_api, current_until FROM cluster_agents`)
	if err != nil {
		return nil, fmt.Errorf("list agent freshness: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]AgentFreshness{}
	for rows.Next() {
		var f AgentFreshness
		if err := rows.Scan(&f.Cluster, nullTimeCol{&f.LastHeartbeat}, nullTimeCol{&f.LastSnapshot}, nullTimeCol{&f.LastEvent},
			&f.KubeAPI, nullTimeCol{&f.CurrentUntil}); err != nil {
			return nil, fmt.Errorf("list agent freshness: %w", classify(err))
		}
		out[f.Cluster] = f
	}
	return out, classify(rows.Err())
}
