package submitter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// fencedRetry is how soon an update held by a fenced object is looked at
// again: the fence ends when the controller resumes the object.
const fencedRetry = 5 * time.Second

// updatePending reports whether the runnable's spec is newer than what
// its open attempt's object carries, and the user's update was not
// refused by the cluster already.
func updatePending(r *lifecycle.Runnable, a *store.Attempt) bool {
	if a == nil || a.ObjectUID == "" || a.Generation >= r.Rec.Generation {
		return false
	}
	u := r.Status.Update
	return u == nil || u.Generation != r.Rec.Generation || u.Error == ""
}

// update applies a Submitted, Running or Suspended runnable's changed
// spec to its open attempt's object, in place: the object as the create
// built it from the new template (purser's labels and annotations, the
// mutations of spec.failover with what the attempt carried in, such as a
// FlinkDeployment's initialSavepointPath), kept suspended when the
// runnable is, by server-side apply bound to the object's uid. The kind's
// controller takes it from there (a FlinkDeployment's operator upgrades
// the job by its upgradeMode). Once applied, the attempt carries the
// runnable's generation; a permanent refusal is recorded in status.update
// and not tried again until the spec changes again. The runnable keeps its
// phase and attempt.
func (s *Submitter) update(ctx context.Context, r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	a := openAttempt(attempts)
	if !updatePending(r, a) {
		return verdict{}
	}
	if r.Status.Fenced {
		// The agent suspended the object when its lease ran out: the
		// template would resume it. The controller lifts the fence first.
		return verdict{after: fencedRetry}
	}
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return s.updateRefused(r, a, err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return verdict{} // the failover controller moves it; the next attempt is created from the new spec
	}
	if err != nil {
		return retry(err)
	}
	obj, err := updatedObject(r, doc, gvk, a)
	if err != nil {
		return s.updateRefused(r, a, "the failover settings cannot be applied to the changed spec: "+err.Error())
	}
	if why := s.unapproved(r); why != "" {
		return s.updateRefused(r, a, why)
	}
	kept, restorePath := carried(a)
	blame := blamer(func() *unstructured.Unstructured { return object(r.Rec, doc, gvk, a.Number) }, &doc.Spec, kept, restorePath)
	if err := s.authorize(ctx, row, r.Rec, doc, gvk, obj, blame); err != nil {
		var f *failure
		if errors.As(err, &f) && f.permanent {
			return s.updateRefused(r, a, f.message())
		}
		return retry(err)
	}
	cc, err := s.clients.Get(row)
	if err != nil {
		return retry(err)
	}
	applied, err := cc.ApplyObject(ctx, obj, a.ObjectUID)
	if err != nil {
		f := classify(err)
		if !f.permanent {
			s.metrics.retries.WithLabelValues(f.reason).Inc()
			return retry(f.retry())
		}
		return s.updateRefused(r, a, f.message())
	}
	msg := fmt.Sprintf("applied generation %d of the spec to %s %s on %s in place (attempt %d; the object's metadata.generation is now %d)",
		r.Rec.Generation, gvk.Kind, ref(obj), a.Cluster, a.Number, applied.GetGeneration())
	if mode := operate.UpgradeMode(gvk.GroupKind(), doc.Spec.Template); mode != "" {
		msg += fmt.Sprintf("; the Flink operator upgrades the job by its upgradeMode %s", mode)
	}
	if by := updatedBy(r); by != "" {
		msg += ", as " + by + " asked"
	}
	gen := r.Rec.Generation
	done := v1alpha1.Update{Generation: gen, Attempt: a.Number, At: s.now()}
	if u := r.Status.Update; u != nil && u.Generation == gen {
		done = *u
		done.Error = ""
	}
	return verdict{move: &transition{
		phase: r.Phase(), message: msg, update: &done, applied: &appliedGeneration{number: a.Number, generation: gen},
		audit: &audit.Entry{Action: "apply-update", Summary: msg},
	}}
}

// updatedObject is the object the open attempt a would have been created
// as from the runnable's current spec.
func updatedObject(r *lifecycle.Runnable, doc *runnableDoc, gvk schema.GroupVersionKind, a *store.Attempt) (*unstructured.Unstructured, error) {
	obj := object(r.Rec, doc, gvk, a.Number)
	kept, restorePath := carried(a)
	if err := attempt.Prepare(obj, &doc.Spec, kept, restorePath); err != nil {
		return nil, err
	}
	suspended := false
	if sp := r.Status.Suspension; r.Phase() == v1alpha1.PhaseSuspended && sp != nil {
		suspended = sp.Suspend
	}
	if keep := operate.UpdateSpecKeeps(gvk.GroupKind(), doc.Spec.Template, suspended); keep != nil {
		spec, _ := obj.Object["spec"].(map[string]any)
		obj.Object["spec"] = mergeInto(spec, keep)
	}
	return obj, nil
}

// carried is what attempt a carried in: its preserved values and its
// restore point's path.
func carried(a *store.Attempt) (map[string]string, string) {
	kept := maps.Clone(a.CarriedIn)
	restorePath := kept[attempt.RestorePathKey]
	delete(kept, attempt.RestorePathKey)
	return kept, restorePath
}

// mergeInto merges patch (a JSON merge patch of maps and values) into a
// copy of base.
func mergeInto(base, patch map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range patch {
		pm, ok := v.(map[string]any)
		bm, isMap := out[k].(map[string]any)
		if ok && isMap {
			out[k] = mergeInto(bm, pm)
			continue
		}
		out[k] = v
	}
	return out
}

func updatedBy(r *lifecycle.Runnable) string {
	if u := r.Status.Update; u != nil && u.Generation == r.Rec.Generation {
		return u.By
	}
	return ""
}

// updateRefused records why the cluster (or the policy) refused the
// update; it is not tried again until the spec changes again.
func (s *Submitter) updateRefused(r *lifecycle.Runnable, a *store.Attempt, why string) verdict {
	gen := r.Rec.Generation
	failed := v1alpha1.Update{Generation: gen, Attempt: a.Number, At: s.now()}
	if u := r.Status.Update; u != nil && u.Generation == gen {
		if u.Error == why {
			return verdict{}
		}
		failed = *u
	}
	failed.Error = why
	msg := fmt.Sprintf("generation %d of the spec could not be applied in place to attempt %d on %s: %s; "+
		"the object runs on with generation %d; change the spec again, or cancel and rerun it", gen, a.Number, a.Cluster, why, a.Generation)
	return verdict{move: &transition{
		phase: r.Phase(), message: msg, update: &failed,
		audit: &audit.Entry{Action: "apply-update", Summary: msg},
	}}
}

// appliedGeneration is the spec's generation an attempt's object carries
// once an update reached it (store.Attempts.SetGeneration).
type appliedGeneration struct {
	number     int
	generation int64
}
