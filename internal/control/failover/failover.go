// Package failover moves runnables off failed clusters and away from
// failed applications, carrying their preserved state, and removes the
// copies they leave behind. It is the work half of `purser controller`;
// the cluster health it reacts to (conditions and taints) comes from
// internal/member/clusters.
//
// Every pass reads the truth from the database: the runnables that occupy
// a cluster, their clusters' taints and agent heartbeats, and the clock of
// each unhealthy object (status.unhealthySince). Each change is one
// optimistic transaction with its audit entry, so a controller restarted
// at any point, or two of them, never evict an attempt twice.
package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/dependson"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Actor is the audit log's name for the controller.
const Actor = "controller"

// Defaults of Config.
const (
	DefaultInterval      = time.Second
	DefaultAgentLease    = 30 * time.Second
	DefaultFencingMargin = 10 * time.Second
	DefaultEvictionRate  = 20.0 // evictions per second
)

// Store is the database as the failover controller uses it: its transactions.
type Store = store.Transactor

// Config is what the failover controller needs.
type Config struct {
	Store Store
	// Objects deletes the copies left on clusters.
	Objects *clusters.Objects
	// Interval between passes. Default 1 s.
	Interval time.Duration
	// AgentLease must match the agents' --lease-duration. Default 30 s.
	AgentLease time.Duration
	// FencingMargin is waited beyond AgentLease before an AtMostOne
	// runnable leaves an unreachable cluster. Default 10 s.
	FencingMargin time.Duration
	// NoExecuteGrace is the cluster health policy's, for the messages of
	// runnables on a cluster not Ready yet tainted. Default
	// clusters.DefaultNoExecuteGrace.
	NoExecuteGrace time.Duration
	// EvictionRate bounds evictions per second (burst: the same number),
	// so that a whole cluster failing does not storm the others. Default 20.
	EvictionRate float64
	Logger       *slog.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Notify, when set, wakes the outbox relay after a failover queued a
	// runnable (purser up runs the relay in the same process); nil: the
	// relay's poll finds the message within its interval.
	Notify func()
	// Checkpoints resolves the newest completed checkpoint of a job for
	// runnables that ask for a restore point; nil: only the restore points
	// the operator reports are known.
	Checkpoints CheckpointResolver
	// SecondaryEvictionRate bounds evictions from a disrupted zone, per
	// zone (zones.go). Default a tenth of EvictionRate's default.
	SecondaryEvictionRate float64
	// ZoneLabel is the cluster label naming its zone; default "dc".
	ZoneLabel string
	// MoveTimeout bounds the wait for the savepoint of a planned move;
	// after it the job is put back to running. Default 5 min.
	MoveTimeout time.Duration
	// MoveGrace bounds how long the copy a planned move stopped with a
	// savepoint stays once the next attempt was placed, if that one never
	// runs. Default 1 h.
	MoveGrace time.Duration
	// Guard, when set, skips every pass while this process does not reach
	// the database's primary: no eviction, removal or resume on state
	// that may be stale.
	Guard *guard.Guard
}

// Controller evicts, re-places and cleans up.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	limiter *rate.Limiter
	zones   *zoneLimiters
	metrics *metrics
	// queue is Run's while it runs, for Kick.
	queue atomic.Pointer[reconcile.Queue[struct{}]]
	// wake is the earliest end of a toleration seen in the current pass;
	// only the pass uses it, one at a time.
	wake time.Time
}

// New returns a controller with cfg's defaults filled in.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.AgentLease <= 0 {
		cfg.AgentLease = DefaultAgentLease
	}
	if cfg.FencingMargin <= 0 {
		cfg.FencingMargin = DefaultFencingMargin
	}
	if cfg.NoExecuteGrace <= 0 {
		cfg.NoExecuteGrace = clusters.DefaultNoExecuteGrace
	}
	if cfg.EvictionRate <= 0 {
		cfg.EvictionRate = DefaultEvictionRate
	}
	if cfg.MoveTimeout <= 0 {
		cfg.MoveTimeout = DefaultMoveTimeout
	}
	if cfg.MoveGrace <= 0 {
		cfg.MoveGrace = DefaultMoveGrace
	}
	if cfg.SecondaryEvictionRate <= 0 {
		cfg.SecondaryEvictionRate = DefaultSecondaryEvictionRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	burst := max(1, int(cfg.EvictionRate))
	return &Controller{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "failover"),
		limiter: rate.NewLimiter(rate.Limit(cfg.EvictionRate), burst),
		zones:   newZoneLimiters(cfg.EvictionRate, cfg.SecondaryEvictionRate),
		metrics: newMetrics(cfg.Registerer),
	}
}

// Run makes passes every Interval until ctx ends, and one more at the
// moment a runnable's toleration runs out, so that application failover
// starts on time rather than up to an Interval late. A pass that fails is
// logged and the next one tries again; while the Guard says this process
// does not reach the database's primary, the passes are skipped.
func (c *Controller) Run(ctx context.Context) error {
	c.log.Info("failover controller started", "interval", c.cfg.Interval, "agentLease", c.cfg.AgentLease,
		"fencingMargin", c.cfg.FencingMargin, "evictionRate", c.cfg.EvictionRate)
	q := reconcile.New(func(ctx context.Context, _ struct{}) (reconcile.Result, error) {
		if c.cfg.Guard.Err() == nil { // the guard logs when it is not
			if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("failover pass failed; trying again", "error", err)
			}
		}
		wait := c.cfg.Interval
		if next := c.wake; !next.IsZero() {
			wait = min(wait, max(time.Until(next), time.Millisecond))
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	}, reconcile.Config[struct{}]{Name: "failover"})
	c.queue.Store(q)
	defer c.queue.CompareAndSwap(q, nil)
	q.Add(struct{}{})
	return q.Run(ctx)
}

// Kick makes the next pass start now: the health monitor calls it when it
// has tainted a cluster NoExecute.
func (c *Controller) Kick() {
	if q := c.queue.Load(); q != nil {
		q.Add(struct{}{})
	}
}

// Pass looks once at every runnable that occupies a cluster, then at
// every copy left to remove.
func (c *Controller) Pass(ctx context.Context) error {
	c.wake = time.Time{}
	views, err := c.clusterViews(ctx)
	if err != nil {
		return err
	}
	scanErr := c.scan(ctx, views)
	cleanErr := c.cleanup(ctx, views)
	leftErr := c.removeLeftovers(ctx, views)
	retainErr := c.retain(ctx)
	err = errors.Join(scanErr, cleanErr, leftErr, retainErr)
	if err == nil {
		c.metrics.passes.Inc()
	}
	return err
}

// wakeAt asks for a pass at t, if it is earlier than any asked for.
func (c *Controller) wakeAt(t time.Time) {
	if !t.IsZero() && (c.wake.IsZero() || t.Before(c.wake)) {
		c.wake = t
	}
}

// notify tells the outbox relay that a submission waits, when one runs
// in this process (purser up); elsewhere its poll finds it.
func (c *Controller) notify() {
	if c.cfg.Notify != nil {
		c.cfg.Notify()
	}
}

// occupying are the phases of a runnable whose attempt is on a cluster.
var occupying = []string{string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted), string(v1alpha1.PhaseRunning)}

const pageSize = 500

func (c *Controller) scan(ctx context.Context, views map[string]*clusterView) error {
	var after int64
	for {
		var page []*store.Runnable
		err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			page, err = tx.Runnables().ListInPhases(ctx, occupying, after, pageSize)
			return err
		})
		if err != nil {
			return err
		}
		for _, rec := range page {
			if err := c.consider(ctx, rec, views); err != nil {
				c.log.Warn("failover of runnable failed; trying again next pass",
					"runnable", rec.Namespace+"/"+rec.Name, "error", err)
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// consider decides about one runnable and acts on the decision.
func (c *Controller) consider(ctx context.Context, rec *store.Runnable, views map[string]*clusterView) error {
	r, err := readRunnable(rec)
	if err != nil {
		return err
	}
	view := views[rec.Cluster]
	if view == nil {
		return nil // a removed cluster: the submitter places it again
	}
	if handled, err := c.move(ctx, rec, r, view); handled || err != nil {
		return err
	}
	if rec.Phase == string(v1alpha1.PhaseScheduled) &&
		(attempt.Consistency(&r.doc.Spec) != v1alpha1.ConsistencyAtMostOne || view.failover.Reachable) {
		// The submitter is creating it, and places it again if that
		// fails. Only an AtMostOne create sent to a cluster that stopped
		// answering is left here: it may have landed, so the runnable
		// leaves as it would leave a running copy.
		return nil
	}
	v := Decide(&r.doc.Spec, &r.status, view.failover, c.cfg.Now(), c.timing())
	if !v.Evict {
		return c.stay(ctx, rec, r, view, v)
	}
	gvk, err := r.gvk()
	if err != nil {
		return err
	}
	p := attempt.Excluding(r.doc.Spec.Placement, rec.Cluster)
	targets, err := c.withDependencies(ctx, rec.Namespace, r.doc.Spec.DependsOn, placementViews(views))
	if err != nil {
		return err
	}
	target := placement.Choose(p, gvk.String(), targets)
	if target.Cluster == "" {
		c.metrics.blocked.Inc()
		return c.setWaiting(ctx, rec, r, v1alpha1.WaitingTarget, fmt.Sprintf("%s; it stays on %s because no other cluster is eligible (%s); it moves as soon as one is",
			v.Message, rec.Cluster, target.Reason))
	}
	if view.disrupted == clusters.ReasonFarmDisruption {
		c.metrics.blocked.Inc()
		return c.setWaiting(ctx, rec, r, v1alpha1.WaitingEvictionsStopped,
			fmt.Sprintf("%s; it stays on %s because evictions are stopped: %s", v.Message, rec.Cluster, view.disruption))
	}
	// The eviction's turn is seen before its restore points are looked
	// up (in the inventory and checkpoint storage), and taken after: a
	// lost cluster's whole load waits its turn here, and must not cost
	// every pass a lookup per runnable.
	if !c.zones.hasTurn(view.zone, view.disrupted, c.limiter) {
		c.metrics.rateLimited.Inc()
		return nil // the next pass takes it
	}
	if v.TrustsFencing {
		a, err := c.openAttempt(ctx, rec)
		if errors.Is(err, store.ErrMoved) {
			return nil
		}
		if err != nil {
			return err
		}
		if hold := HoldLateCreate(v, view.failover, a.Number, a.CreateLandedBy, c.cfg.Now(), c.timing()); hold != nil {
			return c.stay(ctx, rec, r, view, *hold)
		}
	}
	var candidates []v1alpha1.RestorePoint
	if policy := restorePolicy(&r.doc.Spec); policy != "" {
		// Only an attempt that ran Healthy has restore points to offer;
		// without one the earlier restore point (if any) is carried.
		why := "the attempt never ran Healthy"
		if r.status.HealthySince != nil {
			candidates, why = c.restoreCandidates(ctx, rec, r.doc.Spec.Template, r.status.Result)
		}
		if policy == v1alpha1.RestorePointRequired && len(candidates) == 0 && r.status.RestorePoint == nil {
			c.metrics.blocked.Inc()
			return c.setWaiting(ctx, rec, r, v1alpha1.WaitingRestorePoint, waitingForRestorePoint(v, rec.Cluster, why))
		}
	}
	if !c.zones.take(view.zone, view.disrupted, c.limiter) {
		c.metrics.rateLimited.Inc()
		return nil
	}
	return c.evict(ctx, rec, r, v, candidates)
}

func (c *Controller) timing() Timing {
	return Timing{AgentLease: c.cfg.AgentLease, FencingMargin: c.cfg.FencingMargin, NoExecuteGrace: c.cfg.NoExecuteGrace,
		AgentReadPeriod: AgentReadPeriod(c.cfg.AgentLease)}
}

// stay acts on a verdict that keeps the runnable where it is: it records
// what a failover that cannot happen yet waits for, clears a wait that is
// over, or resumes a copy its agent fenced on a cluster Ready again.
func (c *Controller) stay(ctx context.Context, rec *store.Runnable, r *runnable, view *clusterView, v Verdict) error {
	c.wakeAt(v.Until)
	if v.Overridable {
		v.Message += fmt.Sprintf("; if you made sure that copy no longer runs, `purser failover runnable %s -n %s --confirm-stopped` moves it now",
			rec.Name, rec.Namespace)
	}
	switch {
	case v.HealthUnknown:
		return c.setUnknown(ctx, rec, r, v.Waiting, v.Message)
	case v.Message != "":
		return c.setWaiting(ctx, rec, r, v.Waiting, v.Message)
	case r.status.Waiting == v1alpha1.WaitingClusterNotReady,
		r.status.Waiting != "" && r.status.Health == v1alpha1.HealthUnknown:
		// A wait that began with its cluster not Ready (which made the
		// health Unknown) may have turned into another on the way (a
		// NoExecute taint with no target to move to): when it ends, the
		// health is what was last observed, not left Unknown.
		return c.readyAgain(ctx, rec, r)
	case r.status.Waiting == v1alpha1.WaitingTarget:
		// What held the runnable is over: say so, rather than leave a
		// wait that no longer holds.
		return c.setWaiting(ctx, rec, r, "", fmt.Sprintf("it no longer needs to move; it is %s on %s", rec.Phase, rec.Cluster))
	case r.status.Waiting != "":
		return c.setWaiting(ctx, rec, r, "", fmt.Sprintf("cluster %s answers again, so nothing holds the runnable back any more; it is %s there",
			rec.Cluster, rec.Phase))
	case r.status.Fenced && view.placement.Ready:
		return c.resume(ctx, rec, r, view)
	}
	return nil
}

// openAttempt reads the runnable's attempt on its cluster; store.ErrMoved
// when it has none open there (the runnable moved on meanwhile).
func (c *Controller) openAttempt(ctx context.Context, rec *store.Runnable) (*store.Attempt, error) {
	var attempts []*store.Attempt
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		attempts, err = tx.Attempts().List(ctx, rec.UID)
		return err
	})
	if err != nil {
		return nil, err
	}
	n := len(attempts)
	if n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].Cluster != rec.Cluster {
		return nil, store.ErrMoved
	}
	return attempts[n-1], nil
}

// runnable is a stored runnable decoded.
type runnable struct {
	doc    store.Document[v1alpha1.RunnableSpec]
	status v1alpha1.RunnableStatus
}

func readRunnable(rec *store.Runnable) (*runnable, error) {
	r := &runnable{}
	if err := json.Unmarshal(rec.Spec, &r.doc); err != nil {
		return nil, fmt.Errorf("runnable %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
	}
	lr, err := lifecycle.Decode(rec)
	if err != nil {
		return nil, err
	}
	r.status = lr.Status
	return r, nil
}

func (r *runnable) gvk() (schema.GroupVersionKind, error) {
	apiVersion, _ := r.doc.Spec.Template["apiVersion"].(string)
	kind, _ := r.doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || apiVersion == "" || kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("template has no valid apiVersion and kind")
	}
	return gv.WithKind(kind), nil
}

// clusterView is one registered cluster as the controller sees it.
type clusterView struct {
	row       *store.Cluster
	failover  Cluster
	placement placement.Cluster
	// zone is the cluster's zone; disrupted the reason of its Disrupted
	// condition and disruption its message (zones.go).
	zone, disrupted, disruption string
}

// clusterViews reads every cluster with its taints, readiness and agent
// heartbeat, in one transaction.
func (c *Controller) clusterViews(ctx context.Context) (map[string]*clusterView, error) {
	var rows []*store.Cluster
	var agents map[string]store.AgentFreshness
	var hubLeases map[string]time.Time
	var dbNow time.Time
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.Clusters().List(ctx); err != nil {
			return err
		}
		if hubLeases, dbNow, err = tx.Clusters().HubLeases(ctx); err != nil {
			return err
		}
		agents, err = tx.Agents().ListFreshness(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The hub's renewals are recorded by the database's clock; moved to
	// this controller's by the offset measured at the read, rounded to the
	// second so that a wait's message, which quotes them, does not change
	// from pass to pass with the read's latency (the margin covers the
	// rounding).
	offset := c.cfg.Now().Sub(dbNow).Round(time.Second)
	var newest *time.Time
	for _, a := range agents {
		if a.LastHeartbeat != nil && (newest == nil || a.LastHeartbeat.After(*newest)) {
			newest = a.LastHeartbeat
		}
	}
	stale := newest != nil && c.cfg.Now().Sub(*newest) > c.cfg.AgentLease
	out := make(map[string]*clusterView, len(rows))
	for _, row := range rows {
		var spec store.Document[v1alpha1.ClusterSpec]
		var status v1alpha1.ClusterStatus
		if err := json.Unmarshal(row.Spec, &spec); err != nil {
			c.log.Error("cluster spec does not decode; cluster skipped", "cluster", row.Name, "error", err)
			continue
		}
		if len(row.Status) > 0 {
			if err := json.Unmarshal(row.Status, &status); err != nil {
				c.log.Error("cluster status does not decode; cluster skipped", "cluster", row.Name, "error", err)
				continue
			}
		}
		taints := append(append([]corev1.Taint(nil), spec.Spec.Taints...), status.Taints...)
		ready := clusters.ReadyCondition(status)
		v := &clusterView{
			row: row,
			failover: Cluster{
				Name:   row.Name,
				Taints: taints,
				// Unknown is what an unreachable kube-apiserver gives; a
				// cluster never probed yet counts as reachable.
				Reachable:       ready == nil || ready.Status != metav1.ConditionUnknown,
				HeartbeatsStale: stale,
			},
			placement: placement.Cluster{
				Name: row.Name, Labels: row.Labels, Taints: taints,
				Ready: ready == nil || ready.Status == metav1.ConditionTrue,
			},
			zone: clusters.DisruptionPolicy{ZoneLabel: c.cfg.ZoneLabel}.Zone(row.Labels),
		}
		if ready != nil && ready.Status != metav1.ConditionTrue && ready.Reason != clusters.ReasonNotProbedYet {
			nr := *ready
			v.failover.NotReady = &nr
		}
		if d := clusters.DisruptedCondition(status); d != nil {
			v.disrupted, v.disruption = d.Reason, d.Message
		}
		if until, ok := hubLeases[row.Name]; ok {
			until = until.Add(offset)
			v.failover.HubLeaseUntil = &until
		}
		if a, ok := agents[row.Name]; ok && a.LastHeartbeat != nil {
			v.failover.LastHeartbeat = a.LastHeartbeat
			var k v1alpha1.AgentKubeAPI
			if len(a.KubeAPI) > 0 && json.Unmarshal(a.KubeAPI, &k) == nil {
				v.failover.AgentReachesKubeAPI = &k.Connected
			}
		}
		out[row.Name] = v
	}
	return out, nil
}

// withDependencies marks in cs what each cluster lacks of deps
// (spec.dependsOn): a failover target must have them too, and a refused
// move names what is missing where.
func (c *Controller) withDependencies(ctx context.Context, namespace string, deps []v1alpha1.Dependency, cs []placement.Cluster) ([]placement.Cluster, error) {
	if len(deps) == 0 {
		return cs, nil
	}
	names := make([]string, len(cs))
	for i := range cs {
		names[i] = cs[i].Name
	}
	var lacks map[string]string
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		lacks, err = dependson.Lacks(ctx, tx, namespace, deps, names)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range cs {
		cs[i].Lacks = lacks[cs[i].Name]
	}
	return cs, nil
}

func placementViews(views map[string]*clusterView) []placement.Cluster {
	out := make([]placement.Cluster, 0, len(views))
	for _, v := range views {
		out = append(out, v.placement)
	}
	return out
}

// metrics of the failover controller.
type metrics struct {
	evictions   *prometheus.CounterVec
	purged      prometheus.Counter
	blocked     prometheus.Counter
	rateLimited prometheus.Counter
	retained    prometheus.Counter
	passes      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_failover_evictions_total", Help: "Attempts evicted, by reason.",
		}, []string{"reason"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purser_failover_purged_total", Help: "Old copies removed from their clusters.",
		}),
		blocked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purser_failover_blocked_total", Help: "Evictions held back because no other cluster was eligible.",
		}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purser_failover_rate_limited_total", Help: "Evictions postponed to a later pass by the eviction rate limit.",
		}),
		retained: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purser_retention_removed_total", Help: "Ended runnables removed once their retention had passed.",
		}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purser_failover_passes_total", Help: "Passes completed without error over every runnable on a cluster and every copy to remove.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.evictions, m.purged, m.blocked, m.rateLimited, m.retained, m.passes)
	}
	return m
}
