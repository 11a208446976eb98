package submitter

import (
	"context"
	"fmt"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// suspension carries a Suspended runnable's suspend or resume to its
// attempt's object: the kind's own field (operate.SuspendSpec) by
// server-side apply on the attempt's cluster. A suspend, once applied, is
// marked so; a resume, once applied, moves the runnable back to Submitted,
// from where the ingester follows its object again.
func (s *Submitter) suspension(ctx context.Context, r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	sp := r.Status.Suspension
	a := openAttempt(attempts)
	if sp == nil || a == nil || (sp.Suspend && sp.Applied) {
		return verdict{}
	}
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return s.suspendRefused(sp, err.Error())
	}
	spec, err := operate.SuspendSpec(gvk.GroupKind(), doc.Spec.Template, sp.Suspend)
	if err != nil {
		return s.suspendRefused(sp, err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if err != nil {
		return retry(err)
	}
	cc, err := s.clients.Get(row)
	if err != nil {
		return retry(err)
	}
	obj := object(r.Rec, doc, gvk, a.Number)
	if err := cc.ApplySpec(ctx, gvk, obj.GetNamespace(), obj.GetName(), a.ObjectUID, spec); err != nil {
		f := classify(err)
		if !f.permanent {
			s.metrics.retries.WithLabelValues(f.reason).Inc()
			return retry(f.retry())
		}
		return s.suspendRefused(sp, f.message())
	}
	what := "suspended"
	if !sp.Suspend {
		what = "resumed"
	}
	msg := fmt.Sprintf("%s %s %s on %s (attempt %d), as %s asked", what, gvk.Kind, ref(obj), a.Cluster, a.Number, sp.By)
	if !sp.Suspend {
		return verdict{move: &transition{
			phase: v1alpha1.PhaseSubmitted, message: msg, clearSuspension: true,
			audit: &audit.Entry{Action: "resume", Summary: msg},
		}}
	}
	done := *sp
	done.Applied, done.Error = true, ""
	return verdict{move: &transition{phase: v1alpha1.PhaseSuspended, message: msg, suspension: &done}}
}

// suspendRefused records why a suspend or resume cannot be applied; it is
// not tried again until the user asks again.
func (s *Submitter) suspendRefused(sp *v1alpha1.Suspension, why string) verdict {
	if sp.Error == why {
		return verdict{}
	}
	failed := *sp
	failed.Error = why
	return verdict{move: &transition{phase: v1alpha1.PhaseSuspended, message: "the cluster refused the change: " + why, suspension: &failed}}
}
