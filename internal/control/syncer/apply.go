package syncer

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

const notPlacedMessage = "removed: the cluster no longer matches the placement"

// outcome is what one apply or removal of a deployable came to on the
// cluster: the status row to record (none when state is empty) and err,
// which sends the key back to the queue with backoff. A state with no err
// is final until the deployable or the object changes; a state with an
// err says what went wrong while the key is retried.
type outcome struct {
	state   v1alpha1.SyncState
	message string
	err     error
	reason  string // status.clusters[].reason: AdmissionDenied, or ""
}

func synced(message string) outcome { return outcome{state: v1alpha1.StateSynced, message: message} }

// retry is an outcome that writes no status row, only retries.
func retry(err error) outcome { return outcome{err: err} }

// apply server-side applies the desired object unless the cluster already
// holds what our last apply wrote.
func (w *clusterWorker) apply(ctx context.Context, d *deployable) outcome {
	uid := d.rec.UID
	mapping, err := w.kube.Mapping(d.gvk)
	if err != nil {
		// Retried: a CRD may be installed later.
		return outcome{state: v1alpha1.StateError, message: fmt.Sprintf("kind %s is not served by the cluster: %v", d.gvk, err), err: err}
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	inf, err := w.informer(ctx, mapping.Resource)
	if err != nil {
		return outcome{state: v1alpha1.StateOutOfSync, message: err.Error(), err: err}
	}
	if why := w.s.forbidden(d, namespaced); why != "" {
		return w.refused(ctx, d, "", why)
	}
	// The object exactly as this cluster is to get it, admitted here,
	// before anything is written: the one place the syncer writes.
	labels := w.info.Load().Labels
	obj, err := d.object(w.s.cfg.Sealer, namespaced, labels)
	switch {
	case errors.Is(err, v1alpha1.ErrTooLarge), errors.Is(err, v1alpha1.ErrIdentity):
		return w.refused(ctx, d, admission.ReasonDenied, w.s.refusal(d, admission.ReasonDenied, err.Error()))
	case err != nil:
		// The spec cannot be rendered for this cluster (an override that
		// does not apply to what the others made); retrying cannot help
		// until the spec changes.
		return outcome{state: v1alpha1.StateError, message: "the object cannot be rendered for this cluster: " + err.Error()}
	}
	which := v1alpha1.OverridesFor(d.overrides, labels)
	if why := w.s.admit(d, obj.Object, which, w.scope); why != "" {
		return w.refused(ctx, d, admission.ReasonDenied, why)
	}
	ns, key := "", d.name
	if namespaced {
		ns, key = d.rec.Namespace, d.rec.Namespace+"/"+d.name
	}
	if d.observe {
		ri := w.dyn.Resource(mapping.Resource).Namespace(ns)
		return w.observe(ctx, d, ri, namespaced)
	}

	w.mu.Lock()
	last := w.lastWrite[uid]
	w.mu.Unlock()
	ours := false
	if item, ok, _ := inf.GetIndexer().GetByKey(key); ok {
		cur := item.(*unstructured.Unstructured)
		ours = cur.GetLabels()[LabelDeployable] == uid
		if ours && last != "" && cur.GetAnnotations()[AnnotationSpecHash] == w.hashOf(d) && cur.GetResourceVersion() == last {
			// Unchanged since our last apply, by us or anyone: nothing
			// to write. This is what keeps an idle resync silent.
			if err := w.removeStrays(ctx, uid, mapping.Resource, key); err != nil {
				return retry(err)
			}
			return synced("")
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
			return outcome{state: v1alpha1.StateError, message: msg}
		}
	case apierrors.IsNotFound(err):
	default:
		return outcome{state: v1alpha1.StateOutOfSync, message: "cannot read the cluster's copy: " + err.Error(), err: err}
	}

	applied, err := w.applyObject(ctx, d, ri, obj)
	if namespaced && apierrors.IsNotFound(err) {
		// The namespace is missing, typically on a cluster rebuilt empty.
		w.s.kubeWrites.Add(1)
		if err := w.kube.EnsureNamespace(ctx, ns); err != nil {
			return outcome{state: v1alpha1.StateOutOfSync, message: err.Error(), err: err}
		}
		applied, err = w.applyObject(ctx, d, ri, obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.kube.Rediscover() // the kind may have gone with a wiped cluster's CRDs
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			// The cluster refuses this spec; retrying cannot help until
			// the spec changes, which the poller announces.
			return outcome{state: v1alpha1.StateError, message: "the cluster refused the object: " + err.Error()}
		}
		return outcome{state: v1alpha1.StateOutOfSync, message: "apply failed: " + err.Error(), err: err}
	}
	w.mu.Lock()
	w.lastWrite[uid] = applied.GetResourceVersion()
	w.mu.Unlock()
	if err := w.removeStrays(ctx, uid, mapping.Resource, key); err != nil {
		return retry(err)
	}
	return synced("")
}

// refused is the outcome of a deployable the policy or admission refuses
// on this cluster (reason "" or admission.ReasonDenied, why the message):
// nothing is applied, and a copy an apply before the rule made is removed
// (but one of a spec from before authors were recorded: tenancy.go). The
// informer of its kind, just started, holds that copy. Not retried: a
// change of the deployable, or the resync after a change of the policy,
// decides again.
func (w *clusterWorker) refused(ctx context.Context, d *deployable, reason, why string) outcome {
	if d.authored {
		if err := w.removeStrays(ctx, d.rec.UID, schema.GroupVersionResource{}, ""); err != nil {
			return outcome{state: v1alpha1.StateError, reason: reason, message: why, err: err}
		}
	}
	return outcome{state: v1alpha1.StateError, reason: reason, message: why}
}

// hashOf is the spec hash of d's object on this cluster.
func (w *clusterWorker) hashOf(d *deployable) string {
	return d.hashFor(v1alpha1.OverridesFor(d.overrides, w.info.Load().Labels))
}

// applyObject applies the object apply built and admitted; it goes out of
// scope when apply returns, so a Secret's values live only as long as the
// sync.
func (w *clusterWorker) applyObject(ctx context.Context, d *deployable, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	w.s.kubeWrites.Add(1)
	return ri.Apply(ctx, d.name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
}

// remove deletes every object of d from the cluster (it is tombstoned,
// not approved yet, or not placed here any more) and says what to record.
func (w *clusterWorker) remove(ctx context.Context, d *deployable) outcome {
	uid := d.rec.UID
	if !d.gvk.Empty() {
		// Without a watch on its kind, a copy left by an earlier run of
		// the syncer would go unseen.
		if mapping, err := w.kube.Mapping(d.gvk); err == nil {
			if _, err := w.informer(ctx, mapping.Resource); err != nil {
				return retry(err)
			}
		} else if !meta.IsNoMatchError(err) {
			return retry(err)
		}
	}
	if err := w.removeStrays(ctx, uid, schema.GroupVersionResource{}, ""); err != nil {
		return retry(err)
	}
	switch {
	case d.rec.DeletedAt != nil:
		return synced(removedMessage)
	case d.rec.Generation == 0:
		return outcome{} // never approved: never applied, no status to keep
	}
	st, err := w.currentStatus(ctx, uid)
	if err != nil || st == nil {
		return retry(err) // never placed here (no error): nothing to say
	}
	return synced(notPlacedMessage)
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
		_, err := tx.Deployables().GetByUID(ctx, uid)
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

// scope is how this worker's cluster serves a kind, for the policy.
func (w *clusterWorker) scope(gvk schema.GroupVersionKind) policy.Scope {
	m, err := w.kube.Mapping(gvk)
	switch {
	case err != nil:
		return policy.ScopeUnknown
	case m.Scope.Name() == meta.RESTScopeNameNamespace:
		return policy.ScopeNamespaced
	}
	return policy.ScopeCluster
}
