// Package agent is purser's watcher inside (or beside) one member cluster.
// It keeps trimmed informer caches of the tracked kinds, and of purser's
// objects of every other kind (labelled.go), and turns them into the three
// things the hub needs from a cluster: an event per change on the
// cluster's events subject, a periodic snapshot of (uid, resourceVersion)
// per kind from which the ingester removes zombie records, and a
// heartbeat in the heartbeats bucket, which is also the agent's lease: cut
// off from the hub for longer than the lease, it stops the AtMostOne work
// in its cluster itself (fence.go). Several agents of one cluster elect one
// to do all this (leader.go). It never writes to the database: the
// ingester (internal/member/inventory) does, from the stream.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/platform/replica"
)

// DefaultKinds are tracked when Config.Kinds is empty: the runnables and
// deployables purser places, including CRDs that may not be installed, and
// the nodes, whose status.allocatable placement reads from the inventory.
// Objects of every other kind are tracked too when they carry purser's
// labels (see labelled.go).
var DefaultKinds = []schema.GroupVersionKind{
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"},
	{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"},
	// The Flink operator's savepoints and checkpoints from 1.10 on, when
	// its FlinkStateSnapshot CRD is installed (watched once it is served):
	// their status.path is the exact restore point failover carries. The
	// operator creates them, so they carry no purser label.
	{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkStateSnapshot"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "Node"},
	// The CRDs, trimmed of their schemas, so that the farm's Kubernetes
	// API (internal/api/kubeapi) names custom kinds and prints their
	// additionalPrinterColumns as their kube-apiserver does.
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

// Config configures an Agent. Zero durations take the defaults.
type Config struct {
	// Cluster is the member cluster's name in purser; it names the
	// subjects and the heartbeat key.
	Cluster    string
	RESTConfig *rest.Config
	Stream     *stream.Client
	// Kinds are tracked in full; objects of other kinds only when they
	// carry purser's labels.
	Kinds []schema.GroupVersionKind
	// OptIn names kinds tracked in full beside Kinds, of those in
	// OptInKinds ("Pod", "Event"): what the cluster's spec.inventory.kinds
	// asks for. They are many and change often, so no cluster tracks them
	// unless asked.
	OptIn []string
	// SnapshotInterval: 60s. HeartbeatInterval: 10s. DiscoveryInterval
	// (how often absent kinds and new resources are looked for): 30s.
	SnapshotInterval  time.Duration
	HeartbeatInterval time.Duration
	DiscoveryInterval time.Duration
	// LeaseDuration is how long after the agent's last acknowledged
	// heartbeat the control plane considers it gone: 30s, and at least
	// three HeartbeatIntervals. Past it the agent fences its cluster (see
	// fence.go).
	LeaseDuration time.Duration
	// LeaderElection lets several agents of one cluster run, one working
	// and the others standing by. Off unless Enabled.
	LeaderElection LeaderElection
	// QueueSize bounds the events waiting to be published (10,000). When
	// it overflows the agent republishes its whole cache rather than lose
	// an event.
	QueueSize int
	Logger    *slog.Logger
}

// Agent watches one cluster. Create it with New and start it with Run.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	rest   *rest.Config
	dyn    dynamic.Interface
	disc   *discovery.DiscoveryClient
	access *access // which resources it may watch for purser's labels
	prober *probe.Prober
	// hubLeases reads the hub's Lease in the agent's namespace
	// (hublease.go).
	hubLeases coordinationv1client.LeaseInterface
	// paths names the lease's paths alive at the last beat, for the log
	// (owned by the heartbeat loop).
	paths string
	// elect is the validated leader election, nil when it is off.
	elect *elector

	queue    chan *stream.Event
	overflow atomic.Bool
	// overflows counts the times the queue was given up on; resyncs the
	// full resyncs done (a resync queued while the stream is away counts
	// once the stream takes it). For tests and heartbeats; both only grow.
	overflows atomic.Int64
	resyncs   atomic.Int64
	// published counts acknowledged messages; fenced counts objects
	// suspended or deleted by fencing. Both only grow.
	published atomic.Int64
	fenced    atomic.Int64
	// lastAck is when the stream last acknowledged a message (Unix
	// nanoseconds): whether a full queue is draining.
	lastAck atomic.Int64
	// returned is set when the first heartbeat of a term finds the
	// previous one older than a lease (the agent was away: powered off,
	// crashed, cut off): the control plane may have moved the cluster's
	// AtMostOne work meanwhile, so it is fenced once the caches are full
	// (fence.go). returnChecked: the first heartbeat of the term did so.
	// fenceNow wakes the fence loop when returned is set.
	returned      atomic.Bool
	returnChecked bool // owned by the heartbeat loop
	fenceNow      chan struct{}
	// leading is true while the agent does its work: always without
	// leader election, while it holds the lease with it.
	leading atomic.Bool

	// The state of one term of leadership, reset when a term begins.
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]*watch // the configured kinds, and those asked for
	// asked are the kinds the hub asks for beside the configured ones
	// (settings.go); dropped those no longer asked for whose records the
	// next snapshot removes, with the last version their watch saw.
	asked        []schema.GroupVersionKind
	dropped      map[schema.GroupVersionKind]string
	labelled     map[schema.GroupKind]*watch // the others, for purser's objects
	lastSnapshot time.Time
	started      time.Time
	// reportedKinds is what stream.KindsBucket last acknowledged from this
	// term, and when (kinds.go).
	reportedKinds   []stream.ServedKind
	reportedKindsAt time.Time
	// lastBeat is when the last acknowledged heartbeat was sent, on the
	// monotonic clock: the start of the agent's lease on the stream's
	// path.
	lastBeat time.Time
	// hubLease is what the agent saw of the hub's renewals of its Lease
	// in this cluster: the lease's other path (hublease.go).
	hubLease hubLeaseState
	// kubeAPI is the latest probe of the kube-apiserver (kubeapi.go).
	kubeAPI kubeAPIState
	// capacity holds the term's Node and Pod caches (capacity.go).
	capacity *capacityCache
}

// New checks cfg and builds the clients; nothing runs until Run.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Cluster == "":
		return nil, errors.New("agent: no cluster name")
	case cfg.RESTConfig == nil:
		return nil, fmt.Errorf("agent %s: no REST config", cfg.Cluster)
	case cfg.Stream == nil:
		return nil, fmt.Errorf("agent %s: no stream client", cfg.Cluster)
	}
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = DefaultKinds
	}
	kinds, err := withOptIn(cfg.Kinds, cfg.OptIn)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Cluster, err)
	}
	cfg.Kinds = kinds
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 60 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.DiscoveryInterval <= 0 {
		cfg.DiscoveryInterval = 30 * time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = max(30*time.Second, 3*cfg.HeartbeatInterval)
	}
	if cfg.LeaseDuration < 3*cfg.HeartbeatInterval {
		// A shorter lease expires between two beats that both succeed.
		return nil, fmt.Errorf("agent %s: lease duration %s is under three heartbeat intervals (%s)",
			cfg.Cluster, cfg.LeaseDuration, cfg.HeartbeatInterval)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 10000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	// Informers list and watch a handful of kinds; client-go's default
	// QPS of 5 would throttle the initial lists of a big cluster.
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	if rc.WarningHandler == nil && rc.WarningHandlerWithContext == nil {
		// Watching every resource for purser's labels meets deprecated
		// ones (v1 Endpoints), which the API server warns about on every
		// list and watch.
		rc.WarningHandlerWithContext = warningLog{log.With("cluster", cfg.Cluster)}
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent %s: dynamic client: %w", cfg.Cluster, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent %s: discovery client: %w", cfg.Cluster, err)
	}
	authz, err := authorizationv1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent %s: authorization client: %w", cfg.Cluster, err)
	}
	a := &Agent{
		cfg:      cfg,
		log:      log.With("cluster", cfg.Cluster),
		rest:     rc,
		dyn:      dyn,
		disc:     disc,
		access:   newAccess(authz.SelfSubjectAccessReviews()),
		queue:    make(chan *stream.Event, cfg.QueueSize),
		fenceNow: make(chan struct{}, 1),
	}
	if a.prober, err = probe.New(rc, a.probeTimeout()); err != nil {
		return nil, fmt.Errorf("agent %s: probe client: %w", cfg.Cluster, err)
	}
	if a.hubLeases, err = hubLeaseClient(rc, cfg.LeaderElection.namespace(), a.probeTimeout()); err != nil {
		return nil, fmt.Errorf("agent %s: lease client: %w", cfg.Cluster, err)
	}
	if a.cfg.LeaderElection.Identity == "" {
		a.cfg.LeaderElection.Identity = replica.Identity()
	}
	if cfg.LeaderElection.Enabled {
		if a.elect, err = newElector(rc, &a.cfg.LeaderElection); err != nil {
			return nil, fmt.Errorf("agent %s: leader election: %w", cfg.Cluster, err)
		}
	}
	return a, nil
}

// warningLog logs the API server's warnings at debug level.
type warningLog struct{ log *slog.Logger }

func (w warningLog) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	w.log.Debug("kube-apiserver warning", "code", code, "text", text)
}

// publishers publish concurrently: the ingester orders by resourceVersion,
// not by arrival.
const publishers = 4

// publishBatch is the most queued events one publisher sends pipelined
// before it waits for their acks. One event at a time, an agent publishes
// as many as its publishers have round trips per second: the initial list
// of 100,000 objects took 4 minutes on a loaded machine, at 400 events/s,
// with both processes mostly waiting to be scheduled.
const publishBatch = 256

// Run watches until ctx is done and returns once every goroutine it started
// has stopped. Outages of the stream or the kube-apiserver are waited out.
// With leader election, the agent works only while it holds the lease and
// stands by, campaigning again, after it lost it.
func (a *Agent) Run(ctx context.Context) error {
	if a.elect != nil {
		a.runElected(ctx)
		return nil
	}
	a.lead(ctx)
	return nil
}

// lead does the agent's work, one term of leadership, until ctx is done.
// The work (publishing, snapshots, heartbeats, fencing) has stopped when
// leading turns false; the informers may take longer to return, since
// client-go's reflector sleeps out its retry backoff without watching its
// context, and lead waits for them too. Their handlers drop what they see
// once ctx is done.
func (a *Agent) lead(ctx context.Context) {
	a.reset()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var work, informers sync.WaitGroup
	a.leading.Store(true)
	for range publishers {
		work.Go(func() { a.publishLoop(ctx) })
	}
	snapshots := a.snapshots()
	work.Go(func() { a.discoveryLoop(ctx, &informers) })
	a.startCapacity(ctx, &informers)
	work.Go(func() { _ = snapshots.Run(ctx) })
	work.Go(func() { a.heartbeatLoop(ctx) })
	work.Go(func() { a.fenceLoop(ctx) })
	work.Go(func() { a.resyncLoop(ctx, snapshots) })
	<-ctx.Done()
	work.Wait()
	a.leading.Store(false)
	informers.Wait()
}

// reset starts a term from nothing: the informers of the last one have
// stopped, and events it queued but did not publish are dropped, since the
// new informers' initial lists publish every object again.
func (a *Agent) reset() {
	for len(a.queue) > 0 {
		<-a.queue
	}
	a.overflow.Store(false)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watched = map[schema.GroupVersionKind]*watch{}
	a.asked, a.dropped = nil, map[schema.GroupVersionKind]string{}
	a.labelled = map[schema.GroupKind]*watch{}
	a.reportedKinds = nil
	a.lastSnapshot = time.Time{}
	a.kubeAPI = kubeAPIState{}
	a.capacity = nil
	a.started = time.Now()
	// The agent cannot know of beats before its term: its lease toward
	// the control plane is counted from the term's start.
	a.lastBeat = a.started
	// Nor of renewals of the hub's Lease: the first read of the term
	// only sets what the next ones compare with.
	a.hubLease = hubLeaseState{}
	a.paths = ""
	a.returnChecked = false
}

// newEvent builds the message for obj, dropping the object itself when it
// would not fit in one stream message.
func (a *Agent) newEvent(w *watch, typ string, u *unstructured.Unstructured) *stream.Event {
	ev := &stream.Event{
		Cluster:         a.cfg.Cluster,
		APIVersion:      w.gvk.GroupVersion().String(),
		Kind:            w.gvk.Kind,
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             string(u.GetUID()),
		ResourceVersion: u.GetResourceVersion(),
		Type:            typ,
		Labels:          u.GetLabels(),
		Time:            time.Now().UTC(),
	}
	b, err := json.Marshal(u.Object)
	if err != nil || len(b) > stream.MaxMessage {
		ev.Truncated = true
		return ev
	}
	ev.Object = b
	return ev
}

// overflowWait is how long a change waits for room in a full queue while
// the stream acknowledges nothing, before the agent gives up on the queue
// for a full resync. A queue that drains (a burst: the initial lists, a
// resync, many changes at once) is waited for as long as acks keep coming,
// however slowly a loaded machine publishes; one that does not (the stream
// away) is not waited for again until the resync, so that the informers'
// handlers never hold more than the queue. Without the wait, any change
// seen while the initial lists of a big cluster filled the queue ended in
// a resync that published every object a second time.
const overflowWait = 5 * time.Second

// enqueue runs in the informer's handler. It waits for room in the queue
// when wait is set (the initial list), else while the queue drains (see
// overflowWait): a full queue that does not drain marks the agent for a
// full resync instead of dropping the event quietly.
func (a *Agent) enqueue(ctx context.Context, w *watch, typ string, obj any, wait bool) {
	if ctx.Err() != nil {
		return // the term is over; the queue may be the next one's
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		a.log.Error("unexpected object in informer", "kind", w.gvk.String(), "type", fmt.Sprintf("%T", obj))
		return
	}
	ev := a.newEvent(w, typ, u)
	if wait {
		select {
		case a.queue <- ev:
		case <-ctx.Done():
		}
		return
	}
	select {
	case a.queue <- ev:
		return
	default:
	}
	timer := time.NewTimer(overflowWait)
	defer timer.Stop()
	for {
		if a.overflow.Load() {
			return // a resync is due, which publishes the cache as it is then
		}
		select {
		case a.queue <- ev:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if time.Since(time.Unix(0, a.lastAck.Load())) < overflowWait {
			timer.Reset(overflowWait)
			continue
		}
		if !a.overflow.Swap(true) {
			a.overflows.Add(1)
			a.log.Warn("event queue full and not draining; a full resync will follow", "size", cap(a.queue))
		}
	}
}

// publishLoop publishes queued events, each until the stream acknowledges
// it: the message id makes every retry safe. It takes what else is queued
// with the event it waited for, without waiting for more: a lone change
// goes at once, and a burst (the initial list, a resync) goes pipelined.
func (a *Agent) publishLoop(ctx context.Context) {
	subject := stream.EventsSubject(a.cfg.Cluster)
	batch := make([]stream.Message, 0, publishBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case ev := <-a.queue:
			batch = a.appendEvent(batch, subject, ev)
		}
	more:
		for len(batch) < publishBatch {
			select {
			case ev := <-a.queue:
				batch = a.appendEvent(batch, subject, ev)
			default:
				break more
			}
		}
		a.publishAll(ctx, batch)
	}
}

// appendEvent adds ev's message to batch; an event that cannot be encoded
// is logged and left out.
func (a *Agent) appendEvent(batch []stream.Message, subject string, ev *stream.Event) []stream.Message {
	data, err := json.Marshal(ev)
	if err != nil {
		a.log.Error("encode event", "uid", ev.UID, "error", err)
		return batch
	}
	return append(batch, stream.Message{Subject: subject, MsgID: ev.MsgID(), Data: data})
}

// publishTimeout bounds the wait for one batch's acks, as JetStream's
// default does for one publish: an ack lost without the connection is
// asked for again rather than waited for.
const publishTimeout = 10 * time.Second

// publishAll publishes msgs pipelined and retries from the first one not
// acknowledged until every one is, or ctx is done.
func (a *Agent) publishAll(ctx context.Context, msgs []stream.Message) bool {
	err := reconcile.Retry(ctx, reconcile.Backoff(100*time.Millisecond, 5*time.Second), func(ctx context.Context, attempt int) error {
		bctx, cancel := context.WithTimeout(ctx, publishTimeout)
		defer cancel()
		n, err := a.cfg.Stream.PublishBatch(bctx, msgs)
		if n > 0 {
			a.published.Add(int64(n))
			a.lastAck.Store(time.Now().UnixNano())
		}
		msgs = msgs[n:]
		if err != nil && ctx.Err() == nil && attempt%20 == 0 {
			a.log.Warn("publish failed; retrying", "id", msgs[0].MsgID, "left", len(msgs), "attempt", attempt+1, "error", err)
		}
		return err
	})
	return err == nil // else ctx is done: publish errors are never terminal
}

// publish retries until acknowledged or ctx is done.
func (a *Agent) publish(ctx context.Context, subject, id string, data []byte) bool {
	err := reconcile.Retry(ctx, reconcile.Backoff(100*time.Millisecond, 5*time.Second), func(ctx context.Context, attempt int) error {
		err := a.cfg.Stream.Publish(ctx, subject, id, data)
		if err != nil && ctx.Err() == nil && attempt%20 == 0 {
			a.log.Warn("publish failed; retrying", "id", id, "attempt", attempt+1, "error", err)
		}
		return err
	})
	if err != nil {
		return false // ctx is done: publish errors are never terminal
	}
	a.published.Add(1)
	a.lastAck.Store(time.Now().UnixNano())
	return true
}

// resyncLoop answers an overflow, looking for one every second: every
// cached object is queued again (blocking here, not in a handler), and an
// early snapshot removes the objects whose deletion events were dropped.
func (a *Agent) resyncLoop(ctx context.Context, snapshots *reconcile.Queue[snapshotKey]) {
	reconcile.Every(ctx, time.Second, func(ctx context.Context) {
		if !a.overflow.Swap(false) {
			return
		}
		n := 0
		for _, w := range a.watches() {
			for _, inf := range w.informers {
				// An object in two caches of a labelled kind is queued
				// twice; its message id makes the second a duplicate.
				for _, obj := range inf.GetStore().List() {
					u, ok := obj.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					select {
					case a.queue <- a.newEvent(w, stream.EventModified, u):
						n++
					case <-ctx.Done():
						return
					}
				}
			}
		}
		a.resyncs.Add(1)
		a.log.Info("resync queued", "objects", n)
		snapshots.Add(snapshotKey{})
	})
}

// watches lists the tracked kinds, configured and labelled.
func (a *Agent) watches() []*watch {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*watch, 0, len(a.watched)+len(a.labelled))
	full := map[schema.GroupKind]bool{}
	for gvk, w := range a.watched {
		out = append(out, w)
		full[gvk.GroupKind()] = true
	}
	for gk, w := range a.labelled {
		if !full[gk] {
			// A kind just asked for in full, whose labelled watch the
			// discovery pass is about to stop: listed once.
			out = append(out, w)
		}
	}
	return out
}

// snapshotKey is the one key of a term's snapshot queue: a snapshot asked
// for while one is under way or waiting runs once after it.
type snapshotKey struct{}

// firstSnapshotPoll is how often the first snapshot of a term looks
// whether every watch has synced.
const firstSnapshotPoll = 250 * time.Millisecond

// snapshots returns the queue that publishes a term's snapshots: every
// SnapshotInterval after the last, and early when a resync asks. The
// first is published as soon as every watch has synced, so that objects
// deleted while the agent was away (stopped, cut off, not yet leader)
// leave the inventory in seconds rather than a period later; it waits
// for them one SnapshotInterval at most, then goes with the kinds that
// have synced (snapshot leaves out the others).
func (a *Agent) snapshots() *reconcile.Queue[snapshotKey] {
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	first := true
	q := reconcile.New(func(ctx context.Context, _ snapshotKey) (reconcile.Result, error) {
		if first && !a.cachesSynced() && time.Since(started) < a.cfg.SnapshotInterval {
			return reconcile.Result{RequeueAfter: firstSnapshotPoll}, nil
		}
		first = false
		a.snapshot(ctx)
		// A snapshot asked for early leaves this schedule as it is: the
		// queue keeps the earlier of two times a key is due.
		return reconcile.Result{RequeueAfter: a.cfg.SnapshotInterval}, nil
	}, reconcile.Config[snapshotKey]{Name: "snapshots", Logger: a.log})
	q.Add(snapshotKey{})
	return q
}

// snapshot publishes the synced caches. Each kind's list resourceVersion is
// read before its cache is listed: the list is then at least as new as the
// version it claims, which is what lets the ingester keep every record
// newer than the version (an object created after it) and remove the
// others absent from the list.
func (a *Agent) snapshot(ctx context.Context) {
	if !a.probeKubeAPI(ctx) {
		// The caches cannot be refreshed: a snapshot of them would say
		// nothing new, and would count as a fresh look (kubeapi.go).
		a.log.Debug("snapshot skipped: the kube-apiserver does not answer")
		return
	}
	takenAt := time.Now().UTC()
	var lists []stream.KindList
	for _, w := range a.watches() {
		rv, items, ok := w.list()
		if !ok {
			continue // a partial cache would make live objects look like zombies
		}
		lists = append(lists, stream.KindList{APIVersion: w.gvk.GroupVersion().String(), Kind: w.gvk.Kind,
			ListResourceVersion: rv, Items: items})
	}
	lists = append(lists, a.droppedLists()...)
	if len(lists) == 0 {
		return
	}
	id := strconv.FormatInt(takenAt.UnixNano(), 10)
	for _, c := range stream.ChunkSnapshot(a.cfg.Cluster, id, takenAt, lists) {
		data, err := json.Marshal(&c)
		if err != nil {
			a.log.Error("encode snapshot", "error", err)
			return
		}
		if !a.publish(ctx, stream.SnapshotsSubject(a.cfg.Cluster), c.MsgID(), data) {
			return
		}
	}
	a.forgetDropped(lists)
	a.mu.Lock()
	a.lastSnapshot = takenAt
	a.mu.Unlock()
}
