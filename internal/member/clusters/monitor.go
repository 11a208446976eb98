package clusters

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Actor is the name the health monitor writes in the audit log.
const Actor = "controller"

// Audit actions of the health monitor.
const (
	// ActionCondition: the Ready condition changed (with its taints, if
	// they changed too).
	ActionCondition = "cluster-condition"
	// ActionTaint: only the purser taints changed (NoExecute after the
	// grace period).
	ActionTaint = "cluster-taint"
	// ActionDisruption: only the Disrupted condition changed: evictions
	// from the cluster's zone were slowed, stopped or let run again.
	ActionDisruption = "cluster-disruption"
)

// Defaults of Config.
const (
	DefaultProbeInterval  = 2 * time.Second
	DefaultProbeWorkers   = 16
	DefaultObserverExpiry = 2 * time.Minute
)

// Store is the database as cluster health uses it: its transactions.
type Store = store.Transactor

// Config says what cluster health works with: the HealthMonitor, and the
// Observer, which reads only the fields it needs (Store, Sealer, DC,
// Interval, ProbeTimeout, Workers, Logger).
type Config struct {
	Store  Store
	Sealer *seal.Sealer // opens the clusters' kubeconfigs
	// Policy holds the thresholds, the NoExecute grace and the agent
	// lease; its zero value means the defaults.
	Policy Policy
	// Interval is the period of the probes; default 2s.
	Interval time.Duration
	// ProbeTimeout bounds each probe request; default 2s.
	ProbeTimeout time.Duration
	// Workers bounds how many clusters are probed at once; default 16.
	Workers int
	// DC names this replica's data center, under which the monitor
	// records its own views when it has no Observer.
	DC string
	// Observer is the process's own running observer, after each of
	// whose passes the monitor judges; nil: the monitor runs one itself,
	// just before each judgement.
	Observer *Observer
	// ViewMaxAge is how old a DC's view may be and still count; default
	// three intervals plus the probe timeout.
	ViewMaxAge time.Duration
	// ObserverExpiry is how long a DC that records no view still counts
	// among the observers, whose majority is the quorum; default 2m.
	ObserverExpiry time.Duration
	// Disruption says when a zone or the farm is disrupted.
	Disruption DisruptionPolicy
	// OnNoExecute, when set, is called after a pass that added a
	// NoExecute taint, so that the failover controller acts at once.
	OnNoExecute func()
	Logger      *slog.Logger
	// Now is the clock of the observations; default time.Now.
	Now func() time.Time
	// Observed, if set, is told every observation and the state it led
	// to, from the monitor's goroutine, before the state is written: how
	// a test follows the probes instead of guessing them from the clock.
	Observed func(cluster string, o Observation, s State)
}

// HealthMonitor is cluster health for `purser controller`: it judges each
// registered cluster by the views every DC's controller records (a
// quorum of DCs, JudgeViews) and by when its agent last reported, runs
// Policy.Step, judges the disruption of each zone and of the farm, and
// writes the cluster's Ready and Disrupted conditions and purser taints,
// with an audit entry, when they differ from the stored ones. Only one
// should run at a time (the controller is leader-elected); every replica
// runs an Observer.
//
// Its per-cluster state lives in memory and is seeded from the stored
// status the first time it sees a cluster (see Seed), so a restart neither
// resets a NotReady cluster to Unknown nor restarts its NoExecute grace.
type HealthMonitor struct {
	cfg Config
	log *slog.Logger
	obs *Observer

	// Owned by Run's goroutine.
	states map[string]State
}

// NewHealthMonitor returns a monitor; nothing runs until Run.
func NewHealthMonitor(cfg Config) *HealthMonitor {
	cfg.Policy = cfg.Policy.withDefaults()
	cfg.Interval = cmp.Or(cfg.Interval, DefaultProbeInterval)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, probe.DefaultTimeout)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultProbeWorkers)
	cfg.ViewMaxAge = cmp.Or(cfg.ViewMaxAge, 3*cfg.Interval+cfg.ProbeTimeout)
	cfg.ObserverExpiry = cmp.Or(cfg.ObserverExpiry, DefaultObserverExpiry)
	cfg.Disruption = cfg.Disruption.withDefaults()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &HealthMonitor{cfg: cfg, log: log, obs: cfg.Observer, states: map[string]State{}}
	if m.obs == nil {
		m.obs = NewObserver(Config{Store: cfg.Store, Sealer: cfg.Sealer, DC: cfg.DC, Interval: cfg.Interval,
			ProbeTimeout: cfg.ProbeTimeout, Workers: cfg.Workers, Logger: log})
	}
	return m
}

// Run judges until ctx is done, then returns nil; it fails only when the
// configuration is unusable. A pass that fails (the database is away) is
// logged and the next one tries again. Besides the passes that follow the
// probes, one runs when a cluster's NoExecute grace ends, so that the
// taint is not a probe interval late.
func (m *HealthMonitor) Run(ctx context.Context) error {
	if m.cfg.Store == nil || m.cfg.Sealer == nil {
		return errors.New("cluster health: Config needs Store and Sealer")
	}
	own := m.cfg.Observer == nil
	m.log.Info("cluster health monitor starting", "interval", m.cfg.Interval,
		"failureThreshold", m.cfg.Policy.FailureThreshold, "successThreshold", m.cfg.Policy.SuccessThreshold,
		"noExecuteGrace", m.cfg.Policy.NoExecuteGrace, "agentLease", m.cfg.Policy.AgentLease,
		"viewMaxAge", m.cfg.ViewMaxAge, "zoneLabel", m.cfg.Disruption.ZoneLabel)
	// Two keys on one worker, so that the passes never overlap and the
	// states stay the worker's: a judgement after the probes, and a pass
	// that only lets time act on the taints when a NoExecute grace ends,
	// so that the taint is not a probe interval late.
	var q *reconcile.Queue[monitorPass]
	q = reconcile.New(func(ctx context.Context, k monitorPass) (reconcile.Result, error) {
		var res reconcile.Result
		if k == afterProbes && own {
			start := time.Now()
			if err := m.obs.Pass(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("cluster probes failed", "error", err)
			}
			res = probeAgain(start, m.cfg.Interval)
		}
		next, err := m.pass(ctx, k == afterProbes)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("cluster health pass failed", "error", err)
		}
		if !next.IsZero() {
			q.AddAfter(graceEnded, max(time.Until(next), 0))
		}
		return res, nil
	}, reconcile.Config[monitorPass]{Name: "cluster-health"})
	q.Add(afterProbes)
	var wg sync.WaitGroup
	defer wg.Wait()
	if !own {
		// Woken by the passes of the process's observer.
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-m.obs.Passed():
					q.Add(afterProbes)
				}
			}
		})
	}
	return q.Run(ctx)
}

// monitorPass is what a pass of the monitor is for.
type monitorPass int

const (
	afterProbes monitorPass = iota // judge the clusters from fresh views
	graceEnded                     // only let time act on the taints
)

// pass judges every cluster from the views (probed) or only lets time
// act on the taints (a grace that ended), writes what changed, and
// returns when the next grace ends (zero: none pending).
func (m *HealthMonitor) pass(ctx context.Context, probed bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, passTimeout(m.cfg.Interval))
	defer cancel()
	var rows []*store.Cluster
	var fresh map[string]store.AgentFreshness
	var stored []store.ClusterView
	var dbNow time.Time
	err := m.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.Clusters().List(ctx); err != nil {
			return err
		}
		if fresh, err = tx.Agents().ListFreshness(ctx); err != nil {
			return err
		}
		stored, dbNow, err = tx.Clusters().ListViews(ctx)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	m.forgetRemoved(rows)
	now := m.cfg.Now()
	views, observers := m.views(stored, now.Sub(dbNow), now)
	quorum := QuorumPolicy{MaxAge: m.cfg.ViewMaxAge, Observers: observers}
	heartbeats := m.heartbeats(fresh, now)

	statuses := make([]v1alpha1.ClusterStatus, len(rows))
	nexts := make([]State, len(rows))
	for i, row := range rows {
		statuses[i] = decodeStatus(row, m.log)
		prev, seen := m.states[row.Name]
		if !seen {
			prev = Seed(statuses[i])
		}
		next := prev
		switch j := JudgeViews(views[row.Name], now, quorum); {
		case !probed || j.Unjudged:
			// No new evidence: only time acts, on the grace.
			if next.Ready.Type == "" {
				next.Ready = m.cfg.Policy.notProbedYet(now)
			}
			next.Taints = m.cfg.Policy.taints(next.Ready, now, prev.Taints)
		default:
			obs := Observation{Time: now, Probe: j.Probe, FailingSince: j.FailingSince, LastHeartbeat: heartbeats[row.Name]}
			next = m.cfg.Policy.Step(prev, obs)
			if m.cfg.Observed != nil {
				m.cfg.Observed(row.Name, obs, next)
			}
		}
		nexts[i] = next
	}

	// Disruption, from the verdicts just reached.
	members := make([]Member, 0, len(rows))
	for i, row := range rows {
		if nexts[i].Ready.Reason == ReasonNotProbedYet {
			continue // no verdict yet: no evidence either way
		}
		members = append(members, Member{Name: row.Name, Zone: m.cfg.Disruption.Zone(row.Labels),
			Ready: nexts[i].Ready.Status == metav1.ConditionTrue})
	}
	d := m.cfg.Disruption.Judge(members)
	var errs []error
	var due time.Time
	noExecute := false
	for i, row := range rows {
		next := nexts[i]
		var prevDisrupted *v1alpha1.Condition
		if next.Disrupted.Type != "" {
			prevDisrupted = &next.Disrupted
		}
		next.Disrupted = d.Condition(m.cfg.Disruption.Zone(row.Labels), prevDisrupted, now)
		m.states[row.Name] = next
		if t := m.graceEnds(next); !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
		if _, changed := mergeStatus(row.Status, statuses[i], next); !changed {
			continue
		}
		if err := m.write(ctx, row.Name, next); err != nil {
			errs = append(errs, err)
			continue
		}
		noExecute = noExecute || addsNoExecute(statuses[i].Taints, next.Taints)
	}
	if noExecute && m.cfg.OnNoExecute != nil {
		m.cfg.OnNoExecute()
	}
	return due, errors.Join(errs...)
}

// views groups the stored views by cluster, their times moved from the
// database's clock to the monitor's by the offset measured at the read,
// and counts the observers that recorded anything within ObserverExpiry.
func (m *HealthMonitor) views(stored []store.ClusterView, offset time.Duration, now time.Time) (map[string][]View, int) {
	out := map[string][]View{}
	newest := map[string]time.Time{}
	for _, sv := range stored {
		v := View{Observer: sv.Observer, Probe: probe.Result{Outcome: parseOutcome(sv.Outcome), Detail: sv.Detail}, At: sv.ObservedAt.Add(offset)}
		if sv.FailingSince != nil {
			v.FailingSince = sv.FailingSince.Add(offset)
		}
		out[sv.Cluster] = append(out[sv.Cluster], v)
		if v.At.After(newest[sv.Observer]) {
			newest[sv.Observer] = v.At
		}
	}
	observers := 0
	for _, at := range newest {
		if now.Sub(at) <= m.cfg.ObserverExpiry {
			observers++
		}
	}
	return out, observers
}

// heartbeats are the agents' last heartbeats to judge by. When several
// agents reported and none of them is fresher than the lease, the silence
// is the path's (heartbeats reach the database through the stream and the
// ingester, and one of those is away, as while the database fails over),
// not the clusters': then no cluster is judged by its agent, as the
// failover does not move AtMostOne work on it (failover.Cluster's
// HeartbeatsStale). A lone agent's silence is its own.
func (m *HealthMonitor) heartbeats(fresh map[string]store.AgentFreshness, now time.Time) map[string]*time.Time {
	out := make(map[string]*time.Time, len(fresh))
	var newest time.Time
	for name, f := range fresh {
		if f.LastHeartbeat != nil {
			out[name] = f.LastHeartbeat
			if f.LastHeartbeat.After(newest) {
				newest = *f.LastHeartbeat
			}
		}
	}
	if len(out) > 1 && now.Sub(newest) > m.cfg.Policy.AgentLease {
		clear(out)
	}
	return out
}

// graceEnds is when s's NoExecute grace ends, if it has yet to.
func (m *HealthMonitor) graceEnds(s State) time.Time {
	if s.Ready.Status == metav1.ConditionTrue || s.Ready.Reason == ReasonNotProbedYet || s.Ready.Type == "" {
		return time.Time{}
	}
	for _, t := range s.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			return time.Time{}
		}
	}
	return s.Ready.LastTransitionTime.Add(m.cfg.Policy.NoExecuteGrace)
}

func addsNoExecute(old, next []corev1.Taint) bool {
	for _, t := range next {
		if t.Effect == corev1.TaintEffectNoExecute && !slices.ContainsFunc(old, func(o corev1.Taint) bool {
			return o.Key == t.Key && o.Effect == t.Effect
		}) {
			return true
		}
	}
	return false
}

func (m *HealthMonitor) forgetRemoved(rows []*store.Cluster) {
	live := make(map[string]bool, len(rows))
	for _, r := range rows {
		live[r.Name] = true
	}
	for name := range m.states {
		if !live[name] {
			delete(m.states, name)
		}
	}
}

// write stores s's condition and taints in the cluster's status, with an
// audit entry, if they still differ from the stored ones.
func (m *HealthMonitor) write(ctx context.Context, name string, s State) error {
	var entry *audit.Entry
	err := m.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		entry = nil
		row, err := tx.Clusters().Get(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		stored := decodeStatus(row, m.log)
		out, changed := mergeStatus(row.Status, stored, s)
		if !changed {
			return nil
		}
		if err := tx.Clusters().UpdateStatus(ctx, name, out); err != nil {
			return err
		}
		entry = auditEntry(name, stored, s)
		// Last: the audit entry holds the chain's lock until commit.
		return tx.Audit().Append(ctx, entry)
	})
	if err != nil {
		return fmt.Errorf("write health of cluster %s: %w", name, err)
	}
	if entry != nil {
		m.log.Info("cluster health changed", "cluster", name, "ready", s.Ready.Status, "reason", s.Ready.Reason,
			"summary", entry.Summary)
	}
	return nil
}

// decodeStatus decodes a stored status; one that does not decode is
// logged and taken as empty, so that health is written over it.
func decodeStatus(row *store.Cluster, log *slog.Logger) v1alpha1.ClusterStatus {
	var st v1alpha1.ClusterStatus
	if len(row.Status) > 0 {
		if err := json.Unmarshal(row.Status, &st); err != nil {
			log.Error("stored cluster status does not decode; health replaces it", "cluster", row.Name, "error", err)
			return v1alpha1.ClusterStatus{}
		}
	}
	return st
}

// mergeStatus puts s's Ready condition and purser taints into the stored
// status raw (decoded: stored), keeping every other field, condition and
// taint as it is, and reports whether that changes anything.
func mergeStatus(raw []byte, stored v1alpha1.ClusterStatus, s State) ([]byte, bool) {
	conds := slices.Clone(stored.Conditions)
	for _, c := range []v1alpha1.Condition{s.Ready, s.Disrupted} {
		if c.Type == "" {
			continue
		}
		if i := slices.IndexFunc(conds, func(x v1alpha1.Condition) bool { return x.Type == c.Type }); i >= 0 {
			conds[i] = c
		} else {
			conds = append(conds, c)
		}
	}
	var taints, ours []corev1.Taint
	for _, t := range stored.Taints {
		if isPurserTaint(t.Key) {
			ours = append(ours, t)
		} else {
			taints = append(taints, t)
		}
	}
	if sameJSON(conds, stored.Conditions) && sameJSON(ours, s.Taints) {
		return raw, false
	}
	taints = append(taints, s.Taints...)

	// Other fields are carried over as raw JSON, so that fields this
	// version does not know survive.
	fields := map[string]json.RawMessage{}
	if len(raw) > 0 && json.Unmarshal(raw, &fields) != nil {
		fields = map[string]json.RawMessage{}
	}
	fields["conditions"] = mustJSON(conds)
	if len(taints) > 0 {
		fields["taints"] = mustJSON(taints)
	} else {
		delete(fields, "taints")
	}
	return mustJSON(fields), true
}

func sameJSON(a, b any) bool {
	x, y := mustJSON(a), mustJSON(b)
	// A nil and an empty list are the same status.
	return bytes.Equal(x, y) || (isEmptyList(x) && isEmptyList(y))
}

func isEmptyList(b []byte) bool { return string(b) == "null" || string(b) == "[]" }

// mustJSON encodes values that always encode (conditions, taints, raw
// fields).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode cluster status: %v", err))
	}
	return b
}

// auditEntry records the change from stored to s.
func auditEntry(name string, stored v1alpha1.ClusterStatus, s State) *audit.Entry {
	var old *v1alpha1.Condition
	if c := ReadyCondition(stored); c != nil {
		old = c
	}
	var oldTaints []corev1.Taint
	for _, t := range stored.Taints {
		if isPurserTaint(t.Key) {
			oldTaints = append(oldTaints, t)
		}
	}
	added, removed := taintDiff(oldTaints, s.Taints)

	var parts []string
	action := ActionTaint
	if old == nil || old.Status != s.Ready.Status || old.Reason != s.Ready.Reason || old.Message != s.Ready.Message {
		action = ActionCondition
		from := "none"
		if old != nil {
			from = string(old.Status)
		}
		parts = append(parts, fmt.Sprintf("Ready %s -> %s (%s): %s", from, s.Ready.Status, s.Ready.Reason, s.Ready.Message))
	}
	if len(added) > 0 {
		parts = append(parts, "taints added "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "taints removed "+strings.Join(removed, ", "))
	}
	if action == ActionTaint && len(added) > 0 {
		parts = append(parts, fmt.Sprintf("Ready %s since %s", s.Ready.Status, s.Ready.LastTransitionTime.Format(time.RFC3339)))
	}
	if od := DisruptedCondition(stored); s.Disrupted.Type != "" && (od == nil || od.Reason != s.Disrupted.Reason || od.Message != s.Disrupted.Message) {
		if action == ActionTaint && len(added)+len(removed) == 0 {
			action = ActionDisruption
		}
		from := "none"
		if od != nil {
			from = od.Reason
		}
		parts = append(parts, fmt.Sprintf("Disrupted %s -> %s: %s", from, s.Disrupted.Reason, s.Disrupted.Message))
	}
	details := mustJSON(map[string]any{"ready": s.Ready, "previousReady": old, "taints": s.Taints, "disrupted": s.Disrupted})
	return &audit.Entry{
		Actor: Actor, Action: action, Kind: v1alpha1.KindCluster, Name: name,
		Summary: strings.Join(parts, "; "), Outcome: s.Ready.Reason, Details: details,
	}
}

// taintDiff lists, as key:Effect, the taints in b but not in a, and those
// in a but not in b.
func taintDiff(a, b []corev1.Taint) (added, removed []string) {
	has := func(ts []corev1.Taint, t corev1.Taint) bool {
		return slices.ContainsFunc(ts, func(u corev1.Taint) bool { return u.Key == t.Key && u.Effect == t.Effect })
	}
	for _, t := range b {
		if !has(a, t) {
			added = append(added, t.Key+":"+string(t.Effect))
		}
	}
	for _, t := range a {
		if !has(b, t) {
			removed = append(removed, t.Key+":"+string(t.Effect))
		}
	}
	return added, removed
}
