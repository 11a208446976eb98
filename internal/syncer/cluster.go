package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/backoff"
	"github.com/purser-io/purser/internal/clusters"
	"github.com/purser-io/purser/internal/kuberetry"
	"github.com/purser-io/purser/internal/placement"
	"github.com/purser-io/purser/internal/store"
)

const (
	// syncTimeout bounds one sync of one key, so that a cluster that stops
	// answering holds a worker for a bounded time before the key goes
	// back to the queue with backoff.
	syncTimeout = time.Minute
	// Backoff of a failing key: quick first retries for a blip, capped so
	// that a cluster back from an outage is caught up within half a minute.
	retryBase = 250 * time.Millisecond
	retryMax  = 30 * time.Second
	// maxMessage bounds a status message; API errors can be long.
	maxMessage = 512
	// byUID indexes cached objects by the deployable uid in their label.
	byUID = "purser-deployable-uid"

	// identityCheckPeriod is how often the cluster's identity is read; it
	// bounds how long a rebuilt cluster stays empty. One GET per cluster.
	identityCheckPeriod = 5 * time.Second

	notPlacedMessage = "removed: the cluster no longer matches the placement"
)

// clusterWorker syncs every deployable on one owned cluster. It owns its
// clients, its informers and its queue, so that a slow or unreachable
// cluster only ever holds up its own keys.
type clusterWorker struct {
	s          *Syncer
	name       string
	kubeconfig []byte // sealed; a change means new clients
	log        *slog.Logger
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	queue      workqueue.TypedRateLimitingInterface[string]

	// stale is set when the informers' view of the cluster proved wrong;
	// the syncer then replaces the worker.
	stale atomic.Bool

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
	clients, err := clusters.NewClients(c.Name, cfg)
	if err != nil {
		return nil, err
	}
	w := &clusterWorker{
		s:          s,
		name:       c.Name,
		kubeconfig: c.Kubeconfig,
		log:        s.log.With("cluster", c.Name),
		dyn:        clients.Dynamic,
		mapper:     clients.Mapper,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
				// Overall limit, so that a burst of failures does not
				// turn into a storm of retries against one cluster.
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "syncer-" + c.Name},
		),
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		lastWrite: map[string]string{},
		status:    map[string]*store.DeployableClusterStatus{},
	}
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
	return string(a) != string(b)
}

func (w *clusterWorker) start(ctx context.Context) {
	w.ctx, w.cancel = context.WithCancel(ctx)
	if w.s.hook != nil {
		w.s.hook(w.name, true)
	}
	w.log.Info("working on cluster")
	for range w.s.cfg.Workers {
		w.wg.Go(func() {
			for w.processNext() {
			}
		})
	}
	w.wg.Go(w.resyncLoop)
}

// stop stops the worker and waits for its goroutines, informers included.
func (w *clusterWorker) stop() {
	w.cancel()
	w.queue.ShutDown()
	w.wg.Wait()
	if w.s.hook != nil {
		w.s.hook(w.name, false)
	}
	w.log.Info("stopped working on cluster")
}

// resyncLoop enqueues every key at start and then every jittered period:
// the safety net for anything the informers and the poller missed. The
// skip rule of sync trusts the informers' caches, so the loop also checks
// that they still describe the cluster: cheaply every few seconds (the
// cluster's identity), thoroughly before each resync (its objects).
func (w *clusterWorker) resyncLoop() {
	// The identity is taken first, before anything is applied, so that a
	// rebuild right after the first sync is not mistaken for the original.
	identity, _ := w.clusterIdentity()
	w.enqueueAll()
	resync := time.NewTimer(backoff.Jitter(w.s.cfg.ResyncPeriod))
	defer resync.Stop()
	check := time.NewTicker(w.s.identityCheck)
	defer check.Stop()
	for {
		stale := false
		select {
		case <-w.ctx.Done():
			return
		case <-check.C:
			id, err := w.clusterIdentity()
			switch {
			case err != nil || id == identity:
			case identity == "":
				identity = id
			default:
				stale = true
			}
		case <-resync.C:
			resync.Reset(backoff.Jitter(w.s.cfg.ResyncPeriod))
			if stale = w.cachesStale(); !stale {
				w.enqueueAll()
			}
		}
		if stale {
			// Rebuilding the worker (clients, discovery, informers, and
			// the memory of our last writes) is the one sure way back:
			// the syncer replaces a stale worker on its next pass.
			w.log.Warn("cluster was rebuilt or restored since the watches started; restarting work on it")
			w.stale.Store(true)
			return
		}
	}
}

// clusterIdentity is the uid of the kube-system namespace, which a
// rebuilt cluster gets anew: the usual stand-in for a cluster id. A
// rebuilt cluster's watches do not necessarily fail; they may resume at a
// resourceVersion the new etcd has not reached and wait in silence.
func (w *clusterWorker) clusterIdentity() (string, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	ns, err := w.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.GetUID()), nil
}

// cachesStale lists each watched kind from the cluster and compares with
// the informer's cache. A cluster rebuilt empty, or restored from an older
// backup, breaks watches silently: a watch resumed at a resourceVersion
// the new etcd has not reached yet just waits, and the cache keeps showing
// objects that are gone. Two signs give it away: the cluster's list is
// older than what the cache holds, or a cached object is missing from the
// cluster and stays missing a moment later (a deletion the informer simply
// has not delivered yet would be gone from the cache by then). Reads only.
func (w *clusterWorker) cachesStale() bool {
	w.mu.Lock()
	infs := maps.Clone(w.informers)
	w.mu.Unlock()
	for gvr, inf := range infs {
		missing, err := w.missingFromCluster(gvr, inf, nil)
		if err != nil || len(missing) == 0 {
			continue // unreachable: the informer's own retries apply
		}
		select {
		case <-w.ctx.Done():
			return false
		case <-time.After(2 * time.Second):
		}
		if again, err := w.missingFromCluster(gvr, inf, missing); err == nil && len(again) > 0 {
			return true
		}
	}
	return false
}

// missingFromCluster returns the keys of cached objects (among only, when
// given) that the cluster does not hold at the cached resourceVersion or
// later; every cached key when the cluster's list is older than the cache.
func (w *clusterWorker) missingFromCluster(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer, only map[string]string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(w.ctx, syncTimeout)
	defer cancel()
	list, err := w.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: LabelDeployable})
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		live[cache.MetaObjectToName(&list.Items[i]).String()] = true
	}
	listRV, _ := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
	missing := map[string]string{}
	for _, item := range inf.GetStore().List() {
		u := item.(*unstructured.Unstructured)
		key := cache.MetaObjectToName(u).String()
		rv := u.GetResourceVersion()
		if only != nil && only[key] != rv {
			continue
		}
		cachedRV, _ := strconv.ParseUint(rv, 10, 64)
		if !live[key] || (listRV > 0 && cachedRV > listRV) {
			missing[key] = rv
		}
	}
	return missing, nil
}

func (w *clusterWorker) enqueue(uids ...string) {
	for _, uid := range uids {
		w.queue.Add(uid)
	}
}

// enqueueAll enqueues every deployable of the source of truth and every
// uid found on objects in the cluster, so that orphans are seen too.
func (w *clusterWorker) enqueueAll() {
	for uid := range w.s.snapshot() {
		w.queue.Add(uid)
	}
	w.mu.Lock()
	infs := make([]cache.SharedIndexInformer, 0, len(w.informers))
	for _, inf := range w.informers {
		infs = append(infs, inf)
	}
	w.mu.Unlock()
	for _, inf := range infs {
		for _, uid := range inf.GetIndexer().ListIndexFuncValues(byUID) {
			w.queue.Add(uid)
		}
	}
}

func (w *clusterWorker) processNext() bool {
	uid, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(uid)
	ctx, cancel := context.WithTimeout(w.ctx, syncTimeout)
	err := w.sync(ctx, uid)
	cancel()
	if err == nil {
		w.queue.Forget(uid)
		return true
	}
	if w.ctx.Err() != nil {
		return true // stopping: the next owner picks the key up
	}
	n := w.queue.NumRequeues(uid)
	// The first failures of a key are usually a blip; a key that keeps
	// failing is worth a warning, with less noise as it goes on.
	if n == 2 || n%20 == 19 {
		w.log.Warn("sync keeps failing; retrying with backoff", "deployable", uid, "attempts", n+1, "error", err)
	} else {
		w.log.Debug("sync failed; retrying", "deployable", uid, "error", err)
	}
	w.queue.AddRateLimited(uid)
	return true
}

// sync makes the cluster agree with the source of truth about one
// deployable: present and identical where its placement matches, absent
// elsewhere. It re-reads everything it decides on; the event that queued
// the key is only a hint.
func (w *clusterWorker) sync(ctx context.Context, uid string) error {
	d := w.s.deployable(uid)
	if d == nil {
		return w.removeOrphan(ctx, uid)
	}
	if !d.live() || !w.info.Load().matches(d.placement) {
		return w.remove(ctx, d)
	}
	if d.err != nil {
		return w.setStatus(ctx, d, v1alpha1.StateError, d.err.Error())
	}
	return w.apply(ctx, d)
}

// apply server-side applies the desired object unless the cluster already
// holds what our last apply wrote.
func (w *clusterWorker) apply(ctx context.Context, d *deployable) error {
	uid := d.rec.UID
	mapping, err := w.resolve(d.gvk)
	if err != nil {
		_ = w.setStatus(ctx, d, v1alpha1.StateError, fmt.Sprintf("kind %s is not served by the cluster: %v", d.gvk, err))
		return err // a CRD may be installed later
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	inf, err := w.informer(ctx, mapping.Resource)
	if err != nil {
		_ = w.setStatus(ctx, d, v1alpha1.StateOutOfSync, err.Error())
		return err
	}
	if why := w.s.forbidden(d, namespaced); why != "" {
		// Not applied, and a copy an apply before the rule made is removed
		// (but one of a spec from before authors were recorded: tenancy.go).
		if d.authored {
			if err := w.removeStrays(ctx, uid, schema.GroupVersionResource{}, ""); err != nil {
				return err
			}
		}
		return w.setStatus(ctx, d, v1alpha1.StateError, why)
	}
	ns, key := "", d.name
	if namespaced {
		ns, key = d.rec.Namespace, d.rec.Namespace+"/"+d.name
	}

	w.mu.Lock()
	last := w.lastWrite[uid]
	w.mu.Unlock()
	ours := false
	if item, ok, _ := inf.GetIndexer().GetByKey(key); ok {
		cur := item.(*unstructured.Unstructured)
		ours = cur.GetLabels()[LabelDeployable] == uid
		if ours && last != "" && cur.GetAnnotations()[AnnotationSpecHash] == d.hash && cur.GetResourceVersion() == last {
			// Unchanged since our last apply, by us or anyone: nothing
			// to write. This is what keeps an idle resync silent.
			if err := w.removeStrays(ctx, uid, mapping.Resource, key); err != nil {
				return err
			}
			return w.setStatus(ctx, d, v1alpha1.StateSynced, "")
		}
	}

	var ri dynamic.ResourceInterface = w.dyn.Resource(mapping.Resource)
	if namespaced {
		ri = w.dyn.Resource(mapping.Resource).Namespace(ns)
	}
	// The informer sees only objects carrying our label, so when it has
	// none of ours there, an object someone else created under the same
	// name is looked up directly. It is never applied over: that would
	// take it over.
	var cur *unstructured.Unstructured
	err = nil
	if !ours {
		cur, err = ri.Get(ctx, d.name, metav1.GetOptions{})
	}
	switch {
	case ours:
	case err == nil:
		if owner := cur.GetLabels()[LabelDeployable]; owner != uid {
			msg := fmt.Sprintf("conflict: %s %s already exists on the cluster and is not managed by this deployable; left untouched", d.gvk.Kind, key)
			if owner != "" {
				msg = fmt.Sprintf("conflict: %s %s already exists on the cluster, managed by deployable %s; left untouched",
					d.gvk.Kind, key, cur.GetAnnotations()[AnnotationDeployable])
			}
			if owner != "" {
				// The owner may be gone (purged, tombstoned, renamed):
				// its sync then deletes the copy, and the deletion's
				// event brings this deployable back (enqueueClaimants).
				w.queue.Add(owner)
			}
			// Not retried with backoff: only a change of the object or of
			// the deployable can resolve it; events and the resync see both.
			return w.setStatus(ctx, d, v1alpha1.StateError, msg)
		}
	case apierrors.IsNotFound(err):
	default:
		_ = w.setStatus(ctx, d, v1alpha1.StateOutOfSync, "cannot read the cluster's copy: "+err.Error())
		return err
	}

	applied, err := w.applyObject(ctx, d, ri, namespaced)
	if namespaced && apierrors.IsNotFound(err) {
		// The namespace is missing, typically on a cluster rebuilt empty.
		if err := w.ensureNamespace(ctx, ns); err != nil {
			_ = w.setStatus(ctx, d, v1alpha1.StateOutOfSync, err.Error())
			return err
		}
		applied, err = w.applyObject(ctx, d, ri, namespaced)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.mapper.Reset() // the kind may have gone with a wiped cluster's CRDs
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			// The cluster refuses this spec; retrying cannot help until
			// the spec changes, which the poller announces.
			return w.setStatus(ctx, d, v1alpha1.StateError, "the cluster refused the object: "+err.Error())
		}
		_ = w.setStatus(ctx, d, v1alpha1.StateOutOfSync, "apply failed: "+err.Error())
		return err
	}
	w.mu.Lock()
	w.lastWrite[uid] = applied.GetResourceVersion()
	w.mu.Unlock()
	if err := w.removeStrays(ctx, uid, mapping.Resource, key); err != nil {
		return err
	}
	return w.setStatus(ctx, d, v1alpha1.StateSynced, "")
}

// applyObject builds the object (opening a Secret's values) and applies
// it; the built object goes out of scope with this call, so a Secret's
// values live only as long as the request.
func (w *clusterWorker) applyObject(ctx context.Context, d *deployable, ri dynamic.ResourceInterface, namespaced bool) (*unstructured.Unstructured, error) {
	obj, err := d.object(w.s.cfg.Sealer, namespaced)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	w.s.kubeWrites.Add(1)
	return ri.Apply(ctx, d.name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
}

func (w *clusterWorker) ensureNamespace(ctx context.Context, ns string) error {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
	}}
	w.s.kubeWrites.Add(1)
	_, err := w.dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// remove deletes every object of d from the cluster (it is tombstoned,
// not approved yet, or not placed here any more) and records that.
func (w *clusterWorker) remove(ctx context.Context, d *deployable) error {
	uid := d.rec.UID
	if !d.gvk.Empty() {
		// Without a watch on its kind, a copy left by an earlier run of
		// the syncer would go unseen.
		if mapping, err := w.resolve(d.gvk); err == nil {
			if _, err := w.informer(ctx, mapping.Resource); err != nil {
				return err
			}
		} else if !meta.IsNoMatchError(err) {
			return err
		}
	}
	if err := w.removeStrays(ctx, uid, schema.GroupVersionResource{}, ""); err != nil {
		return err
	}
	switch {
	case d.rec.DeletedAt != nil:
		written, err := w.setStatusWritten(ctx, d, v1alpha1.StateSynced, removedMessage)
		if err != nil {
			return err
		}
		if written {
			w.s.tryPurge(ctx, uid)
		}
		return nil
	case d.rec.Generation == 0:
		return nil // never approved: never applied, no status to keep
	}
	st, err := w.currentStatus(ctx, uid)
	if err != nil || st == nil {
		return err // never placed here: nothing to say
	}
	return w.setStatus(ctx, d, v1alpha1.StateSynced, notPlacedMessage)
}

// removeOrphan deletes objects labelled with a uid that is not in the
// latest poll, once the store confirms it is gone for good: the poll may
// be a moment older than an apply made for a brand-new deployable.
func (w *clusterWorker) removeOrphan(ctx context.Context, uid string) error {
	if len(w.cachedObjects(uid)) == 0 {
		w.forget(uid)
		return nil
	}
	err := w.s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		_, err := tx.GetDeployableByUID(ctx, uid)
		return err
	})
	switch {
	case err == nil:
		return nil // it exists: the next poll brings it, and a sync with it
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := w.removeStrays(ctx, uid, schema.GroupVersionResource{}, ""); err != nil {
		return err
	}
	w.forget(uid)
	return nil
}

func (w *clusterWorker) forget(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.lastWrite, uid)
	delete(w.status, uid)
}

type cachedObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// cachedObjects returns every object labelled uid that the informers see.
func (w *clusterWorker) cachedObjects(uid string) []cachedObject {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []cachedObject
	for gvr, inf := range w.informers {
		items, _ := inf.GetIndexer().ByIndex(byUID, uid)
		for _, it := range items {
			out = append(out, cachedObject{gvr, it.(*unstructured.Unstructured)})
		}
	}
	return out
}

// removeStrays deletes the objects labelled uid other than the one at
// (keep, keepKey): copies under an old name or kind, or every copy when
// keep is empty. The delete is conditional on the uid of the object seen,
// so an object that replaced it meanwhile (perhaps someone else's) is
// never deleted by mistake.
func (w *clusterWorker) removeStrays(ctx context.Context, uid string, keep schema.GroupVersionResource, keepKey string) error {
	for _, c := range w.cachedObjects(uid) {
		key := c.obj.GetName()
		if c.obj.GetNamespace() != "" {
			key = c.obj.GetNamespace() + "/" + key
		}
		if c.gvr == keep && key == keepKey {
			continue
		}
		objUID := types.UID(c.obj.GetUID())
		var ri dynamic.ResourceInterface = w.dyn.Resource(c.gvr)
		if ns := c.obj.GetNamespace(); ns != "" {
			ri = w.dyn.Resource(c.gvr).Namespace(ns)
		}
		w.s.kubeWrites.Add(1)
		err := ri.Delete(ctx, c.obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &objUID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", c.gvr.Resource, key, err)
		}
		w.log.Info("deleted managed object", "resource", c.gvr.Resource, "object", key, "deployable", uid)
	}
	if keepKey == "" {
		w.mu.Lock()
		delete(w.lastWrite, uid)
		w.mu.Unlock()
	}
	return nil
}

// resolve maps a kind to its resource on this cluster, asking discovery
// again once when the kind is unknown, since a CRD may have been installed
// since the last look.
func (w *clusterWorker) resolve(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		w.mapper.Reset()
		m, err = w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// informer returns the synced, label-selected informer of gvr, starting it
// on first use. Its events queue the uid in the object's label, so that a
// change or deletion by anyone is repaired at once.
func (w *clusterWorker) informer(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	w.mu.Lock()
	inf := w.informers[gvr]
	if inf == nil {
		inf = dynamicinformer.NewFilteredDynamicInformer(kuberetry.Dynamic(w.dyn), gvr, metav1.NamespaceAll, 0,
			cache.Indexers{byUID: func(obj any) ([]string, error) {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					if uid := u.GetLabels()[LabelDeployable]; uid != "" {
						return []string{uid}, nil
					}
				}
				return nil, nil
			}},
			func(o *metav1.ListOptions) { o.LabelSelector = LabelDeployable },
		).Informer()
		enqueue := func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if uid := u.GetLabels()[LabelDeployable]; uid != "" {
					w.queue.Add(uid)
				}
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: func(obj any) {
				enqueue(obj)
				w.enqueueClaimants(obj)
			},
		}); err != nil {
			w.mu.Unlock()
			return nil, err
		}
		w.informers[gvr] = inf
		w.wg.Go(func() { inf.RunWithContext(w.ctx) })
	}
	w.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("watch of %s not synced: %w", gvr.Resource, context.Cause(ctx))
	}
	return inf, nil
}

// enqueueClaimants queues the live deployables, other than its owner, that
// want the deleted object's kind and name: one of them may have met the
// object as a conflict, which is not retried, and can take the name now.
// Typically a deployable deleted and re-created under the same name while
// the cluster was unreachable: the old uid's copy is removed as an orphan
// when the cluster answers again, and the new uid must follow at once.
func (w *clusterWorker) enqueueClaimants(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	gk, owner := u.GroupVersionKind().GroupKind(), u.GetLabels()[LabelDeployable]
	for uid, d := range w.s.snapshot() {
		if uid == owner || !d.live() || d.gvk.GroupKind() != gk || d.name != u.GetName() {
			continue
		}
		if ns := u.GetNamespace(); ns != "" && ns != d.rec.Namespace {
			continue
		}
		w.queue.Add(uid)
	}
}

// currentStatus returns the status row of uid on this cluster, reading
// the store only the first time.
func (w *clusterWorker) currentStatus(ctx context.Context, uid string) (*store.DeployableClusterStatus, error) {
	w.mu.Lock()
	st, ok := w.status[uid]
	w.mu.Unlock()
	if ok {
		return st, nil
	}
	var found *store.DeployableClusterStatus
	err := w.s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		found = nil
		all, err := tx.ListDeployableStatus(ctx, uid)
		for _, x := range all {
			if x.Cluster == w.name {
				found = x
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.status[uid] = found
	w.mu.Unlock()
	return found, nil
}

func (w *clusterWorker) setStatus(ctx context.Context, d *deployable, state v1alpha1.SyncState, msg string) error {
	_, err := w.setStatusWritten(ctx, d, state, msg)
	return err
}

// setStatusWritten records the state of d on this cluster, writing only
// when state, generation or message change: an idle resync writes nothing.
// A non-Synced state keeps the generation and time of the last success,
// which is what the cluster still holds.
func (w *clusterWorker) setStatusWritten(ctx context.Context, d *deployable, state v1alpha1.SyncState, msg string) (bool, error) {
	cur, err := w.currentStatus(ctx, d.rec.UID)
	if err != nil {
		return false, err
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	next := &store.DeployableClusterStatus{DeployableUID: d.rec.UID, Cluster: w.name, State: stateOf(state), Message: msg}
	if cur != nil {
		next.SyncedGeneration, next.LastSyncedAt = cur.SyncedGeneration, cur.LastSyncedAt
	}
	if state == v1alpha1.StateSynced {
		next.SyncedGeneration = d.rec.Generation
	}
	if cur != nil && cur.State == next.State && cur.SyncedGeneration == next.SyncedGeneration && cur.Message == next.Message {
		return false, nil
	}
	if state == v1alpha1.StateSynced {
		now := time.Now().UTC()
		next.LastSyncedAt = &now
	}
	w.s.statusWrites.Add(1)
	err = w.s.cfg.Store.Tx(ctx, func(tx *store.Tx) error { return tx.PutDeployableStatus(ctx, next) })
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // purged or deregistered meanwhile: nothing to report on
	}
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.status[d.rec.UID] = next
	w.mu.Unlock()
	return true, nil
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
