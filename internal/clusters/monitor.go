package clusters

import (
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

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/probe"
	"github.com/purser-io/purser/internal/seal"
	"github.com/purser-io/purser/internal/store"
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
)

// Defaults of MonitorConfig.
const (
	DefaultProbeInterval = 2 * time.Second
	DefaultProbeWorkers  = 16
)

// MonitorConfig says what a HealthMonitor works with.
type MonitorConfig struct {
	Store  *store.Store
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
	Logger  *slog.Logger
	// Now is the clock of the observations; default time.Now.
	Now func() time.Time
	// Observed, if set, is told every observation and the state it led
	// to, from the monitor's goroutine, before the state is written: how
	// a test follows the probes instead of guessing them from the clock.
	Observed func(cluster string, o Observation, s State)
}

// HealthMonitor is cluster health for `purser controller`: every Interval
// it probes each registered cluster's kube-apiserver, reads when its agent
// last reported, runs Policy.Step, and writes the cluster's Ready
// condition and purser taints, with an audit entry, when they differ from
// the stored ones. Only one should run at a time (the controller is
// leader-elected).
//
// Its per-cluster state lives in memory and is seeded from the stored
// status the first time it sees a cluster (see Seed), so a restart neither
// resets a NotReady cluster to Unknown nor restarts its NoExecute grace.
type HealthMonitor struct {
	cfg    MonitorConfig
	log    *slog.Logger
	config *Cache

	// Owned by Run's goroutine.
	states  map[string]State
	probers map[string]*cachedProber
}

type cachedProber struct {
	sealed string // the kubeconfig it was built from
	prober *probe.Prober
}

// NewHealthMonitor returns a monitor; nothing runs until Run.
func NewHealthMonitor(cfg MonitorConfig) *HealthMonitor {
	cfg.Policy = cfg.Policy.withDefaults()
	cfg.Interval = cmp.Or(cfg.Interval, DefaultProbeInterval)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, probe.DefaultTimeout)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultProbeWorkers)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HealthMonitor{
		cfg: cfg, log: log, config: NewCache(cfg.Sealer),
		states: map[string]State{}, probers: map[string]*cachedProber{},
	}
}

// Run probes until ctx is done, then returns nil; it fails only when the
// configuration is unusable. A pass that fails (the database is away) is
// logged and the next one tries again.
func (m *HealthMonitor) Run(ctx context.Context) error {
	if m.cfg.Store == nil || m.cfg.Sealer == nil {
		return errors.New("cluster health: MonitorConfig needs Store and Sealer")
	}
	m.log.Info("cluster health monitor starting", "interval", m.cfg.Interval,
		"failureThreshold", m.cfg.Policy.FailureThreshold, "successThreshold", m.cfg.Policy.SuccessThreshold,
		"noExecuteGrace", m.cfg.Policy.NoExecuteGrace, "agentLease", m.cfg.Policy.AgentLease)
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.pass(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("cluster health pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pass probes every cluster once and writes what changed.
func (m *HealthMonitor) pass(ctx context.Context) error {
	var rows []*store.Cluster
	var fresh map[string]store.AgentFreshness
	err := m.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.ListClusters(ctx); err != nil {
			return err
		}
		fresh, err = tx.ListAgentFreshness(ctx)
		return err
	})
	if err != nil {
		return err
	}
	m.forgetRemoved(rows)

	results := make([]probe.Result, len(rows))
	sem := make(chan struct{}, m.cfg.Workers)
	var wg sync.WaitGroup
	for i, row := range rows {
		p, err := m.prober(row)
		if err != nil {
			// An unusable kubeconfig reaches nothing: judged like an
			// unreachable cluster, with the reason in the message.
			results[i] = probe.Result{Outcome: probe.Unreachable, Detail: err.Error()}
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = p.Probe(ctx)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err() // the probes were cut short: they say nothing
	}

	var errs []error
	for i, row := range rows {
		stored := decodeStatus(row, m.log)
		prev, seen := m.states[row.Name]
		if !seen {
			prev = Seed(stored)
		}
		obs := Observation{Time: m.cfg.Now(), Probe: results[i], LastHeartbeat: fresh[row.Name].LastHeartbeat}
		next := m.cfg.Policy.Step(prev, obs)
		m.states[row.Name] = next
		if m.cfg.Observed != nil {
			m.cfg.Observed(row.Name, obs, next)
		}
		if _, changed := mergeStatus(row.Status, stored, next); !changed {
			continue
		}
		if err := m.write(ctx, row.Name, next); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prober returns the cluster's prober, built again when its kubeconfig
// changed.
func (m *HealthMonitor) prober(row *store.Cluster) (*probe.Prober, error) {
	if cp, ok := m.probers[row.Name]; ok && cp.sealed == string(row.Kubeconfig) {
		return cp.prober, nil
	}
	delete(m.probers, row.Name)
	cfg, err := m.config.RESTConfig(row)
	if err != nil {
		return nil, err
	}
	p, err := probe.New(cfg, m.cfg.ProbeTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", row.Name, err)
	}
	m.probers[row.Name] = &cachedProber{sealed: string(row.Kubeconfig), prober: p}
	return p, nil
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
	for name := range m.probers {
		if !live[name] {
			delete(m.probers, name)
			m.config.Forget(name)
		}
	}
}

// write stores s's condition and taints in the cluster's status, with an
// audit entry, if they still differ from the stored ones.
func (m *HealthMonitor) write(ctx context.Context, name string, s State) error {
	var entry *audit.Entry
	err := m.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		entry = nil
		row, err := tx.GetCluster(ctx, name)
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
		if err := tx.UpdateClusterStatus(ctx, name, out); err != nil {
			return err
		}
		entry = auditEntry(name, stored, s)
		// Last: the audit entry holds the chain's lock until commit.
		return tx.AppendAudit(ctx, entry)
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
	if i := slices.IndexFunc(conds, func(c v1alpha1.Condition) bool { return c.Type == v1alpha1.ConditionReady }); i >= 0 {
		conds[i] = s.Ready
	} else {
		conds = append(conds, s.Ready)
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
	return string(x) == string(y) || (isEmptyList(x) && isEmptyList(y))
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
	details := mustJSON(map[string]any{"ready": s.Ready, "previousReady": old, "taints": s.Taints})
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
