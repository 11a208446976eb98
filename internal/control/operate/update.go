package operate

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// NotUpdatableError says why the object of a runnable that runs cannot
// take its changed template in place. The API answers it with 409: the
// change is refused and nothing is written.
type NotUpdatableError struct{ Message string }

func (e *NotUpdatableError) Error() string { return e.Message }

// rerunAdvice ends every refusal: what the user can do instead.
const rerunAdvice = "cancel it (DELETE) or wait for it to end, then change it and rerun it (POST .../rerun)"

// InPlace reports whether the running object made from old can take the
// template next in place, by server-side apply of next over it, and says
// why not otherwise (a *NotUpdatableError). name is the runnable's, for
// the object's name when a template names none. A changed kind or object
// name can never be applied in place; otherwise the kind's driver says
// (kinds.InPlaceUpdater: a FlinkDeployment yes, through the operator's
// upgrade; a Job and an Argo Workflow no, with the reason), and a kind
// whose driver does not know is not supported yet, since purser cannot
// tell how its controller takes a change while it runs.
func InPlace(old, next map[string]any, name string) error {
	og, ng := kinds.GroupKindOf(old), kinds.GroupKindOf(next)
	if og != ng {
		return &NotUpdatableError{Message: fmt.Sprintf("the template's kind changes from %s to %s, which no object can take in place; %s",
			og, ng, rerunAdvice)}
	}
	if on, nn := v1alpha1.ObjectName(old, name), v1alpha1.ObjectName(next, name); on != nn {
		return &NotUpdatableError{Message: fmt.Sprintf("the template's metadata.name changes from %q to %q, which would be another object; %s",
			on, nn, rerunAdvice)}
	}
	var refused *kinds.InPlaceError
	switch err := kinds.Default().InPlace(og, old, next); {
	case err == nil:
		return nil
	case errors.As(err, &refused) && refused.Unsupported:
		return &NotUpdatableError{Message: refused.Reason + "; " + rerunAdvice}
	default:
		return &NotUpdatableError{Message: err.Error() + ". " + upperFirst(rerunAdvice)}
	}
}

// Update moves nothing but records, for a Submitted, Running or
// Suspended runnable whose spec the caller has just changed to generation
// (in cur.Rec, the caller's own read in the transaction), that the
// submitter is to apply the new template to the open attempt's object in
// place; the message that says so goes through the outbox. Details of
// the audit entry are the caller's to add. A *StateError when the
// runnable has no object that could take it now.
func Update(cur *lifecycle.Runnable, attempts []*store.Attempt, actor string, now time.Time, generation int64) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	phase := cur.Phase()
	n := len(attempts)
	if !lifecycle.Allowed(phase, phase, lifecycle.ByAPI) || n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].ObjectUID == "" ||
		(phase != v1alpha1.PhaseSubmitted && phase != v1alpha1.PhaseRunning && phase != v1alpha1.PhaseSuspended) {
		return nil, stateErr("runnable %s is %s, and has no object on a cluster that could take the change now; "+
			"change it once it runs (Submitted or Running), or %s", ref, phase, rerunAdvice)
	}
	a := attempts[n-1]
	summary := fmt.Sprintf("updated the spec of %s to generation %d while %s; to be applied in place to attempt %d on %s",
		ref, generation, phase, a.Number, a.Cluster)
	return &lifecycle.Transition{
		To: phase, By: lifecycle.ByAPI, Actor: actor,
		Message: summary + "; waiting for the submitter to apply it by server-side apply",
		Edit: func(st *v1alpha1.RunnableStatus) error {
			st.Update = &v1alpha1.Update{Generation: generation, By: actor, At: now, Attempt: a.Number}
			return nil
		},
		Enqueue: stream.SubmissionUpdate, EnqueueAttempt: a.Number,
		Audit: &audit.Entry{Action: "update", Summary: summary},
	}, nil
}

// UpdateSpecKeeps is what an update applied in place keeps of the state
// the object is in, beyond the template itself and what purser sets at
// the create (its labels and annotations, the attempt's mutations): a
// suspended object stays suspended, by the kind's own field. suspended
// says whether the runnable's suspension asks for it (its phase is
// Suspended and no resume is under way). The result is merged over the
// new template's spec; nil when nothing is to keep.
func UpdateSpecKeeps(gk schema.GroupKind, template map[string]any, suspended bool) map[string]any {
	if !suspended {
		return nil
	}
	spec, err := SuspendSpec(gk, template, true)
	if err != nil {
		return nil
	}
	return spec
}

// UpgradeMode is how the object's controller takes the change, for the
// status message, as the kind's driver names it (a FlinkDeployment's
// spec.job.upgradeMode); "" for other kinds.
func UpgradeMode(gk schema.GroupKind, template map[string]any) string {
	return kinds.Default().UpgradeMode(gk, template)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
