package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"cel.dev/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/rollout"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// notReachedMessage is the status of a cluster that a rollout has not
// reached, where no previous generation is kept.
const notReachedMessage = "not applied: the rollout has not reached this cluster, and no previous generation is kept"

// notKeptMessage is the status of a cluster whose generation's spec is
// not kept (it never should be): what the cluster holds is left as it is
// rather than removed.
const notKeptMessage = "left as it is: the rollout gives this cluster generation %d, whose spec is not kept"

// Actor names the syncer in the audit log, for the rollout steps it takes.
const Actor = "syncer"

// rolloutState is a deployable's rollout row as the latest poll read it,
// decoded once per change: the previous generation and the others kept,
// ready to apply, and the latest decision.
type rolloutState struct {
	row      *store.DeployableRollout
	recRV    int64       // the deployable's ResourceVersion previous was built from
	previous *deployable // nil: no previous generation (0)
	kept     map[int64]*deployable
	status   *v1alpha1.RolloutStatus
}

func decodeRollout(d *deployable, row *store.DeployableRollout) *rolloutState {
	rs := &rolloutState{row: row}
	if d != nil {
		rs.recRV = d.rec.ResourceVersion
	}
	if row.PreviousGeneration > 0 && d != nil {
		rec := *d.rec
		rec.Generation, rec.Spec, rec.Secret, rec.SpecHash = row.PreviousGeneration, row.PreviousSpec, row.PreviousSecret, row.PreviousSpecHash
		rs.previous = decodeDeployable(&rec)
		// The previous generation goes where the deployable is placed now,
		// and is never rolled out itself.
		rs.previous.placement, rs.previous.rollout = d.placement, nil
	}
	if d != nil {
		for _, k := range row.Kept {
			rec := *d.rec
			rec.Generation, rec.Spec, rec.Secret, rec.SpecHash = k.Generation, k.Spec, k.Secret, k.SpecHash
			v := decodeDeployable(&rec)
			v.placement, v.rollout = d.placement, nil
			if rs.kept == nil {
				rs.kept = map[int64]*deployable{}
			}
			rs.kept[k.Generation] = v
		}
	}
	if len(row.Status) > 0 {
		var st v1alpha1.RolloutStatus
		if json.Unmarshal(row.Status, &st) == nil {
			rs.status = &st
		}
	}
	return rs
}

// forCluster is the version of d that cluster should hold: d itself
// without a rollout, else the generation the latest decision gives the
// cluster (rollout.Target): until a decision about d's generation names
// the cluster, what the latest decision gave it, and for a cluster that
// just joined, the previous generation. nil means none: not applied.
// gen is the generation named, and kept false when its spec is not
// kept: the caller then leaves the cluster as it is.
func (s *Syncer) forCluster(d *deployable, cluster string) (v *deployable, gen int64, kept bool) {
	if d.rollout == nil || !d.live() {
		return d, d.rec.Generation, true
	}
	s.mu.RLock()
	rs := s.rollouts[d.rec.UID]
	s.mu.RUnlock()
	if rs == nil {
		return nil, 0, true // no decision and no previous generation yet
	}
	gen = rollout.Target(rs.status, rs.row.PreviousGeneration, cluster)
	switch {
	case gen == d.rec.Generation:
		return d, gen, true
	case gen == 0:
		return nil, 0, true
	case gen == rs.row.PreviousGeneration && rs.previous != nil:
		return rs.previous, gen, true
	case rs.kept[gen] != nil:
		return rs.kept[gen], gen, true
	}
	return nil, gen, false
}

// rolloutLoop decides, every PollInterval, the next step of every
// deployable that rolls out in waves (internal/domain/rollout), and
// stores each decision that moved with its audit entries in one
// transaction. Every replica decides; the decisions are deterministic and
// the write optimistic, so concurrent replicas agree and one write wins.
func (s *Syncer) rolloutLoop(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-s.polled:
	}
	failing := false
	reconcile.Every(ctx, s.cfg.PollInterval, func(ctx context.Context) {
		err := s.decideRollouts(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				s.log.Warn("cannot decide rollouts; retrying", "error", err)
			}
			failing = true
		case failing:
			s.log.Info("deciding rollouts again")
			failing = false
		}
	})
}

// decideRollouts is one pass over every deployable that rolls out: one
// read transaction for what the decisions look at, and one write
// transaction for the decisions that moved, each written under its row's
// optimistic check (a row that moved since it was read is decided again
// at the next pass), with its audit entries.
func (s *Syncer) decideRollouts(ctx context.Context) error {
	s.mu.RLock()
	var ds []*deployable
	for _, d := range s.deployables {
		if d.rollout != nil && d.live() && d.err == nil {
			ds = append(ds, d)
		}
	}
	cls := make([]*store.Cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		cls = append(cls, c)
	}
	s.mu.RUnlock()
	if len(ds) == 0 {
		return nil
	}
	var (
		fresh      map[string]store.AgentFreshness
		rows       map[string]*store.DeployableRollout
		sts        map[string][]*store.DeployableClusterStatus
		dependents map[dependentKey][]rollout.Problem
	)
	var namespaces []string
	for _, d := range ds {
		if !slices.Contains(namespaces, d.rec.Namespace) {
			namespaces = append(namespaces, d.rec.Namespace)
		}
	}
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if fresh, err = tx.Agents().ListFreshness(ctx); err != nil {
			return err
		}
		if dependents, err = dependentProblems(ctx, tx, namespaces); err != nil {
			return err
		}
		all, err := tx.Deployables().ListRollouts(ctx)
		if err != nil {
			return err
		}
		rows = make(map[string]*store.DeployableRollout, len(all))
		for _, r := range all {
			rows[r.DeployableUID] = r
		}
		sts = make(map[string][]*store.DeployableClusterStatus, len(ds))
		for _, d := range ds {
			if sts[d.rec.UID], err = tx.Deployables().ListStatus(ctx, d.rec.UID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	unreachable := map[string]bool{}
	for _, c := range cls {
		var cst v1alpha1.ClusterStatus
		if len(c.Status) > 0 && json.Unmarshal(c.Status, &cst) == nil {
			unreachable[c.Name] = v1alpha1.ClusterState(cst) == v1alpha1.ClusterNotReady
		}
	}
	type moved struct {
		d    *deployable
		row  *store.DeployableRollout
		next []byte
		dec  rollout.Decision
	}
	var todo []moved
	var errs []error
	for _, d := range ds {
		row := rows[d.rec.UID]
		if row == nil {
			row = &store.DeployableRollout{DeployableUID: d.rec.UID}
		}
		problems, err := s.gateProblems(ctx, d, cls)
		if err != nil {
			errs = append(errs, fmt.Errorf("rollout of %s/%s: %w", d.rec.Namespace, d.rec.Name, err))
			continue
		}
		for _, c := range cls {
			if ps := dependents[dependentKey{d.rec.Namespace, d.rec.Name, c.Name}]; len(ps) > 0 {
				if problems == nil {
					problems = map[string][]rollout.Problem{}
				}
				problems[c.Name] = append(problems[c.Name], ps...)
			}
		}
		dec := decide(d, row, sts[d.rec.UID], cls, fresh, unreachable, problems)
		next, err := json.Marshal(dec.Status)
		if err != nil {
			return err
		}
		if !bytes.Equal(next, row.Status) || slices.ContainsFunc(row.Kept, func(k store.KeptGeneration) bool { return !slices.Contains(dec.Kept, k.Generation) }) {
			todo = append(todo, moved{d, row, next, dec})
		}
	}
	if len(todo) == 0 {
		return errors.Join(errs...)
	}
	var written []moved
	err = s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		written = written[:0]
		for _, m := range todo {
			cur, err := tx.Deployables().GetRollout(ctx, m.d.rec.UID)
			switch {
			case errors.Is(err, store.ErrNotFound) && m.row.ResourceVersion == 0:
				cur = &store.DeployableRollout{DeployableUID: m.d.rec.UID}
			case errors.Is(err, store.ErrNotFound):
				continue // purged meanwhile
			case err != nil:
				return err
			case cur.ResourceVersion != m.row.ResourceVersion:
				continue // moved since it was read: decided again at the next pass
			}
			cur.Status = m.next
			// A generation no cluster holds or falls back to any more is
			// dropped; the row has not moved since the decision read it, so
			// none was kept after it.
			cur.KeepOnly(m.dec.Kept)
			if err := tx.Deployables().PutRollout(ctx, cur); errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			written = append(written, m)
		}
		// Appended last: the audit chain's head stays locked from the
		// first append to the commit (store.AuditLog.Append).
		for _, m := range written {
			for _, e := range m.dec.Events {
				if err := tx.Audit().Append(ctx, &audit.Entry{Actor: Actor, Action: "rollout", Kind: v1alpha1.KindDeployable,
					Namespace: m.d.rec.Namespace, Name: m.d.rec.Name, Summary: e, Outcome: string(m.dec.Status.State)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	s.statusWrites.Add(int64(len(written)))
	for _, m := range written {
		for _, e := range m.dec.Events {
			s.log.Info("rollout", "deployable", m.d.rec.Namespace+"/"+m.d.rec.Name, "generation", m.d.rec.Generation, "step", e)
		}
	}
	return errors.Join(errs...)
}

// decide builds the input of one deployable's decision from what the
// pass read, and decides.
func decide(d *deployable, row *store.DeployableRollout, sts []*store.DeployableClusterStatus, cls []*store.Cluster,
	fresh map[string]store.AgentFreshness, unreachable map[string]bool, problems map[string][]rollout.Problem) rollout.Decision {
	in := rollout.Input{Spec: *d.rollout, Generation: d.rec.Generation, Previous: row.PreviousGeneration,
		Reports: map[string]rollout.Report{}, Now: time.Now()}
	for _, c := range cls {
		info := placement.Cluster{Name: c.Name, Labels: c.Labels}
		var doc store.Document[v1alpha1.ClusterSpec]
		if json.Unmarshal(c.Spec, &doc) == nil {
			info.Taints = doc.Spec.Taints
		}
		if ok, _ := placement.Matches(d.placement, info); ok {
			in.Clusters = append(in.Clusters, rollout.Cluster{Name: c.Name, Labels: c.Labels})
		}
	}
	for _, st := range sts {
		r := rollout.Report{State: v1alpha1.SyncState(st.State), SyncedGeneration: st.SyncedGeneration,
			StateGeneration: st.StateGeneration, Message: st.Message}
		if st.LastSyncedAt != nil {
			r.SyncedAt = *st.LastSyncedAt
		}
		r.AgentReportAt, r.NoAgent = agentReport(fresh, st.Cluster)
		r.Problems, r.Unreachable = problems[st.Cluster], unreachable[st.Cluster]
		in.Reports[st.Cluster] = r
	}
	for _, c := range in.Clusters {
		if _, ok := in.Reports[c.Name]; !ok {
			r := rollout.Report{Unreachable: unreachable[c.Name]}
			r.AgentReportAt, r.NoAgent = agentReport(fresh, c.Name)
			in.Reports[c.Name] = r
		}
	}
	if len(row.Status) > 0 {
		var prior v1alpha1.RolloutStatus
		if json.Unmarshal(row.Status, &prior) == nil {
			in.Prior = &prior
		}
	}
	if len(row.Control) > 0 {
		_ = json.Unmarshal(row.Control, &in.Control) // unreadable: no control
	}
	return rollout.Decide(in)
}

// gate is a compiled spec.rollout.gates entry.
type gate struct {
	v1alpha1.Gate
	selector labels.Selector // nil: every object
	rule     cel.Program     // nil: purser's health judgement
}

// gates compiles the deployable's gates once per decoded deployable.
func (d *deployable) compiledGates() ([]gate, error) {
	d.gatesOnce.Do(func() {
		for _, g := range d.rollout.Gates {
			cg := gate{Gate: g}
			if g.Selector != nil {
				if cg.selector, d.gatesErr = metav1.LabelSelectorAsSelector(g.Selector); d.gatesErr != nil {
					return
				}
			}
			if g.Unhealthy != "" {
				if cg.rule, d.gatesErr = v1alpha1.CompileGate(g.Unhealthy); d.gatesErr != nil {
					d.gatesErr = fmt.Errorf("gate %s: %w", g.Name, d.gatesErr)
					return
				}
			}
			d.gates = append(d.gates, cg)
		}
	})
	return d.gates, d.gatesErr
}

// gateProblems reads, for every cluster, the inventory records the gates
// select in the deployable's namespace (a tenant's gate sees nothing
// beyond it), and returns those judged unhealthy, with the time the agent
// observed them, by cluster.
func (s *Syncer) gateProblems(ctx context.Context, d *deployable, cls []*store.Cluster) (map[string][]rollout.Problem, error) {
	if len(d.rollout.Gates) == 0 {
		return nil, nil
	}
	gates, err := d.compiledGates()
	if err != nil {
		return nil, err
	}
	out := map[string][]rollout.Problem{}
	err = s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		clear(out)
		for _, c := range cls {
			for _, g := range gates {
				rows, _, err := tx.Inventory().List(ctx, store.InventoryFilter{Cluster: c.Name, APIVersion: g.APIVersion, Kind: g.Kind,
					Namespace: d.rec.Namespace, Selector: g.selector, WithoutObject: g.rule == nil, Limit: maxGateObjects})
				if err != nil {
					return err
				}
				for _, row := range rows {
					if why := judgeGate(g, row); why != "" {
						out[c.Name] = append(out[c.Name], rollout.Problem{
							Object: row.Kind + "/" + row.Namespace + "/" + row.Name, Reason: "gate " + g.Name + ": " + why, At: row.ObservedAt})
					}
				}
			}
		}
		return nil
	})
	return out, err
}

// maxGateObjects bounds the objects one gate reads on one cluster.
const maxGateObjects = 1000

// judgeGate says why a gate finds a recorded object unhealthy, or "".
func judgeGate(g gate, row store.InventoryRow) string {
	if g.rule == nil {
		if row.Health == string(v1alpha1.HealthUnhealthy) {
			return "health Unhealthy"
		}
		return ""
	}
	var obj map[string]any
	if err := json.Unmarshal(row.Object, &obj); err != nil {
		return ""
	}
	val, _, err := g.rule.Eval(map[string]any{v1alpha1.GateVariable: obj})
	if err != nil {
		return "" // a field the rule needs is not there yet: no verdict
	}
	if b, ok := val.Value().(bool); ok && b {
		return "unhealthy by its rule"
	}
	return ""
}

// agentReport is the time up to which the cluster's agent reported its
// view current (its latest heartbeat with synced caches), and whether the
// cluster has no agent at all, in which case the syncer's own observation
// (Synced) is all there is to judge by.
func agentReport(fresh map[string]store.AgentFreshness, cluster string) (time.Time, bool) {
	f, ok := fresh[cluster]
	if !ok {
		return time.Time{}, true
	}
	if f.CurrentUntil != nil {
		return *f.CurrentUntil, false
	}
	return time.Time{}, false
}
