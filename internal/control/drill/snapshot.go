// Package drill reads the snapshot of the farm the what-if of a drill
// runs on (package internal/domain/drill), in one read transaction: the
// clusters as the submitter describes them to placement, the agents'
// capacity reports less what is in flight (the submitter's own sums,
// recounted), the quotas, and the active runnables with their specs.
package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
)

// Policy is what the snapshot reads of the policy: the priority a
// runnable's author gets for its spec.priority, and each namespace's
// fair-share weight, as the submitter orders its queue
// (submitter.SharePolicy). nil: integers as written, classes 0, weight 1.
type Policy = submitter.SharePolicy

// Options are the figures of the farm's configuration the what-if uses.
type Options struct {
	Policy    Policy
	ZoneLabel string
	Score     placement.Score
	// EvictionRate and ZoneRate as the failover controller is configured;
	// zero for its defaults.
	EvictionRate, ZoneRate float64
	// Kinds tells a kind that hands its state over by savepoint; nil for
	// kinds.Default().
	Kinds *kinds.Registry
	// Target, when set, limits the runnables read to those of the
	// clusters it takes (drill.Lost), which are all one what-if moves;
	// a target that names nothing is its *drill.TargetError.
	Target *drill.Target
}

// Snapshotter is Snapshot with o's settings, the target and the policy in
// force given at each call: the API's DrillSnapshot.
func Snapshotter(o Options) func(ctx context.Context, tx *store.Tx, target *drill.Target, pol *policy.Policy) (drill.Farm, error) {
	return func(ctx context.Context, tx *store.Tx, target *drill.Target, pol *policy.Policy) (drill.Farm, error) {
		o := o
		o.Target = target
		if pol != nil {
			o.Policy = pol
		}
		return Snapshot(ctx, tx, o)
	}
}

// pageSize is how many runnables one query of the snapshot reads.
const pageSize = 1000

// Snapshot reads the farm in tx. Every active runnable is read with its
// spec, the what-if of each DC (the standing headroom) needing the
// runnables of every cluster, unless o.Target limits them.
func Snapshot(ctx context.Context, tx *store.Tx, o Options) (drill.Farm, error) {
	f := drill.Farm{ZoneLabel: o.ZoneLabel, Score: o.Score, EvictionRate: o.EvictionRate, ZoneRate: o.ZoneRate,
		Quotas: map[string]v1alpha1.QuotaSpec{}}
	if o.Policy != nil {
		f.Weight = o.Policy.FairShareWeight
	}
	reg := o.Kinds
	if reg == nil {
		reg = kinds.Default()
	}
	rows, err := tx.Clusters().List(ctx)
	if err != nil {
		return f, err
	}
	states, err := tx.Runnables().ActiveStates(ctx)
	if err != nil {
		return f, err
	}
	reports, err := tx.Agents().Capacities(ctx)
	if err != nil {
		return f, err
	}
	figs := submitter.SnapshotFigures(states, reports, submitter.DefaultInFlightMargin)
	f.Usage = figs.Usage
	var capacity map[string]store.Capacity
	for _, row := range rows {
		c, err := clusters.Placement(row)
		if err != nil {
			return f, fmt.Errorf("cluster %s: %w", row.Name, err)
		}
		c.Active, c.Free = figs.Active[row.Name], figs.Free[row.Name]
		if c.Free == nil {
			if capacity == nil {
				if capacity, err = tx.Clusters().Capacity(ctx); err != nil {
					return f, err
				}
			}
			if nodes, ok := capacity[row.Name]; ok {
				c.Capacity = &placement.Capacity{MilliCPU: nodes.MilliCPU}
			}
		}
		f.Clusters = append(f.Clusters, c)
	}
	var lost map[string]bool
	if o.Target != nil {
		if lost, err = drill.Lost(*o.Target, f.Clusters, o.ZoneLabel); err != nil {
			return f, err
		}
	}
	quotas, err := tx.Quotas().List(ctx)
	if err != nil {
		return f, err
	}
	for _, q := range quotas {
		var spec v1alpha1.QuotaSpec
		if json.Unmarshal(q.Spec, &spec) == nil {
			f.Quotas[q.Namespace] = spec
		}
	}
	phases := []string{string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted), string(v1alpha1.PhaseRunning)}
	var after int64
	for {
		page, err := tx.Runnables().ListInPhases(ctx, phases, after, pageSize)
		if err != nil {
			return f, err
		}
		for _, rec := range page {
			if lost != nil && !lost[rec.Cluster] {
				continue
			}
			if r, ok := runnableOf(rec, o.Policy, reg); ok {
				f.Runnables = append(f.Runnables, r)
			}
		}
		if len(page) < pageSize {
			break
		}
		after = page[len(page)-1].ID
	}
	return f, nil
}

// runnableOf is rec as the what-if moves it; false for one whose spec
// does not decode or has no kind (the submitter fails such a one).
func runnableOf(rec *store.Runnable, pol Policy, reg *kinds.Registry) (drill.Runnable, bool) {
	var doc store.Document[v1alpha1.RunnableSpec]
	dec := json.NewDecoder(bytes.NewReader(rec.Spec))
	dec.UseNumber()
	if rec.Cluster == "" || dec.Decode(&doc) != nil {
		return drill.Runnable{}, false
	}
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return drill.Runnable{}, false
	}
	gvk := gv.WithKind(kind)
	demand, err := placement.Requests(&doc.Spec)
	if err != nil {
		return drill.Runnable{}, false
	}
	r := drill.Runnable{UID: rec.UID, Namespace: rec.Namespace, Name: rec.Name, Cluster: rec.Cluster, GVK: gvk.String(),
		Placement: doc.Spec.Placement, Demand: demand, Since: rec.CreatedAt,
		Priority: priority(pol, rec, &doc), Flink: reg.MovesBySavepoint(gvk.GroupKind(), doc.Spec.Template),
		Running: rec.Phase == string(v1alpha1.PhaseRunning)}
	if a := doc.Spec.Failover; a != nil && a.Application != nil && a.Application.StatePreservation != nil {
		r.RestorePolicy = a.Application.StatePreservation.RestorePoint
	}
	if len(rec.Status) > 0 {
		var st v1alpha1.RunnableStatus
		if json.Unmarshal(rec.Status, &st) == nil {
			r.RestorePoint = st.RestorePoint
			// What it was placed with, when the spec's figures moved
			// since: the room it holds is what it asked for then.
			if req, err := placement.ParseList(st.Requests); err == nil && len(req) > 0 {
				r.Demand.Total = req
			}
		}
	}
	return r, true
}

func priority(pol Policy, rec *store.Runnable, doc *store.Document[v1alpha1.RunnableSpec]) int32 {
	if pol == nil {
		return placement.PriorityValue(doc.Spec.Priority, nil)
	}
	author := policy.User{Name: rec.Submitter}
	if doc.Author != nil {
		author = policy.User{Name: doc.Author.Name, Groups: doc.Author.Groups}
	}
	return pol.Priority(author, rec.Namespace, doc.Spec.Priority)
}
