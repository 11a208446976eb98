// Package drill answers "what if the farm lost this": a DC, a cluster, or
// the clusters a label selector picks. It is pure: on a snapshot of the
// farm (the clusters as placement describes them, with the free figures
// the submitter's sums give, each namespace's usage and quota, and the
// runnables on the clusters lost), it runs the real placement code
// (placement.QuotaVerdict, placement.ChooseFor) over the runnables of the
// lost clusters in the queue's order (placement.CompareQueue), reserving
// what each one takes before the next is weighed, as the submitter does
// when it wakes the waiting. No second model of placement is kept here:
// a change of placement changes the what-if with it.
package drill

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
)

// Verdicts and target kinds, as the API names them.
const (
	Absorbed    = v1alpha1.DrillAbsorbed
	Partial     = v1alpha1.DrillPartial
	NotAbsorbed = v1alpha1.DrillNotAbsorbed

	TargetDC       = v1alpha1.DrillTargetDC
	TargetCluster  = v1alpha1.DrillTargetCluster
	TargetSelector = v1alpha1.DrillTargetSelector
)

// The report's parts are the API's types (api/v1alpha1), which the
// command line prints without linking the placement code.
type (
	// Target is what is taken away.
	Target = v1alpha1.DrillTarget
	// Move is one runnable's move.
	Move = v1alpha1.DrillMove
	// Unplaceable is a runnable the farm would not take.
	Unplaceable = v1alpha1.DrillUnplaceable
	// Figure is a cluster's load.
	Figure = v1alpha1.DrillFigure
	// ClusterChange is one cluster before and after.
	ClusterChange = v1alpha1.DrillClusterChange
	// Report is the what-if's answer.
	Report = v1alpha1.DrillReport
	// Short is what the farm lacks to absorb the target.
	Short = v1alpha1.DrillShort
)

// SavepointOfTheStop is the source of the restore point of a running
// Flink job's move: the savepoint its stop writes, whose path is known
// once written.
const SavepointOfTheStop = "the savepoint the planned move's stop writes"

// Runnable is an active runnable as the what-if moves it.
type Runnable struct {
	UID, Namespace, Name string
	// Cluster is where it runs now.
	Cluster string
	// GVK is its template's kind, as schema.GroupVersionKind prints it.
	GVK       string
	Placement v1alpha1.Placement
	// Demand is placement.Requests of its spec.
	Demand   placement.Demand
	Priority int32
	// Since is its creation: the queue's tie-break.
	Since time.Time
	// Flink says that its kind restores from a savepoint or checkpoint.
	Flink bool
	// Running says that its job runs (phase Running): a planned move
	// stops it with a savepoint, which its copy restores from.
	Running bool
	// RestorePolicy is spec.failover.application.statePreservation
	// .restorePoint (Required, IfAvailable or "").
	RestorePolicy string
	// RestorePoint is the restore point recorded for its next attempt
	// (status.restorePoint), nil when none is.
	RestorePoint *v1alpha1.RestorePoint
}

// Farm is the snapshot the what-if runs on.
type Farm struct {
	// Clusters are every registered cluster as placement describes them,
	// with the free figures of the submitter's sums.
	Clusters []placement.Cluster
	// Runnables are the active runnables of the clusters the target takes
	// (others may be given; they are ignored).
	Runnables []Runnable
	// Usage is namespace -> cluster -> usage, as quotas count it, of every
	// active runnable.
	Usage map[string]map[string]corev1.ResourceList
	// Quotas are the namespaces' quotas; a namespace without one is not
	// bounded.
	Quotas map[string]v1alpha1.QuotaSpec
	// Weight is a namespace's fair-share weight (nil or 0: 1).
	Weight func(ns string) float64
	// ZoneLabel is the cluster label naming its DC (default "dc").
	ZoneLabel string
	Score     placement.Score
	// EvictionRate bounds moves per second across the farm;
	// ZoneRate bounds them per DC losing all its clusters, as the
	// failover controller's secondary rate does (failover.ZoneRate).
	// Zero takes the failover controller's defaults.
	EvictionRate, ZoneRate float64
}

// Defaults of the failover controller's rates (failover.DefaultEvictionRate
// and its secondary rate, a tenth of it), repeated here so that the domain
// does not import the controller; a test keeps them equal.
const (
	DefaultEvictionRate = 20.0
	DefaultZoneRate     = DefaultEvictionRate / 10
)

// TargetError is a target that names nothing the farm has, or does not
// parse.
type TargetError struct{ Target, Why string }

func (e *TargetError) Error() string { return e.Target + ": " + e.Why }

// Lost is the names of the clusters t takes away from clusters.
func Lost(t Target, clusters []placement.Cluster, zoneLabel string) (map[string]bool, error) {
	zoneLabel = cmp.Or(zoneLabel, "dc")
	var match func(placement.Cluster) bool
	switch t.Kind {
	case TargetDC:
		match = func(c placement.Cluster) bool { v, ok := c.Labels[zoneLabel]; return ok && v == t.Name }
	case TargetCluster:
		match = func(c placement.Cluster) bool { return c.Name == t.Name }
	case TargetSelector:
		sel, err := labels.Parse(t.Name)
		if err != nil {
			return nil, &TargetError{Target: t.String(), Why: "the label selector does not parse: " + err.Error()}
		}
		if sel.Empty() {
			return nil, &TargetError{Target: t.String(), Why: "an empty selector would take the whole farm"}
		}
		match = func(c placement.Cluster) bool { return sel.Matches(labels.Set(c.Labels)) }
	default:
		return nil, &TargetError{Target: t.String(), Why: "the kind of target is dc, cluster or selector"}
	}
	lost := map[string]bool{}
	for _, c := range clusters {
		if match(c) {
			lost[c.Name] = true
		}
	}
	if len(lost) == 0 {
		why := "no registered cluster"
		if t.Kind == TargetDC {
			why = fmt.Sprintf("no registered cluster has the label %s=%s", zoneLabel, t.Name)
		}
		return nil, &TargetError{Target: t.String(), Why: why}
	}
	return lost, nil
}

// Plan runs the what-if of t on f.
func Plan(f Farm, t Target) (*Report, error) {
	lost, err := Lost(t, f.Clusters, f.ZoneLabel)
	if err != nil {
		return nil, err
	}
	zoneLabel := cmp.Or(f.ZoneLabel, "dc")
	// The farm without the lost clusters: the lost ones stay listed, not
	// Ready, so that a decision's reasons name them as placement would.
	cands := make([]placement.Cluster, len(f.Clusters))
	index := make(map[string]int, len(f.Clusters))
	labelsOf := make(map[string]map[string]string, len(f.Clusters))
	for i, c := range f.Clusters {
		if c.Free != nil {
			fr := *c.Free
			fr.InFlight = c.Free.InFlight.DeepCopy()
			c.Free = &fr
		}
		if lost[c.Name] {
			c.Ready = false
		}
		cands[i] = c
		index[c.Name] = i
		labelsOf[c.Name] = c.Labels
	}
	before := make([]Figure, len(cands))
	for i, c := range cands {
		before[i] = figure(c)
	}
	var moving []Runnable
	for _, r := range f.Runnables {
		if lost[r.Cluster] {
			moving = append(moving, r)
		}
	}
	// Each namespace's usage with the moving runnables taken off their
	// lost cluster: as they wait in the queue, they count nowhere.
	usage := make(map[string]map[string]corev1.ResourceList, len(f.Usage))
	for ns, byCluster := range f.Usage {
		u := make(map[string]corev1.ResourceList, len(byCluster))
		for c, l := range byCluster {
			u[c] = l.DeepCopy()
		}
		usage[ns] = u
	}
	for _, r := range moving {
		if u := usage[r.Namespace][r.Cluster]; u != nil {
			placement.SubFrom(u, quotaDemand(r.Demand))
		}
		if i, ok := index[r.Cluster]; ok {
			cands[i].Active--
		}
	}
	// The queue's order, shares weighed on the farm that is left.
	total := corev1.ResourceList{}
	for _, c := range cands {
		if c.Ready && c.Free != nil {
			placement.AddTo(total, c.Free.Allocatable)
		}
	}
	shares := map[string]float64{}
	for _, r := range moving {
		if _, ok := shares[r.Namespace]; ok {
			continue
		}
		used := corev1.ResourceList{}
		for _, u := range usage[r.Namespace] {
			placement.AddTo(used, u)
		}
		w := 1.0
		if f.Weight != nil && f.Weight(r.Namespace) > 0 {
			w = f.Weight(r.Namespace)
		}
		shares[r.Namespace] = placement.DominantShare(used, total) / w
	}
	entry := func(r Runnable) placement.QueueEntry {
		return placement.QueueEntry{UID: r.UID, Namespace: r.Namespace, Priority: r.Priority, Share: shares[r.Namespace], Since: r.Since}
	}
	slices.SortStableFunc(moving, func(a, b Runnable) int {
		if c := placement.CompareQueue(entry(a), entry(b)); c != 0 {
			return c
		}
		return strings.Compare(a.UID, b.UID)
	})

	rep := &Report{Target: t, Moves: []Move{}, Unplaceable: []Unplaceable{}}
	farmRate := positive(f.EvictionRate, DefaultEvictionRate)
	zoneRate := positive(f.ZoneRate, DefaultZoneRate)
	wholeZone := wholeZones(f.Clusters, lost, zoneLabel)
	turns := map[string]int{} // moves so far per lost DC
	farmTurns := 0
	short := corev1.ResourceList{}
	never := false
	scratch := make([]placement.Cluster, len(cands))
	for _, r := range moving {
		copy(scratch, cands)
		name := r.Namespace + "/" + r.Name
		if r.Flink && !r.Running && r.RestorePolicy == v1alpha1.RestorePointRequired && r.RestorePoint == nil {
			// A job that does not run cannot be stopped with a savepoint,
			// and the failover waits for a restore point
			// (WaitingRestorePoint): it does not move until one is recorded.
			rep.Unplaceable = append(rep.Unplaceable, Unplaceable{Runnable: name,
				Reason: "its job does not run, so no savepoint can be taken, no restore point is recorded, and statePreservation.restorePoint is Required: the failover waits for one"})
			placement.AddTo(short, r.Demand.Total)
			continue
		}
		if q, ok := f.Quotas[r.Namespace]; ok {
			if over := placement.QuotaVerdict(r.Namespace, q, usage[r.Namespace], labelsOf, r.Demand, scratch); over != "" {
				rep.Unplaceable = append(rep.Unplaceable, Unplaceable{Runnable: name, Reason: over})
				placement.AddTo(short, r.Demand.Total)
				continue
			}
		}
		d := placement.ChooseFor(r.Placement, r.GVK, r.Demand, f.Score, scratch)
		if d.Cluster == "" {
			forGood := d.Never || !d.Capacity
			never = never || forGood
			rep.Unplaceable = append(rep.Unplaceable, Unplaceable{Runnable: name, Reason: d.Reason, Never: forGood})
			placement.AddTo(short, r.Demand.Total)
			continue
		}
		// Reserved before the next is weighed: in flight on the cluster,
		// in the namespace's usage there, one more runnable on it.
		i := index[d.Cluster]
		if fr := cands[i].Free; fr != nil {
			if fr.InFlight == nil {
				fr.InFlight = corev1.ResourceList{}
			}
			placement.AddTo(fr.InFlight, r.Demand.Total)
			fr.InFlightCount++
		}
		cands[i].Active++
		if usage[r.Namespace] == nil {
			usage[r.Namespace] = map[string]corev1.ResourceList{}
		}
		if usage[r.Namespace][d.Cluster] == nil {
			usage[r.Namespace][d.Cluster] = corev1.ResourceList{}
		}
		placement.AddTo(usage[r.Namespace][d.Cluster], quotaDemand(r.Demand))
		// Its turn: the k-th move out of a whole DC waits k/zoneRate, and
		// the farm's bucket bounds every move on top.
		farmTurns++
		at := float64(farmTurns) / farmRate
		if zone, ok := labelsOf[r.Cluster][zoneLabel]; ok && wholeZone[zone] {
			turns[zone]++
			at = math.Max(at, float64(turns[zone])/zoneRate)
		}
		m := Move{Runnable: name, From: r.Cluster, To: d.Cluster, DowntimeSeconds: round(at), Reason: d.Reason}
		if r.Flink {
			m.RestorePoint = r.RestorePoint
			if r.Running {
				// The planned move's stop writes a savepoint, newer than
				// anything recorded: that is what its copy restores from.
				m.RestorePoint = &v1alpha1.RestorePoint{Kind: v1alpha1.RestoreSavepoint, Source: SavepointOfTheStop}
			}
		}
		rep.Moves = append(rep.Moves, m)
		rep.DurationSeconds = math.Max(rep.DurationSeconds, m.DowntimeSeconds)
	}
	for i, c := range cands {
		ch := ClusterChange{Name: c.Name, Before: before[i]}
		if lost[c.Name] {
			ch.Lost = true
		} else {
			after := figure(c)
			ch.After = &after
		}
		rep.Clusters = append(rep.Clusters, ch)
	}
	slices.SortFunc(rep.Clusters, func(a, b ClusterChange) int { return strings.Compare(a.Name, b.Name) })
	switch {
	case len(rep.Unplaceable) == 0:
		rep.Verdict = Absorbed
		rep.Message = fmt.Sprintf("losing %s is absorbed: %d runnables move, the last in %s", t, len(rep.Moves), seconds(rep.DurationSeconds))
	default:
		rep.Short = &Short{Runnables: len(rep.Unplaceable), Requests: placement.Strings(short)}
		rep.Verdict = Partial
		if never {
			rep.Verdict = NotAbsorbed
		}
		rep.Message = shortMessage(t, rep)
	}
	return rep, nil
}

// quotaDemand is what a runnable counts in its namespace's usage: its
// requests and one runnable, as placement.QuotaUsage counts it.
func quotaDemand(d placement.Demand) corev1.ResourceList {
	l := d.Total.DeepCopy()
	if l == nil {
		l = corev1.ResourceList{}
	}
	placement.AddTo(l, corev1.ResourceList{v1alpha1.QuotaRunnables: *resource.NewQuantity(1, resource.DecimalSI)})
	return l
}

// wholeZones says, per DC of a lost cluster, whether the target takes
// all its clusters: the failover controller then evicts from it at the
// secondary rate (a fully disrupted zone).
func wholeZones(clusters []placement.Cluster, lost map[string]bool, zoneLabel string) map[string]bool {
	out := map[string]bool{}
	for _, c := range clusters {
		zone, ok := c.Labels[zoneLabel]
		if !ok {
			continue
		}
		if _, seen := out[zone]; !seen {
			out[zone] = true
		}
		out[zone] = out[zone] && lost[c.Name]
	}
	return out
}

func figure(c placement.Cluster) Figure {
	f := Figure{Runnables: max(c.Active, 0)}
	if c.Free == nil {
		return f
	}
	free := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := c.Free.Free[name].DeepCopy()
		if in, ok := c.Free.InFlight[name]; ok {
			q.Sub(in)
		}
		if _, known := c.Free.Allocatable[name]; known {
			free[name] = q
		}
	}
	f.Free = placement.Strings(free)
	alloc := corev1.ResourceList{}
	for name := range free {
		alloc[name] = c.Free.Allocatable[name]
	}
	f.Allocatable = placement.Strings(alloc)
	return f
}

func shortMessage(t Target, rep *Report) string {
	what := "left queued"
	if rep.Verdict == NotAbsorbed {
		what = "left without a cluster"
	}
	msg := fmt.Sprintf("losing %s is not absorbed: %d of %d runnables %s", t, len(rep.Unplaceable),
		len(rep.Unplaceable)+len(rep.Moves), what)
	if len(rep.Short.Requests) > 0 {
		names := make([]string, 0, len(rep.Short.Requests))
		for n := range rep.Short.Requests {
			names = append(names, n)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + " " + rep.Short.Requests[n]
		}
		msg += ", asking for " + strings.Join(parts, ", ")
	}
	return msg + "; first: " + rep.Unplaceable[0].Runnable + ": " + rep.Unplaceable[0].Reason
}

func positive(v, dflt float64) float64 {
	if v > 0 {
		return v
	}
	return dflt
}

func round(s float64) float64 { return math.Round(s*100) / 100 }

func seconds(s float64) string { return fmt.Sprintf("%gs", s) }
