package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	var cur AgentFreshness
	err := ag.tx.queryRow(ctx, `SELECT last_heartbeat, last_snapshot, last_event FROM cluster_agents WHERE cluster = ?`, cluster).
		Scan(nullTimeCol{&cur.LastHeartbeat}, nullTimeCol{&cur.LastSnapshot}, nullTimeCol{&cur.LastEvent})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("agent freshness of %s: %w", cluster, classify(err))
	}
	later := func(old, t *time.Time) *time.Time {
		if t == nil || (old != nil && !t.After(*old)) {
			return old
		}
		return t
	}
	hb, sn, ev := later(cur.LastHeartbeat, heartbeat), later(cur.LastSnapshot, snapshot), later(cur.LastEvent, event)
	if hb == cur.LastHeartbeat && sn == cur.LastSnapshot && ev == cur.LastEvent {
		return nil
	}
	_, err = ag.tx.exec(ctx, `INSERT INTO cluster_agents (cluster, last_heartbeat, last_snapshot, last_event) VALUES (?, ?, ?, ?)
		ON CONFLICT (cluster) DO UPDATE SET last_heartbeat = excluded.last_heartbeat,
			last_snapshot = excluded.last_snapshot, last_event = excluded.last_event`,
		cluster, ag.tx.s.d.nullTS(hb), ag.tx.s.d.nullTS(sn), ag.tx.s.d.nullTS(ev))
	if err != nil {
		return fmt.Errorf("touch agent of %s: %w", cluster, classify(err))
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
