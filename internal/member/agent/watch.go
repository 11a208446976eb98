package agent

import (
	"context"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/kuberetry"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/platform/resourceversion"
)

// watch is one tracked kind and its informers: a single one seeing every
// object for a configured kind, one per label of purserLabels for a kind
// tracked for purser's objects only.
type watch struct {
	gvk       schema.GroupVersionKind
	gvr       schema.GroupVersionResource
	informers []cache.SharedIndexInformer
	// stop ends the informers of a labelled kind, when its resource is no
	// longer served, and of a kind no longer asked for (settings.go);
	// configured kinds stop with the term.
	stop context.CancelFunc
}

// consistencyIndex indexes every cache by the value of the consistency
// label, so that fencing finds its objects without scanning the caches.
const consistencyIndex = "consistency"

func byConsistency(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if v, ok := u.GetLabels()[v1alpha1.LabelConsistency]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// discoveryLoop starts an informer for each configured kind the API server
// serves, and looks again for the others every DiscoveryInterval, so that
// a CRD installed later is picked up; it keeps the labelled kinds in step
// with the served resources in the same pass. Informers run under wg.
func (a *Agent) discoveryLoop(ctx context.Context, wg *sync.WaitGroup) {
	reconcile.Every(ctx, a.cfg.DiscoveryInterval, func(ctx context.Context) {
		a.refreshSettings(ctx)
		if kinds := a.kinds(); !a.allWatched(kinds) {
			a.discover(ctx, wg, kinds)
		}
		a.discoverLabelled(ctx, wg)
	})
}

func (a *Agent) allWatched(kinds []schema.GroupVersionKind) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watched) == len(kinds)
}

func (a *Agent) discover(ctx context.Context, wg *sync.WaitGroup, kinds []schema.GroupVersionKind) {
	for _, gvk := range kinds {
		a.mu.Lock()
		_, ok := a.watched[gvk]
		a.mu.Unlock()
		if ok || ctx.Err() != nil {
			continue
		}
		gvr, found, err := a.resourceFor(ctx, gvk)
		if err != nil {
			a.log.Warn("discovery failed; will retry", "kind", gvk.String(), "error", err)
			continue
		}
		if !found {
			a.log.Debug("kind not served yet", "kind", gvk.String())
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		w := a.newWatch(wctx, gvk, gvr, nil)
		w.stop = stop
		a.mu.Lock()
		if !slices.Contains(a.cfg.Kinds, gvk) && !slices.Contains(a.asked, gvk) {
			// No longer asked for since the pass began.
			a.mu.Unlock()
			stop()
			continue
		}
		a.watched[gvk] = w
		a.mu.Unlock()
		w.run(wctx, wg)
		a.log.Info("watching", "kind", gvk.String(), "resource", gvr.Resource)
	}
}

// resourceFor finds the resource that serves gvk; found is false when the
// group version or the kind is not (yet) served.
func (a *Agent) resourceFor(ctx context.Context, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, found bool, err error) {
	list, err := a.disc.ServerResourcesForGroupVersionWithContext(ctx, gvk.GroupVersion().String())
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

// newWatch builds the informers of one kind: one over every object when
// selectors is empty, else one per label selector.
func (a *Agent) newWatch(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, selectors []string) *watch {
	w := &watch{gvk: gvk, gvr: gvr}
	if len(selectors) == 0 {
		selectors = []string{""}
	}
	for i, sel := range selectors {
		var tweak dynamicinformer.TweakListOptionsFunc
		if sel != "" {
			tweak = func(o *metav1.ListOptions) { o.LabelSelector = sel }
		}
		// Patient lists and watches: after a kube-apiserver outage the
		// cluster's events flow again within a second or two.
		inf := dynamicinformer.NewFilteredDynamicInformer(kuberetry.Dynamic(a.dyn), gvr, metav1.NamespaceAll, 0,
			cache.Indexers{consistencyIndex: byConsistency}, tweak).Informer()
		// SetTransform fails only once the informer runs, which it does not yet.
		_ = inf.SetTransform(Trim)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The initial list waits for room in the queue instead of
			// overflowing it: a start with more objects than QueueSize would
			// otherwise always end in a resync that publishes them twice. The
			// wait costs little memory, since the informer's pending
			// notifications point at objects its cache holds anyway.
			AddFunc: func(obj any, initial bool) { a.enqueue(ctx, w, stream.EventAdded, obj, initial) },
			UpdateFunc: func(oldObj, newObj any) {
				o, okOld := oldObj.(*unstructured.Unstructured)
				n, okNew := newObj.(*unstructured.Unstructured)
				if okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion() {
					return // a relist of an unchanged object
				}
				a.enqueue(ctx, w, stream.EventModified, newObj, false)
			},
			DeleteFunc: func(obj any) {
				// A tombstone carries the last state the cache knew; the
				// ingester's ordering rule treats its version like any other.
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if w.heldElsewhere(i, obj) {
					// It lost one of purser's labels and keeps another:
					// it is still tracked, and the other informer sends
					// its update.
					return
				}
				a.enqueue(ctx, w, stream.EventDeleted, obj, false)
			},
		})
		w.informers = append(w.informers, inf)
	}
	return w
}

// run starts the informers under wg.
func (w *watch) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, inf := range w.informers {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// heldElsewhere reports whether obj, gone from informer i, is still in
// another informer of the same kind: a watch with a label selector reports
// an object that lost the label as deleted.
func (w *watch) heldElsewhere(i int, obj any) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(w.informers) < 2 {
		return false
	}
	key, err := cache.MetaNamespaceKeyFunc(u)
	if err != nil {
		return false
	}
	for j, inf := range w.informers {
		if j == i {
			continue
		}
		if other, ok, _ := inf.GetStore().GetByKey(key); ok {
			if o, isU := other.(*unstructured.Unstructured); isU && o.GetUID() == u.GetUID() {
				return true
			}
		}
	}
	return false
}

// synced reports whether every informer has its initial list.
func (w *watch) synced() bool {
	for _, inf := range w.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// list returns the kind's snapshot: the list resourceVersion and the
// [uid, resourceVersion] of every cached object. ok is false until every
// informer has synced. With several informers the union is at least as new
// as the oldest of their versions, which is what the list claims; versions
// that do not compare (resourceversion.Compare) have no oldest, and the
// kind waits for a later snapshot.
func (w *watch) list() (rv string, items [][2]string, ok bool) {
	if !w.synced() {
		return "", nil, false
	}
	if len(w.informers) == 1 {
		inf := w.informers[0]
		rv = inf.LastSyncResourceVersion()
		objs := inf.GetStore().List()
		items = make([][2]string, 0, len(objs))
		for _, obj := range objs {
			if u, isU := obj.(*unstructured.Unstructured); isU {
				items = append(items, [2]string{string(u.GetUID()), u.GetResourceVersion()})
			}
		}
		return rv, items, true
	}
	oldest := w.informers[0].LastSyncResourceVersion()
	for _, inf := range w.informers[1:] {
		v := inf.LastSyncResourceVersion()
		c, ordered := resourceversion.Compare(v, oldest)
		if !ordered {
			return "", nil, false
		}
		if c < 0 {
			oldest = v
		}
	}
	seen := map[string]bool{}
	items = [][2]string{}
	for _, inf := range w.informers {
		for _, obj := range inf.GetStore().List() {
			u, isU := obj.(*unstructured.Unstructured)
			if !isU {
				continue
			}
			uid := string(u.GetUID())
			if seen[uid] {
				continue
			}
			seen[uid] = true
			items = append(items, [2]string{uid, u.GetResourceVersion()})
		}
	}
	return oldest, items, true
}

// count is the number of distinct cached objects.
func (w *watch) count() int {
	if len(w.informers) == 1 {
		return len(w.informers[0].GetStore().ListKeys())
	}
	keys := map[string]struct{}{}
	for _, inf := range w.informers {
		for _, k := range inf.GetStore().ListKeys() {
			keys[k] = struct{}{}
		}
	}
	return len(keys)
}

// withConsistency returns the cached objects whose consistency label is
// value, each once.
func (w *watch) withConsistency(value string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, inf := range w.informers {
		objs, err := inf.GetIndexer().ByIndex(consistencyIndex, value)
		if err != nil {
			continue // the index exists on every informer built by newWatch
		}
		for _, obj := range objs {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || seen[string(u.GetUID())] {
				continue
			}
			seen[string(u.GetUID())] = true
			out = append(out, u)
		}
	}
	return out
}
