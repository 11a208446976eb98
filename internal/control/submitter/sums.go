package submitter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// The sums placement weighs (runnables per cluster, the requests in
// flight on each cluster, each namespace's usage per cluster for its
// quota and its fair share) are kept here rather than read from the
// store for every decision, which made a placement's cost grow with the
// work in flight. They are built from the store when first needed and
// rebuilt every SumsResync as a safety net (a difference is logged and
// counted), and changed in between:
//
//   - by this submitter's own moves, applied from the row each commit
//     wrote (write, in reconcile.go);
//   - by everyone else's (the ingester's starts and ends, the
//     controller's evictions, the API's cancels, another replica's
//     placements): the rows changed since the last look, read once a
//     second with the agents' reports (followCapacity). No message
//     announces an end, so this read is the event feed.
//
// Row versions order what is applied: a row read late never undoes a
// newer one. The sums choose; they do not decide alone. The transaction
// that writes a placement re-checks the one cluster chosen and the one
// quota against the store (recheck), with the cluster's and the quota's
// rows locked on PostgreSQL: replicas are not split by a lease (they
// compete for the same messages), so another replica's placement reaches
// these sums up to a second late, and until then the re-check is what
// keeps a decision within a cluster's room and a quota. A re-check that
// disagrees counts a divergence, reads the changes at once and places
// again.

// Defaults of the kept sums.
const (
	// DefaultSumsResync is the period of the full recount.
	DefaultSumsResync = time.Minute
	// changesOverlap is how far before the latest change it saw the
	// read of changes looks again: a row stamped by a writer whose clock
	// is behind, or committed after a later-stamped one, is not missed.
	changesOverlap = 5 * time.Second
)

// keptRunnable is one active runnable as the sums count it.
type keptRunnable struct {
	namespace, cluster, phase string
	updated                   time.Time
	// req is its status.requests; ok is false when there is no status or
	// it does not decode (it then counts in no in-flight figure, and in
	// its quota as a runnable asking for nothing, as the store's counts
	// did).
	req corev1.ResourceList
	ok  bool
}

// sumsState is the sums over a set of active runnables.
type sumsState struct {
	byUID map[string]*keptRunnable
	// active counts the runnables on each cluster.
	active map[string]int
	// pending sums, per cluster, the Scheduled and Submitted ones: in
	// flight whatever the report.
	pending map[string]*flightSum
	// running holds, per cluster, the Running ones that may still count
	// in flight (changed less than InFlightMargin before the report);
	// those older than the report are dropped as figures are computed.
	running map[string]map[string]*keptRunnable
	// usage is each namespace's usage per cluster, as its quota counts it
	// (placement.QuotaUsage: requests, and one runnable each).
	usage map[string]map[string]corev1.ResourceList
	// all sums, per cluster, every active runnable: what counts against a
	// report that says what it counted of purser's pods.
	all map[string]*flightSum
}

type flightSum struct {
	req corev1.ResourceList
	n   int
}

func newSumsState() *sumsState {
	return &sumsState{byUID: map[string]*keptRunnable{}, active: map[string]int{}, pending: map[string]*flightSum{},
		running: map[string]map[string]*keptRunnable{}, usage: map[string]map[string]corev1.ResourceList{},
		all: map[string]*flightSum{}}
}

func isActive(phase string) bool { return slices.Contains(activePhases, phase) }

func keep(rs *store.RunnableState) *keptRunnable {
	k := &keptRunnable{namespace: rs.Namespace, cluster: rs.Cluster, phase: rs.Phase, updated: rs.UpdatedAt}
	var st v1alpha1.RunnableStatus
	if len(rs.Status) > 0 && json.Unmarshal(rs.Status, &st) == nil {
		if req, err := placement.ParseList(st.Requests); err == nil {
			k.req, k.ok = req, true
		}
	}
	return k
}

var oneRunnable = corev1.ResourceList{v1alpha1.QuotaRunnables: *resource.NewQuantity(1, resource.DecimalSI)}

func (st *sumsState) add(uid string, k *keptRunnable) {
	st.byUID[uid] = k
	if k.cluster != "" {
		st.active[k.cluster]++
	}
	byCluster := st.usage[k.namespace]
	if byCluster == nil {
		byCluster = map[string]corev1.ResourceList{}
		st.usage[k.namespace] = byCluster
	}
	u := byCluster[k.cluster]
	if u == nil {
		u = corev1.ResourceList{}
		byCluster[k.cluster] = u
	}
	placement.AddTo(u, oneRunnable)
	if !k.ok {
		return
	}
	placement.AddTo(u, k.req)
	a := st.all[k.cluster]
	if a == nil {
		a = &flightSum{req: corev1.ResourceList{}}
		st.all[k.cluster] = a
	}
	placement.AddTo(a.req, k.req)
	a.n++
	switch k.phase {
	case string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted):
		p := st.pending[k.cluster]
		if p == nil {
			p = &flightSum{req: corev1.ResourceList{}}
			st.pending[k.cluster] = p
		}
		placement.AddTo(p.req, k.req)
		p.n++
	case string(v1alpha1.PhaseRunning):
		r := st.running[k.cluster]
		if r == nil {
			r = map[string]*keptRunnable{}
			st.running[k.cluster] = r
		}
		r[uid] = k
	}
}

func (st *sumsState) remove(uid string) {
	k := st.byUID[uid]
	if k == nil {
		return
	}
	delete(st.byUID, uid)
	if k.cluster != "" {
		st.active[k.cluster]--
		if st.active[k.cluster] <= 0 {
			delete(st.active, k.cluster)
		}
	}
	u := st.usage[k.namespace][k.cluster]
	placement.SubFrom(u, oneRunnable)
	if !k.ok {
		return
	}
	placement.SubFrom(u, k.req)
	if a := st.all[k.cluster]; a != nil {
		placement.SubFrom(a.req, k.req)
		a.n--
		if a.n <= 0 {
			delete(st.all, k.cluster)
		}
	}
	switch k.phase {
	case string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted):
		if p := st.pending[k.cluster]; p != nil {
			placement.SubFrom(p.req, k.req)
			p.n--
			if p.n <= 0 {
				delete(st.pending, k.cluster)
			}
		}
	case string(v1alpha1.PhaseRunning):
		delete(st.running[k.cluster], uid)
	}
}

// free is cluster's figure for placement under its report c: what the
// report has free, less what is in flight there. With prune, the Running
// ones the report counts already are dropped for good (reports only move
// forward; a change of the runnable brings it back).
func (st *sumsState) free(cluster string, c reportFigure, margin time.Duration, prune bool) *placement.Free {
	if c.Runnables != nil {
		return st.freeCountedOnce(cluster, c)
	}
	f := &placement.Free{Allocatable: c.Allocatable, Free: c.Free, NodeMax: c.NodeMax}
	if p := st.pending[cluster]; p != nil && p.n > 0 {
		f.InFlight = corev1.ResourceList{}
		placement.AddTo(f.InFlight, p.req)
		f.InFlightCount = p.n
	}
	cutoff := c.At.Add(-margin)
	for uid, k := range st.running[cluster] {
		if !k.updated.After(cutoff) {
			// Seen running before the report was made: its pods are in it.
			if prune {
				delete(st.running[cluster], uid)
			}
			continue
		}
		if f.InFlight == nil {
			f.InFlight = corev1.ResourceList{}
		}
		placement.AddTo(f.InFlight, k.req)
		f.InFlightCount++
	}
	return f
}

// freeCountedOnce is free under a report that says what it counted of
// purser's pods: that is given back to its free figure, and every active
// runnable on the cluster taken off instead, whatever its pods' state,
// so that a runnable counts once, never in flight and in the report
// both. A pod the report counts whose runnable is no longer active (its
// copy being removed after an eviction) is given back too: the figure
// errs by what such copies hold, until they are gone.
func (st *sumsState) freeCountedOnce(cluster string, c reportFigure) *placement.Free {
	f := &placement.Free{Allocatable: c.Allocatable, Free: c.freeOfPurser(), NodeMax: c.NodeMax}
	if a := st.all[cluster]; a != nil && a.n > 0 {
		f.InFlight = a.req.DeepCopy()
		f.InFlightCount = a.n
	}
	return f
}

// reportFigure is a decoded capacity report and when it was made.
type reportFigure struct {
	At                         time.Time
	Allocatable, Free, NodeMax corev1.ResourceList
	// Runnables is what the report counted of purser's pods; nil when
	// it does not say.
	Runnables *stream.RunnablePods
}

// freeOfPurser is the report's free figure with purser's pods given
// back, never above the allocatable.
func (c reportFigure) freeOfPurser() corev1.ResourceList {
	free := c.Free.DeepCopy()
	if free == nil {
		free = corev1.ResourceList{}
	}
	placement.AddTo(free, c.Runnables.Requests)
	for name, q := range free {
		if a, ok := c.Allocatable[name]; ok && q.Cmp(a) > 0 {
			free[name] = a.DeepCopy()
		}
	}
	return free
}

// keptSums are the sums and what orders their changes.
type keptSums struct {
	mu sync.Mutex
	st *sumsState // nil until built
	// seen is the row version last applied per runnable (ended ones
	// too, for a while), so that a row read late is not applied over a
	// newer one.
	seen map[string]seenRow
	// hw is the latest change applied from a read of changes, or when
	// the last recount started.
	hw time.Time
}

type seenRow struct {
	rv      int64
	updated time.Time
}

// apply counts rs as it now is, unless a newer version of it was
// applied already. Nothing happens before the first build, which reads
// everything.
func (ks *keptSums) apply(rs *store.RunnableState) bool {
	if ks.st == nil {
		return false
	}
	if s, ok := ks.seen[rs.UID]; ok && s.rv >= rs.ResourceVersion {
		return false
	}
	ks.seen[rs.UID] = seenRow{rv: rs.ResourceVersion, updated: rs.UpdatedAt}
	_, was := ks.st.byUID[rs.UID]
	ks.st.remove(rs.UID)
	if isActive(rs.Phase) {
		ks.st.add(rs.UID, keep(rs))
	}
	return was || isActive(rs.Phase)
}

// applyWritten counts a row this submitter has just committed.
func (s *Submitter) applyWritten(rec *store.Runnable) {
	s.sums.mu.Lock()
	defer s.sums.mu.Unlock()
	s.sums.apply(&store.RunnableState{UID: rec.UID, Namespace: rec.Namespace, Cluster: rec.Cluster, Phase: rec.Phase,
		UpdatedAt: rec.UpdatedAt, Status: rec.Status, ResourceVersion: rec.ResourceVersion})
}

// ensureSums builds the sums if they are not yet.
func (s *Submitter) ensureSums(ctx context.Context) error {
	s.sums.mu.Lock()
	built := s.sums.st != nil
	s.sums.mu.Unlock()
	if built {
		return nil
	}
	return s.recount(ctx)
}

// recount builds the sums afresh from the store and, when they were
// built already, logs and counts how the kept ones differed. The lock is
// held across the read, so that no commit of this submitter is applied
// to the sums being replaced and lost.
func (s *Submitter) recount(ctx context.Context) error {
	ks := &s.sums
	ks.mu.Lock()
	defer ks.mu.Unlock()
	start := time.Now()
	var rows []store.RunnableState
	var reports map[string]store.CapacityReport
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.Runnables().ActiveStates(ctx); err != nil {
			return err
		}
		reports, err = tx.Agents().Capacities(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("recount the placement sums: %w", err)
	}
	fresh := newSumsState()
	seen := make(map[string]seenRow, len(rows))
	for i := range rows {
		fresh.add(rows[i].UID, keep(&rows[i]))
		seen[rows[i].UID] = seenRow{rv: rows[i].ResourceVersion, updated: rows[i].UpdatedAt}
	}
	if ks.st != nil {
		if diff := diffSums(ks.st, fresh, s.decodedReports(reports), s.cfg.InFlightMargin); diff != "" {
			s.metrics.sumsDivergence.WithLabelValues("recount").Inc()
			s.log.Warn("the kept placement sums differed from a recount; replaced", "difference", diff)
		}
	}
	ks.st, ks.seen, ks.hw = fresh, seen, start
	return nil
}

// resyncSums is the periodic recount.
func (s *Submitter) resyncSums(ctx context.Context) {
	if err := s.recount(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("recount of the placement sums failed; the next period tries again", "error", err)
	}
}

// catchUp applies the rows changed since the last look; freed says
// whether a runnable stopped counting (room or quota may have freed).
func (s *Submitter) catchUp(ctx context.Context) (freed bool, err error) {
	ks := &s.sums
	ks.mu.Lock()
	built, since := ks.st != nil, ks.hw.Add(-changesOverlap)
	ks.mu.Unlock()
	if !built {
		return true, s.recount(ctx)
	}
	var rows []store.RunnableState
	err = s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.Runnables().ChangedSince(ctx, since)
		return err
	})
	if err != nil {
		return false, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for i := range rows {
		r := &rows[i]
		if r.UpdatedAt.After(ks.hw) {
			ks.hw = r.UpdatedAt
		}
		_, was := ks.st.byUID[r.UID]
		if ks.apply(r) && was && !isActive(r.Phase) {
			freed = true
		}
	}
	// A row no read can return older than the window any more needs no
	// version kept once it stopped counting.
	forget := ks.hw.Add(-3 * changesOverlap)
	for uid, sr := range ks.seen {
		if _, on := ks.st.byUID[uid]; !on && sr.updated.Before(forget) {
			delete(ks.seen, uid)
		}
	}
	return freed, nil
}

// keptFigures is, per cluster whose agent reported, what it has free
// less what is in flight there, from the kept sums.
func (s *Submitter) keptFigures(reports map[string]store.CapacityReport) map[string]*placement.Free {
	figs := s.decodedReports(reports)
	if len(figs) == 0 {
		return nil
	}
	out := make(map[string]*placement.Free, len(figs))
	counting := false
	s.sums.mu.Lock()
	for cluster, c := range figs {
		f := s.sums.st.free(cluster, c, s.cfg.InFlightMargin, true)
		// Only figures counted by time change as time passes.
		counting = counting || (c.Runnables == nil && f.InFlightCount > 0)
		out[cluster] = f
	}
	s.sums.mu.Unlock()
	if counting {
		// While some placement still counts, the waiting are looked at
		// again (each look extends this), so that they see it stop
		// counting even when no report changes.
		s.capacity.mu.Lock()
		s.capacity.extendInFlight(time.Now().Add(s.cfg.InFlightMargin + 2*s.cfg.CapacityInterval))
		s.capacity.mu.Unlock()
	}
	return out
}

// decodedReports decodes each report (once per change of its bytes).
func (s *Submitter) decodedReports(reports map[string]store.CapacityReport) map[string]reportFigure {
	out := make(map[string]reportFigure, len(reports))
	for cluster, r := range reports {
		c, ok := s.figures.report(cluster, r.Report)
		if !ok {
			s.log.Error("capacity report does not decode; cluster taken as not reported", "cluster", cluster)
			continue
		}
		out[cluster] = reportFigure{At: r.At, Allocatable: c.Allocatable, Free: c.Free, NodeMax: c.NodeMax, Runnables: c.Runnables}
	}
	return out
}

// activeCounts is a copy of the runnables per cluster.
func (s *Submitter) activeCounts() map[string]int {
	s.sums.mu.Lock()
	defer s.sums.mu.Unlock()
	out := make(map[string]int, len(s.sums.st.active))
	for c, n := range s.sums.st.active {
		out[c] = n
	}
	return out
}

// usageByCluster is a copy of namespace's usage per cluster.
func (s *Submitter) usageByCluster(namespace string) map[string]corev1.ResourceList {
	s.sums.mu.Lock()
	defer s.sums.mu.Unlock()
	out := map[string]corev1.ResourceList{}
	for c, u := range s.sums.st.usage[namespace] {
		out[c] = u.DeepCopy()
	}
	return out
}

// diffSums says how a and b differ, for the reports given; "" when they
// do not. Zero and absent are the same.
func diffSums(a, b *sumsState, reports map[string]reportFigure, margin time.Duration) string {
	var out []string
	for _, c := range keysOf(a.active, b.active) {
		if a.active[c] != b.active[c] {
			out = append(out, fmt.Sprintf("cluster %s: %d runnables kept, %d counted", c, a.active[c], b.active[c]))
		}
	}
	for _, ns := range keysOf(a.usage, b.usage) {
		for _, c := range keysOf(a.usage[ns], b.usage[ns]) {
			if d := diffList(a.usage[ns][c], b.usage[ns][c]); d != "" {
				out = append(out, fmt.Sprintf("namespace %s on cluster %q: usage %s", ns, c, d))
			}
		}
	}
	clusters := make([]string, 0, len(reports))
	for c := range reports {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		fa, fb := a.free(c, reports[c], margin, false), b.free(c, reports[c], margin, false)
		if fa.InFlightCount != fb.InFlightCount {
			out = append(out, fmt.Sprintf("cluster %s: %d in flight kept, %d counted", c, fa.InFlightCount, fb.InFlightCount))
		}
		if d := diffList(fa.InFlight, fb.InFlight); d != "" {
			out = append(out, fmt.Sprintf("cluster %s: in flight %s", c, d))
		}
	}
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("and %d more", len(out)-10))
	}
	return strings.Join(out, "; ")
}

// diffList says how two resource lists differ ("" when they do not),
// kept first.
func diffList(a, b corev1.ResourceList) string {
	var out []string
	for _, name := range keysOf(a, b) {
		qa, qb := a[name], b[name]
		if qa.Cmp(qb) != 0 {
			out = append(out, fmt.Sprintf("%s %s kept, %s counted", name, qa.String(), qb.String()))
		}
	}
	return strings.Join(out, ", ")
}

func keysOf[K ~string, V any](a, b map[K]V) []K {
	var out []K
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Figures are the placement sums of a snapshot of the farm, built as a
// recount builds them: what each reporting cluster has free less what is
// in flight there, the runnables on each cluster, and each namespace's
// usage per cluster. The drill's what-if weighs a farm with them, so
// that it sees exactly what the submitter would.
type Figures struct {
	Free   map[string]*placement.Free
	Active map[string]int
	// Usage is namespace -> cluster -> usage, as quotas count it.
	Usage map[string]map[string]corev1.ResourceList
}

// SnapshotFigures is Figures of the active runnables rows and the
// agents' reports, with margin the in-flight margin
// (DefaultInFlightMargin unless configured). A report that does not
// decode leaves its cluster without a free figure, as for placement.
func SnapshotFigures(rows []store.RunnableState, reports map[string]store.CapacityReport, margin time.Duration) Figures {
	st := newSumsState()
	for i := range rows {
		st.add(rows[i].UID, keep(&rows[i]))
	}
	f := Figures{Free: map[string]*placement.Free{}, Active: st.active, Usage: st.usage}
	for cluster, r := range reports {
		var c stream.Capacity
		if json.Unmarshal(r.Report, &c) != nil {
			continue
		}
		fig := reportFigure{At: r.At, Allocatable: c.Allocatable, Free: c.Free, NodeMax: c.NodeMax, Runnables: c.Runnables}
		f.Free[cluster] = st.free(cluster, fig, margin, false)
	}
	return f
}
