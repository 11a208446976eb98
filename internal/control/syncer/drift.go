package syncer

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/member/kuberetry"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Drift detection: label-selected informers on the kinds in use hold what
// the cluster has of ours, and their events bring a changed or deleted
// object back to the queue. The resync is the safety net, and the checks
// below catch the one failure the informers cannot see, a cluster rebuilt
// or restored under their feet.

const (
	// byUID indexes cached objects by the deployable uid in their label.
	byUID = "purser-deployable-uid"

	// identityCheckPeriod is how often the cluster's identity is read; it
	// bounds how long a rebuilt cluster stays empty. One GET per cluster.
	identityCheckPeriod = 5 * time.Second
)

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

// resync is the queue's resync: every key, at start and then every
// jittered period, the safety net for anything the informers and the
// poller missed. The skip rule of apply trusts the informers' caches, so
// the worker also checks that they still describe the cluster: cheaply
// every few seconds (the cluster's identity, checkIdentity), thoroughly
// before each resync but the first (its objects).
func (w *clusterWorker) resync(ctx context.Context) ([]string, error) {
	// The identity is taken first, before anything is applied, so that a
	// rebuild right after the first sync is not mistaken for the original.
	select {
	case <-w.identified:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.resyncs++
	if w.stale.Load() || (w.resyncs > 1 && w.cachesStale(ctx)) {
		w.markStale()
		return nil, nil
	}
	return w.keys(), nil
}

// checkIdentity reads the cluster's identity at start and then every
// identityCheck; a new one marks the worker stale.
func (w *clusterWorker) checkIdentity(ctx context.Context) {
	first := true
	var identity string
	reconcile.Every(ctx, w.s.identityCheck, func(ctx context.Context) {
		if !first && w.stale.Load() {
			return // about to be replaced: nothing left to check
		}
		id, err := w.clusterIdentity(ctx)
		switch {
		case first:
			first, identity = false, id
			close(w.identified)
		case err != nil, id == identity:
		case identity == "":
			identity = id
		default:
			w.markStale()
		}
	})
}

// markStale has the syncer replace the worker on its next pass: rebuilding
// it (clients, discovery, informers, and the memory of our last writes) is
// the one sure way back.
func (w *clusterWorker) markStale() {
	if !w.stale.Swap(true) {
		w.log.Warn("cluster was rebuilt or restored since the watches started; restarting work on it")
	}
}

// clusterIdentity is the uid of the kube-system namespace, which a
// rebuilt cluster gets anew: the usual stand-in for a cluster id. A
// rebuilt cluster's watches do not necessarily fail; they may resume at a
// resourceVersion the new etcd has not reached and wait in silence.
func (w *clusterWorker) clusterIdentity(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
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
func (w *clusterWorker) cachesStale(ctx context.Context) bool {
	w.mu.Lock()
	infs := maps.Clone(w.informers)
	w.mu.Unlock()
	for gvr, inf := range infs {
		missing, err := w.missingFromCluster(ctx, gvr, inf, nil)
		if err != nil || len(missing) == 0 {
			continue // unreachable: the informer's own retries apply
		}
		if !reconcile.Sleep(ctx, 2*time.Second) {
			return false
		}
		if again, err := w.missingFromCluster(ctx, gvr, inf, missing); err == nil && len(again) > 0 {
			return true
		}
	}
	return false
}

// missingFromCluster returns the keys of cached objects (among only, when
// given) that the cluster does not hold at the cached resourceVersion or
// later; every cached key when the cluster's list is older than the cache.
func (w *clusterWorker) missingFromCluster(ctx context.Context, gvr schema.GroupVersionResource, inf cache.SharedIndexInformer, only map[string]string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
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
