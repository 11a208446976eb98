package clusters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Outcomes as cluster_views stores them.
const (
	outcomeOK          = "ok"
	outcomeNotReady    = "not-ready"
	outcomeUnreachable = "unreachable"
)

func outcomeName(o probe.Outcome) string {
	switch o {
	case probe.NotReady:
		return outcomeNotReady
	case probe.Unreachable:
		return outcomeUnreachable
	}
	return outcomeOK
}

func parseOutcome(s string) probe.Outcome {
	switch s {
	case outcomeNotReady:
		return probe.NotReady
	case outcomeUnreachable:
		return probe.Unreachable
	}
	return probe.OK
}

// Observer is one DC's eyes on the farm: every Interval it probes each
// registered cluster's kube-apiserver and records what it saw as its
// DC's view of the cluster (store.Clusters.RecordViews), with when its
// current run of failures began. Every controller replica runs one,
// leader or not, so that the leader's HealthMonitor can judge each
// cluster by a quorum of DCs.
type Observer struct {
	cfg    Config
	log    *slog.Logger
	config *Cache

	mu      sync.Mutex // one pass at a time
	probers map[string]*cachedProber
	failing map[string]time.Time // when each cluster's run of failed probes began, monotonic
	passed  chan struct{}        // a pass was recorded
}

type cachedProber struct {
	sealed string // the kubeconfig it was built from
	prober *probe.Prober
	// lease renews the hub's lease in the cluster (hublease.go);
	// renewErr is the last renewal's error, logged when it changes.
	lease    coordinationv1client.LeaseInterface
	renewErr string
}

// NewObserver returns an observer of cfg's Store, Sealer, DC, Interval,
// ProbeTimeout, Workers and Logger; nothing runs until Run or Pass.
func NewObserver(cfg Config) *Observer {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultProbeInterval)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, probe.DefaultTimeout)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultProbeWorkers)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Observer{cfg: cfg, log: log, config: NewCache(cfg.Sealer),
		probers: map[string]*cachedProber{}, failing: map[string]time.Time{}, passed: make(chan struct{}, 1)}
}

// Run probes every Interval until ctx is done; a pass that fails (the
// database is away) is logged and the next one tries again.
func (o *Observer) Run(ctx context.Context) error {
	if o.cfg.Store == nil || o.cfg.Sealer == nil {
		return errors.New("cluster observer: Config needs Store and Sealer")
	}
	o.log.Info("cluster observer starting", "dc", o.cfg.DC, "interval", o.cfg.Interval)
	q := reconcile.New(func(ctx context.Context, _ struct{}) (reconcile.Result, error) {
		start := time.Now()
		if err := o.Pass(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("cluster observation failed", "error", err)
		}
		return probeAgain(start, o.cfg.Interval), nil
	}, reconcile.Config[struct{}]{Name: "cluster-observer"})
	q.Add(struct{}{})
	return q.Run(ctx)
}

// probeAgain runs the probes again NextProbe after a pass that started at
// start: exactly then, not jittered, since the thresholds count probes.
func probeAgain(start time.Time, interval time.Duration) reconcile.Result {
	return reconcile.Result{RequeueAfter: max(NextProbe(start, interval), time.Nanosecond)}
}

// NextProbe is how long to wait, after a pass that started at start, for
// the next one: probes start at least interval apart, also after a slow
// pass, so that the failure threshold always spans that much time (a
// ticker would fire again at once and bunch the probes up).
func NextProbe(start time.Time, interval time.Duration) time.Duration {
	return max(interval-time.Since(start), 0)
}

// Passed is signalled after each pass that recorded its views.
func (o *Observer) Passed() <-chan struct{} { return o.passed }

// passTimeout bounds one pass of an observer or monitor with this
// interval: a database that stopped answering mid-pass costs a pass, not
// the loop.
func passTimeout(interval time.Duration) time.Duration { return max(10*time.Second, 3*interval) }

// Pass probes every registered cluster once and records the results.
func (o *Observer) Pass(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, passTimeout(o.cfg.Interval))
	defer cancel()
	var rows []*store.Cluster
	if err := o.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.Clusters().List(ctx)
		return err
	}); err != nil {
		return err
	}
	o.forgetRemoved(rows)

	results := make([]probe.Result, len(rows))
	sem := make(chan struct{}, o.cfg.Workers)
	var wg sync.WaitGroup
	for i, row := range rows {
		p, err := o.prober(row)
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
	now := time.Now()
	names := make([]string, len(rows))
	views := make([]store.ViewRecord, len(rows))
	for i, row := range rows {
		v := store.ViewRecord{Cluster: row.Name, Outcome: outcomeName(results[i].Outcome), Detail: results[i].Detail}
		if results[i].Outcome == probe.OK {
			delete(o.failing, row.Name)
		} else {
			since, ok := o.failing[row.Name]
			if !ok {
				since = now
				o.failing[row.Name] = since
			}
			v.Failing, v.FailingFor = true, now.Sub(since)
		}
		views[i] = v
		names[i] = row.Name
	}
	// The hub's lease is renewed in the clusters that answered, after
	// the record of when those renewals can land at the latest: start is
	// taken before it, so that the database's clock at the record is
	// later than start, and every renewal is over by start plus its
	// timeout (hublease.go).
	renew := okNames(names, results)
	start := time.Now()
	if err := o.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Clusters().RecordViews(ctx, o.cfg.DC, views); err != nil {
			return err
		}
		return tx.Clusters().RecordHubLeases(ctx, renew, hubLeaseLandsWithin(o.cfg.ProbeTimeout))
	}); err != nil {
		return fmt.Errorf("record the views of %s: %w", observerName(o.cfg.DC), err)
	}
	select {
	case o.passed <- struct{}{}:
	default:
	}
	o.renewHubLeases(ctx, start, renew)
	return nil
}

// prober returns the cluster's prober, built again when its kubeconfig
// changed.
func (o *Observer) prober(row *store.Cluster) (*probe.Prober, error) {
	if cp, ok := o.probers[row.Name]; ok && cp.sealed == string(row.Kubeconfig) {
		return cp.prober, nil
	}
	delete(o.probers, row.Name)
	cfg, err := o.config.RESTConfig(row)
	if err != nil {
		return nil, err
	}
	p, err := probe.New(cfg, o.cfg.ProbeTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", row.Name, err)
	}
	lease, err := leaseClient(cfg, o.cfg.ProbeTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", row.Name, err)
	}
	o.probers[row.Name] = &cachedProber{sealed: string(row.Kubeconfig), prober: p, lease: lease}
	return p, nil
}

func (o *Observer) forgetRemoved(rows []*store.Cluster) {
	live := make(map[string]bool, len(rows))
	for _, r := range rows {
		live[r.Name] = true
	}
	for name := range o.probers {
		if !live[name] {
			delete(o.probers, name)
			o.config.Forget(name)
		}
	}
	for name := range o.failing {
		if !live[name] {
			delete(o.failing, name)
		}
	}
}
