package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

const (
	// syncTimeout bounds one sync of one key, so that a cluster that stops
	// answering holds a worker for a bounded time before the key goes
	// back to the queue with backoff.
	syncTimeout = time.Minute
	// Backoff of a failing key: quick first retries for a blip, capped so
	// that a cluster back from an outage is caught up within half a minute.
	// Per key only: the cluster's client limit (clusters.QPS) and the
	// worker count already bound what the retries of many keys cost it.
	retryBase = 250 * time.Millisecond
	retryMax  = 30 * time.Second
)

// clusterWorker syncs every deployable on one owned cluster. It owns its
// clients, its informers and its queue of deployable uids (a
// reconcile.Queue, whose resync is the worker's), so that a slow or
// unreachable cluster only ever holds up its own keys. Its roles are split
// by file: the lifecycle and the queue here, the watches, the resync and
// the checks that the watches still describe the cluster in drift.go,
// apply and removal in apply.go, the status rows in status.go.
type clusterWorker struct {
	s          *Syncer
	name       string
	kubeconfig []byte // sealed; a change means new clients
	log        *slog.Logger
	// kube resolves kinds (with its discovery limit) and creates
	// namespaces; dyn is its dynamic client, for everything else.
	kube  *clusters.ObjectClient
	dyn   dynamic.Interface
	queue *reconcile.Queue[string]

	// stale is set when the informers' view of the cluster proved wrong;
	// the syncer then replaces the worker.
	stale atomic.Bool
	// identified is closed once the cluster's identity was first read
	// (or could not be): the first resync waits for it.
	identified chan struct{}
	resyncs    int // resyncs so far; only the resync reads and writes it

	info    atomic.Pointer[clusterInfo]
	infoRev atomic.Int64 // ResourceVersion of the cluster row info was taken from

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	lastWrite map[string]string // uid -> resourceVersion our last apply returned
	// status holds the last known status row of each uid on this cluster;
	// a present nil means "no row", so that it is read from the store at
	// most once per worker.
	status map[string]*store.DeployableClusterStatus
}

func newClusterWorker(s *Syncer, c *store.Cluster) (*clusterWorker, error) {
	cfg, err := s.configs.RESTConfig(c)
	if err != nil {
		return nil, err
	}
	// A client of its own rather than one shared through clusters.Objects:
	// a worker replaced because its cluster was rebuilt must discover the
	// cluster afresh.
	kube, err := clusters.NewObjectClient(c.Name, cfg)
	if err != nil {
		return nil, err
	}
	kube.NamespaceLabels = func(ns string) map[string]string {
		return admission.NamespaceLabels(s.policy.PodSecurityLevel(ns))
	}
	w := &clusterWorker{
		s:          s,
		name:       c.Name,
		kubeconfig: c.Kubeconfig,
		log:        s.log.With("cluster", c.Name),
		kube:       kube,
		dyn:        kube.Dynamic(),
		identified: make(chan struct{}),
		informers:  map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		lastWrite:  map[string]string{},
		status:     map[string]*store.DeployableClusterStatus{},
	}
	var gate reconcile.Gate
	if s.cfg.Guard != nil {
		// The source of truth this replica holds may be stale while it
		// does not reach the hub's majority: apply and delete nothing
		// from it.
		gate = s.cfg.Guard
	}
	w.queue = reconcile.New(w.syncKey, reconcile.Config[string]{
		Name:         "syncer-" + c.Name,
		Workers:      s.cfg.Workers,
		Resync:       w.resync,
		ResyncPeriod: s.cfg.ResyncPeriod,
		RetryBase:    retryBase,
		RetryMax:     retryMax,
		Timeout:      syncTimeout,
		Gate:         gate,
		Done:         w.synced,
	})
	w.setCluster(c)
	return w, nil
}

// setCluster takes the cluster's labels and taints from its row and
// reports whether they changed, in which case every placement must be
// decided again.
func (w *clusterWorker) setCluster(c *store.Cluster) bool {
	if w.infoRev.Load() == c.ResourceVersion {
		return false
	}
	info := &clusterInfo{Name: c.Name, Labels: c.Labels}
	var doc store.Document[v1alpha1.ClusterSpec]
	if err := json.Unmarshal(c.Spec, &doc); err != nil {
		w.log.Error("cluster spec does not decode; taints ignored", "error", err)
	}
	// Only spec taints keep deployables away. Taints the controller adds
	// for an unreachable cluster (status.taints) must not make the syncer
	// delete a cluster's configuration the moment it comes back.
	info.Taints = doc.Spec.Taints
	old := w.info.Swap(info)
	w.infoRev.Store(c.ResourceVersion)
	if old == nil {
		return false
	}
	a, _ := json.Marshal(old)
	b, _ := json.Marshal(info)
	return !bytes.Equal(a, b)
}

func (w *clusterWorker) start(ctx context.Context) {
	w.ctx, w.cancel = context.WithCancel(ctx)
	if w.s.hook != nil {
		w.s.hook(w.name, true)
	}
	w.log.Info("working on cluster")
	w.wg.Go(func() { _ = w.queue.Run(w.ctx) })
	w.wg.Go(func() { w.checkIdentity(w.ctx) })
}

// stop stops the worker and waits for its goroutines, informers included.
func (w *clusterWorker) stop() {
	w.cancel()
	w.wg.Wait()
	if w.s.hook != nil {
		w.s.hook(w.name, false)
	}
	w.log.Info("stopped working on cluster")
}

func (w *clusterWorker) enqueue(uids ...string) { w.queue.Add(uids...) }

// enqueueAll enqueues every key, even those waiting for a retry: every
// placement may have changed.
func (w *clusterWorker) enqueueAll() { w.queue.Add(w.keys()...) }

// keys are every deployable of the source of truth and every uid found
// on objects in the cluster, so that orphans are seen too.
func (w *clusterWorker) keys() []string {
	snap := w.s.snapshot()
	keys := make([]string, 0, len(snap))
	for uid := range snap {
		keys = append(keys, uid)
	}
	w.mu.Lock()
	infs := make([]cache.SharedIndexInformer, 0, len(w.informers))
	for _, inf := range w.informers {
		infs = append(infs, inf)
	}
	w.mu.Unlock()
	for _, inf := range infs {
		keys = append(keys, inf.GetIndexer().ListIndexFuncValues(byUID)...)
	}
	return keys
}

// syncKey is the queue's reconcile of one deployable: sync, with nothing
// to look at again but what the events and the resync bring.
func (w *clusterWorker) syncKey(ctx context.Context, uid string) (reconcile.Result, error) {
	return reconcile.Result{}, w.sync(ctx, uid)
}

// synced is told how each sync ended. The first failures of a key are
// usually a blip; a key that keeps failing is worth a warning, with less
// noise as it goes on.
func (w *clusterWorker) synced(uid string, err error, again time.Duration) {
	switch {
	case err == nil:
		w.s.syncs.Add(1)
	case reconcile.IsTerminal(err):
		w.log.Error("sync failed for good", "deployable", uid, "error", err)
	case again == 0:
		// Stopping: the next owner picks the key up.
	default:
		if n := w.queue.Failures(uid); n == 3 || n%20 == 0 {
			w.log.Warn("sync keeps failing; retrying with backoff", "deployable", uid, "attempts", n, "error", err)
		} else {
			w.log.Debug("sync failed; retrying", "deployable", uid, "in", again.Round(time.Millisecond), "error", err)
		}
	}
}

// sync makes the cluster agree with the source of truth about one
// deployable: present and identical where its placement matches, absent
// elsewhere. It re-reads everything it decides on; the event that queued
// the key is only a hint. The outcome of apply or remove is recorded
// here, the one place a status row is written from.
func (w *clusterWorker) sync(ctx context.Context, uid string) error {
	d := w.s.deployable(uid)
	if d == nil {
		return w.removeOrphan(ctx, uid) // no deployable, no status row
	}
	var out outcome
	placed := d.live() && w.info.Load().matches(d.placement)
	withheld, unkept := false, int64(0)
	if placed && d.rollout != nil {
		// Rolled out in waves: the generation the rollout gives this
		// cluster, perhaps an earlier one, perhaps none yet.
		v, gen, kept := w.s.forCluster(d, w.name)
		switch {
		case !kept:
			unkept = gen
		case v != nil:
			d = v
		default:
			placed, withheld = false, true
		}
	}
	switch {
	case unkept > 0:
		// Never removed for want of a spec: a cluster keeps what it holds.
		out = outcome{state: v1alpha1.StateOutOfSync, message: fmt.Sprintf(notKeptMessage, unkept)}
	case d.observe && !placed:
		// Observe writes nothing, removals included.
		out = outcome{}
	case withheld:
		// No previous generation to keep: nothing here until the rollout
		// reaches the cluster. Recorded as OutOfSync, never as Synced, so
		// that no earlier Synced row passes for the generation later.
		if out = w.remove(ctx, d); out.err == nil && out.state != "" {
			out = outcome{state: v1alpha1.StateOutOfSync, message: notReachedMessage}
		}
	case !placed:
		out = w.remove(ctx, d)
	case d.err != nil:
		out = outcome{state: v1alpha1.StateError, message: d.err.Error()}
	default:
		out = w.apply(ctx, d)
	}
	written, err := w.record(ctx, d, out)
	if written && d.rec.DeletedAt != nil {
		// This cluster's confirmation may be the last the purge waits for.
		w.s.tryPurge(ctx, uid)
	}
	return err
}

// clusterInfo is what placement needs to know of a cluster.
type clusterInfo struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
}

// matches reports whether a deployable placed by p belongs on the cluster.
func (c *clusterInfo) matches(p v1alpha1.Placement) bool {
	ok, _ := placement.Matches(p, placement.Cluster{Name: c.Name, Labels: c.Labels, Taints: c.Taints})
	return ok
}
