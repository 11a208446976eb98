package agent

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Fencing keeps the promise of consistency AtMostOne when a cluster is cut
// off from the hub: the control plane places such a runnable elsewhere
// only once this agent's lease has expired (plus a margin), and by then the
// agent, which counts the same lease on its own clock, has stopped the
// copy here. The lease expires only when both its paths are silent: no
// heartbeat acknowledged by the stream and no renewal of the hub's Lease
// seen (hublease.go), so an outage of the stream alone fences nothing.
// Fencing is one-way for the agent: when a path is back it resumes
// nothing, since the control plane may have moved the work meanwhile and
// is the one to decide; the control plane resumes (or recreates) what it
// did not move once the cluster is Ready again.

// Fencing actions.
const (
	fenceSuspend = "suspend"
	fenceDelete  = "delete"
)

// fencing is what to do to one object; a zero fencing means nothing, the
// object being suspended or on its way out already.
type fencing struct {
	action string
	patch  []byte // the merge patch of fenceSuspend
}

// fencingFor decides how to stop u, as its kind's driver says
// (kinds.Fencer: a Job suspended, its pods deleted and the Job and its
// history kept; a FlinkDeployment's job suspended so that the operator
// stops it with a state the next attempt can restore from, a session
// cluster deleted); a kind whose driver knows no fence is deleted.
func fencingFor(gk schema.GroupKind, u *unstructured.Unstructured, now time.Time) fencing {
	if u.GetDeletionTimestamp() != nil {
		return fencing{}
	}
	spec, remove := kinds.Default().Fence(gk, u.Object)
	switch {
	case remove:
		return fencing{action: fenceDelete}
	case spec == nil:
		return fencing{}
	}
	return suspendPatch(u, spec, now)
}

// suspendPatch is a merge patch of spec that applies only to u itself: the
// uid makes the API server refuse it on another object of the same name.
func suspendPatch(u *unstructured.Unstructured, spec map[string]any, now time.Time) fencing {
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":         string(u.GetUID()),
			"annotations": map[string]any{v1alpha1.AnnotationFenced: now.UTC().Format(time.RFC3339)},
		},
		"spec": spec,
	})
	return fencing{action: fenceSuspend, patch: patch}
}

// fenceRepeat is how often fencing runs again while the lease stays
// expired, for objects created since (by a submitter that still thinks the
// cluster is the runnable's).
func (a *Agent) fenceRepeat() time.Duration { return min(a.cfg.HeartbeatInterval, time.Second) }

// fenceCallTimeout bounds one call to the kube-apiserver, so that one
// hanging call does not hold back the objects after it.
const fenceCallTimeout = 10 * time.Second

// fenceLoop wakes when the lease would expire, and fences while it is
// expired.
func (a *Agent) fenceLoop(ctx context.Context) {
	var done map[types.UID]string // fenced objects: uid -> the cached resourceVersion acted upon
	q := reconcile.New(func(ctx context.Context, _ struct{}) (reconcile.Result, error) {
		left := a.leaseLeft()
		switch {
		case a.returned.Load():
			// Back after a gap longer than the lease: one pass over the
			// full caches fences what ran here before.
			if !a.cachesSynced() {
				left = a.fenceRepeat()
				break
			}
			a.fence(ctx, map[types.UID]string{})
			a.returned.Store(false)
			a.log.Info("fenced the AtMostOne work found on return; the control plane resumes what did not move", "fenced", a.fenced.Load())
			left = min(max(left, 0), a.fenceRepeat())
		case left > 0 && done != nil:
			done = nil
			a.log.Info("the lease holds again; fenced objects stay stopped until the control plane resumes what did not move", "fenced", a.fenced.Load())
		case left <= 0:
			if done == nil {
				done = map[types.UID]string{}
				a.log.Warn("lease expired: no heartbeat acknowledged by the stream and no renewal of the hub's Lease seen for the lease duration; fencing objects labelled "+
					v1alpha1.LabelConsistency+"="+v1alpha1.ConsistencyAtMostOne, "leaseDuration", a.cfg.LeaseDuration)
			}
			a.fence(ctx, done)
			left = a.fenceRepeat()
		}
		return reconcile.Result{RequeueAfter: max(left, time.Nanosecond)}, nil
	}, reconcile.Config[struct{}]{Name: "fencing"})
	q.Add(struct{}{})
	// The loop waits until the lease would run out, which on a new term
	// is a whole lease away: a return found meanwhile must not wait for
	// it, since the work may have moved already.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.fenceNow:
				q.Add(struct{}{})
			}
		}
	})
	_ = q.Run(ctx)
}

// cachesSynced reports whether every watch has its initial list.
func (a *Agent) cachesSynced() bool {
	ws := a.watches()
	for _, w := range ws {
		if !w.synced() {
			return false
		}
	}
	return len(ws) > 0
}

// fence stops every cached object labelled AtMostOne that is not stopped
// yet. The caches hold every object of the configured kinds and purser's
// objects of all the others, which is where the submitter's labels put
// them. done skips the objects fenced at the version the cache still
// holds, until the cache sees the change. A failure is logged and retried
// on the next pass.
func (a *Agent) fence(ctx context.Context, done map[types.UID]string) {
	for _, w := range a.watches() {
		for _, u := range w.withConsistency(v1alpha1.ConsistencyAtMostOne) {
			if ctx.Err() != nil {
				return
			}
			if rv, ok := done[u.GetUID()]; ok && rv == u.GetResourceVersion() {
				continue
			}
			f := fencingFor(w.gvk.GroupKind(), u, time.Now())
			if f.action == "" {
				continue
			}
			err := a.applyFencing(ctx, w.gvr, u, f)
			switch {
			case apierrors.IsNotFound(err):
				continue // gone already
			case err != nil:
				if ctx.Err() == nil {
					a.log.Warn("fencing failed; will retry", "kind", w.gvk.String(), "namespace", u.GetNamespace(),
						"name", u.GetName(), "action", f.action, "error", err)
				}
				continue
			}
			done[u.GetUID()] = u.GetResourceVersion()
			a.fenced.Add(1)
			a.log.Warn("fenced", "kind", w.gvk.String(), "namespace", u.GetNamespace(), "name", u.GetName(),
				"uid", u.GetUID(), "action", f.action, "fencedTotal", a.fenced.Load())
		}
	}
}

func (a *Agent) applyFencing(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, f fencing) error {
	ctx, cancel := context.WithTimeout(ctx, fenceCallTimeout)
	defer cancel()
	var r dynamic.ResourceInterface = a.dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		r = a.dyn.Resource(gvr).Namespace(ns)
	}
	if f.action == fenceSuspend {
		_, err := r.Patch(ctx, u.GetName(), types.MergePatchType, f.patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	}
	// Before it goes, the object is marked fenced, as a suspended one
	// is: the ingester records the mark on its runnable (status.fenced),
	// which is how the control plane knows to create it again from its
	// template when the cluster is Ready again and the runnable was not
	// moved. The mark is worth a try, not the fence: the delete follows
	// whatever became of it, since stopping the copy is what matters.
	uid := u.GetUID()
	if _, err := r.Patch(ctx, u.GetName(), types.MergePatchType, fencedMark(u, time.Now()), metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return err // gone, or another object of the name
		}
		a.log.Warn("marking an object fenced before deleting it failed; deleting it anyway (the control plane will not recreate it)",
			"kind", u.GetKind(), "namespace", u.GetNamespace(), "name", u.GetName(), "error", err)
	}
	policy := metav1.DeletePropagationBackground
	return r.Delete(ctx, u.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
}

// fencedMark is the merge patch that marks u fenced at now, and applies
// to u only (its uid).
func fencedMark(u *unstructured.Unstructured, now time.Time) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         string(u.GetUID()),
		"annotations": map[string]any{v1alpha1.AnnotationFenced: now.UTC().Format(time.RFC3339)},
	}})
	return patch
}

// fieldManager names the agent's writes in managedFields.
const fieldManager = "purser-agent"
