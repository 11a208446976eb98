// Package agent is purser's watcher inside (or beside) one member cluster.
// It keeps trimmed informer caches of the tracked kinds and turns them into
// the three things the hub needs from a cluster: an event per change on the
// cluster's events subject, a periodic snapshot of (uid, resourceVersion)
// per kind from which the ingester removes zombie records, and a
// heartbeat in the heartbeats bucket. It never writes to the database:
// the ingester (internal/inventory) does, from the stream.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/backoff"
	"github.com/purser-io/purser/internal/stream"
)

// DefaultKinds are tracked when Config.Kinds is empty: the runnables and
// deployables purser places, including CRDs that may not be installed.
var DefaultKinds = []schema.GroupVersionKind{
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"},
	{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
}

// Config configures an Agent. Zero durations take the defaults.
type Config struct {
	// Cluster is the member cluster's name in purser; it names the
	// subjects and the heartbeat key.
	Cluster    string
	RESTConfig *rest.Config
	Stream     *stream.Client
	Kinds      []schema.GroupVersionKind
	// SnapshotInterval: 60s. HeartbeatInterval: 10s. DiscoveryInterval
	// (how often absent kinds are looked for again): 30s.
	SnapshotInterval  time.Duration
	HeartbeatInterval time.Duration
	DiscoveryInterval time.Duration
	// QueueSize bounds the events waiting to be published (10,000). When
	// it overflows the agent republishes its whole cache rather than lose
	// an event.
	QueueSize int
	Logger    *slog.Logger
}

// Agent watches one cluster. Create it with New and start it with Run.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface

	queue    chan *Event
	overflow atomic.Bool
	resyncs  atomic.Int64 // full resyncs done, for tests and heartbeats
	// snapshotNow asks the snapshot loop for an early snapshot, after a
	// resync that may have lost deletions.
	snapshotNow chan struct{}

	mu           sync.Mutex
	watched      map[schema.GroupVersionKind]*watch
	lastSnapshot time.Time
	started      time.Time
}

// watch is one running informer.
type watch struct {
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
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
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 60 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.DiscoveryInterval <= 0 {
		cfg.DiscoveryInterval = 30 * time.Second
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
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent %s: dynamic client: %w", cfg.Cluster, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent %s: discovery client: %w", cfg.Cluster, err)
	}
	return &Agent{
		cfg:         cfg,
		log:         log.With("cluster", cfg.Cluster),
		dyn:         dyn,
		disc:        disc,
		queue:       make(chan *Event, cfg.QueueSize),
		snapshotNow: make(chan struct{}, 1),
		watched:     map[schema.GroupVersionKind]*watch{},
	}, nil
}

// publishers publish concurrently: each publish waits for its ack, and the
// ingester orders by resourceVersion, not by arrival.
const publishers = 4

// Run watches until ctx is done and returns once every goroutine it started
// has stopped. It fails only when the stream's topology cannot be read at
// start; later outages of the stream or the kube-apiserver are waited out.
func (a *Agent) Run(ctx context.Context) error {
	a.started = time.Now()
	kv, err := a.heartbeatBucket(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() { a.publishLoop(ctx) })
	}
	wg.Go(func() { a.discoveryLoop(ctx, &wg) })
	wg.Go(func() { a.snapshotLoop(ctx) })
	wg.Go(func() { a.heartbeatLoop(ctx, kv) })
	wg.Go(func() { a.resyncLoop(ctx) })
	<-ctx.Done()
	wg.Wait()
	return nil
}

// heartbeatBucket declares the topology (idempotent, so the agent does not
// depend on another component having started first) and binds the bucket,
// retrying while the stream is unavailable.
func (a *Agent) heartbeatBucket(ctx context.Context) (jetstream.KeyValue, error) {
	for attempt := 0; ; attempt++ {
		err := a.cfg.Stream.Declare(ctx)
		if err == nil {
			kv, kvErr := a.cfg.Stream.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
			if kvErr == nil {
				return kv, nil
			}
			err = kvErr
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("agent %s: %w", a.cfg.Cluster, ctx.Err())
		}
		a.log.Warn("stream not ready", "error", err)
		if !backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second)) {
			return nil, fmt.Errorf("agent %s: %w", a.cfg.Cluster, ctx.Err())
		}
	}
}

// discoveryLoop starts an informer for each tracked kind the API server
// serves, and looks again for the others every DiscoveryInterval, so that
// a CRD installed later is picked up. Informers run under wg.
func (a *Agent) discoveryLoop(ctx context.Context, wg *sync.WaitGroup) {
	for {
		a.discover(ctx, wg)
		if a.allWatched() {
			return
		}
		if !backoff.Sleep(ctx, a.cfg.DiscoveryInterval) {
			return
		}
	}
}

func (a *Agent) allWatched() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watched) == len(a.cfg.Kinds)
}

func (a *Agent) discover(ctx context.Context, wg *sync.WaitGroup) {
	for _, gvk := range a.cfg.Kinds {
		a.mu.Lock()
		_, ok := a.watched[gvk]
		a.mu.Unlock()
		if ok || ctx.Err() != nil {
			continue
		}
		gvr, found, err := a.resourceFor(gvk)
		if err != nil {
			a.log.Warn("discovery failed; will retry", "kind", gvk.String(), "error", err)
			continue
		}
		if !found {
			a.log.Debug("kind not served yet", "kind", gvk.String())
			continue
		}
		w := a.newWatch(ctx, gvk, gvr)
		a.mu.Lock()
		a.watched[gvk] = w
		a.mu.Unlock()
		wg.Go(func() { w.informer.RunWithContext(ctx) })
		a.log.Info("watching", "kind", gvk.String(), "resource", gvr.Resource)
	}
}

// resourceFor finds the resource that serves gvk; found is false when the
// group version or the kind is not (yet) served.
func (a *Agent) resourceFor(gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, found bool, err error) {
	list, err := a.disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return gvr, false, nil
	}
	if err != nil {
		return gvr, false, err
	}
	for _, r := range list.APIResources {
		// Subresources (jobs/status) share the kind; only the resource
		// itself has a name without a slash.
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return gvk.GroupVersion().WithResource(r.Name), true, nil
		}
	}
	return gvr, false, nil
}

func (a *Agent) newWatch(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) *watch {
	inf := dynamicinformer.NewFilteredDynamicInformer(a.dyn, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// SetTransform fails only once the informer runs, which it does not yet.
	_ = inf.SetTransform(Trim)
	w := &watch{gvk: gvk, informer: inf}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// The initial list waits for room in the queue instead of
		// overflowing it: a start with more objects than QueueSize would
		// otherwise always end in a resync that publishes them twice. The
		// wait costs little memory, since the informer's pending
		// notifications point at objects its cache holds anyway.
		AddFunc: func(obj any, initial bool) { a.enqueue(ctx, w, Added, obj, initial) },
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*unstructured.Unstructured)
			n, okNew := newObj.(*unstructured.Unstructured)
			if okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion() {
				return // a relist of an unchanged object
			}
			a.enqueue(ctx, w, Modified, newObj, false)
		},
		DeleteFunc: func(obj any) {
			// A tombstone carries the last state the cache knew; the
			// ingester's ordering rule treats its version like any other.
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			a.enqueue(ctx, w, Deleted, obj, false)
		},
	})
	return w
}

// newEvent builds the message for obj, dropping the object itself when it
// would not fit in one stream message.
func (a *Agent) newEvent(w *watch, typ string, u *unstructured.Unstructured) *Event {
	ev := &Event{
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
	if err != nil || len(b) > maxMessage {
		ev.Truncated = true
		return ev
	}
	ev.Object = b
	return ev
}

// enqueue runs in the informer's handler and does not block unless wait
// is set: a full queue marks the agent for a full resync instead of
// dropping the event quietly.
func (a *Agent) enqueue(ctx context.Context, w *watch, typ string, obj any, wait bool) {
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
	default:
		if !a.overflow.Swap(true) {
			a.log.Warn("event queue full; a full resync will follow", "size", cap(a.queue))
		}
	}
}

// publishLoop publishes queued events, each until the stream acknowledges
// it: the message id makes every retry safe.
func (a *Agent) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-a.queue:
			data, err := json.Marshal(ev)
			if err != nil {
				a.log.Error("encode event", "uid", ev.UID, "error", err)
				continue
			}
			a.publish(ctx, stream.EventsSubject(a.cfg.Cluster), ev.MsgID(), data)
		}
	}
}

// publish retries until acknowledged or ctx is done.
func (a *Agent) publish(ctx context.Context, subject, id string, data []byte) bool {
	for attempt := 0; ; attempt++ {
		err := a.cfg.Stream.Publish(ctx, subject, id, data)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == 0 || attempt%20 == 0 {
			a.log.Warn("publish failed; retrying", "id", id, "attempt", attempt+1, "error", err)
		}
		if !backoff.Sleep(ctx, backoff.Exponential(attempt, 100*time.Millisecond, 5*time.Second)) {
			return false
		}
	}
}

// resyncLoop answers an overflow: every cached object is queued again
// (blocking here, not in a handler), and an early snapshot removes the
// objects whose deletion events were dropped.
func (a *Agent) resyncLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !a.overflow.Swap(false) {
			continue
		}
		n := 0
		for _, w := range a.watches() {
			for _, obj := range w.informer.GetStore().List() {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				select {
				case a.queue <- a.newEvent(w, Modified, u):
					n++
				case <-ctx.Done():
					return
				}
			}
		}
		a.resyncs.Add(1)
		a.log.Info("resync queued", "objects", n)
		select {
		case a.snapshotNow <- struct{}{}:
		default:
		}
	}
}

func (a *Agent) watches() []*watch {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*watch, 0, len(a.watched))
	for _, w := range a.watched {
		out = append(out, w)
	}
	return out
}

func (a *Agent) snapshotLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.snapshotNow:
		}
		a.snapshot(ctx)
	}
}

// snapshot publishes the synced caches. Each kind's list resourceVersion is
// read before its cache is listed: the list is then at least as new as the
// version it claims, which is what lets the ingester keep every record
// newer than the version (an object created after it) and remove the
// others absent from the list.
func (a *Agent) snapshot(ctx context.Context) {
	takenAt := time.Now().UTC()
	var lists []KindList
	for _, w := range a.watches() {
		if !w.informer.HasSynced() {
			continue // a partial cache would make live objects look like zombies
		}
		rv := w.informer.LastSyncResourceVersion()
		objs := w.informer.GetStore().List()
		l := KindList{APIVersion: w.gvk.GroupVersion().String(), Kind: w.gvk.Kind, ListResourceVersion: rv,
			Items: make([][2]string, 0, len(objs))}
		for _, obj := range objs {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				l.Items = append(l.Items, [2]string{string(u.GetUID()), u.GetResourceVersion()})
			}
		}
		lists = append(lists, l)
	}
	if len(lists) == 0 {
		return
	}
	id := strconv.FormatInt(takenAt.UnixNano(), 10)
	for _, c := range ChunkSnapshot(a.cfg.Cluster, id, takenAt, lists) {
		data, err := json.Marshal(&c)
		if err != nil {
			a.log.Error("encode snapshot", "error", err)
			return
		}
		if !a.publish(ctx, stream.SnapshotsSubject(a.cfg.Cluster), c.MsgID(), data) {
			return
		}
	}
	a.mu.Lock()
	a.lastSnapshot = takenAt
	a.mu.Unlock()
}

func (a *Agent) heartbeatLoop(ctx context.Context, kv jetstream.KeyValue) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		a.heartbeat(ctx, kv)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) heartbeat(ctx context.Context, kv jetstream.KeyValue) {
	hb := Heartbeat{Cluster: a.cfg.Cluster, Time: time.Now().UTC(), Started: a.started.UTC(),
		Objects: map[string]int{}, Pending: len(a.queue), Resyncs: a.resyncs.Load()}
	for _, w := range a.watches() {
		hb.Objects[kindKey(w.gvk.GroupVersion().String(), w.gvk.Kind)] = len(w.informer.GetStore().ListKeys())
	}
	a.mu.Lock()
	hb.LastSnapshot = a.lastSnapshot
	a.mu.Unlock()
	data, err := json.Marshal(hb)
	if err != nil {
		return
	}
	if _, err := kv.Put(ctx, a.cfg.Cluster, data); err != nil && ctx.Err() == nil {
		// The next beat retries; a missed one is what the TTL tolerates.
		a.log.Warn("heartbeat failed", "error", err)
	}
}
