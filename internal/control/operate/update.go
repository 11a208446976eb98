package operate

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/flink"
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
// the object's name when a template names none.
//   - FlinkDeployment: yes. The operator compares the spec with the last
//     one it reconciled and upgrades the running job by the spec's
//     upgradeMode (stateless, savepoint, last-state), suspending it first
//     (flink-kubernetes-operator, AbstractJobReconciler
//     .reconcileSpecChange; a session cluster by SessionReconciler
//     .reconcileSpecChange: deleted and deployed again).
//   - Job: no. Its pod template is immutable once created (the API
//     server's validation of a Job update, ValidateJobSpecUpdate, refuses
//     a change of spec.template unless the Job is suspended and never
//     started).
//   - Argo Workflow: no. The workflow controller executes the spec it
//     stored at its first reconcile (status.storedWorkflowTemplateSpec,
//     workflow/controller/operator.go setExecWorkflow and setStoredWfSpec)
//     and takes from later changes only spec.suspend, spec.shutdown and
//     the entrypoint (needsStoredWfSpecUpdate): a changed step would be
//     stored and never run.
//   - any other kind: not supported yet, since purser cannot tell how its
//     controller takes a change while it runs.
//
// A changed kind or object name can never be applied in place.
func InPlace(old, next map[string]any, name string) error {
	og, ng := groupKind(old), groupKind(next)
	if og != ng {
		return &NotUpdatableError{Message: fmt.Sprintf("the template's kind changes from %s to %s, which no object can take in place; %s",
			og, ng, rerunAdvice)}
	}
	if on, nn := v1alpha1.ObjectName(old, name), v1alpha1.ObjectName(next, name); on != nn {
		return &NotUpdatableError{Message: fmt.Sprintf("the template's metadata.name changes from %q to %q, which would be another object; %s",
			on, nn, rerunAdvice)}
	}
	switch og {
	case flinkKind:
		return nil
	case jobKind:
		return &NotUpdatableError{Message: "a Job's pod template is immutable on its cluster: the change cannot reach the running Job. " +
			upperFirst(rerunAdvice)}
	case workflowKind:
		return &NotUpdatableError{Message: "an Argo Workflow runs the spec its controller stored when it started " +
			"(status.storedWorkflowTemplateSpec) and takes only spec.suspend and spec.shutdown from later changes: " +
			"the change would never run. " + upperFirst(rerunAdvice)}
	}
	return &NotUpdatableError{Message: fmt.Sprintf("changing the object of a running %s in place is not supported yet "+
		"(purser updates a FlinkDeployment in place, through the Flink operator's upgrade); %s", og, rerunAdvice)}
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
// status message: a FlinkDeployment's spec.job.upgradeMode (stateless
// when it names none, as the operator's JobSpec defaults it); "" for
// other kinds.
func UpgradeMode(gk schema.GroupKind, template map[string]any) string {
	if gk != flinkKind {
		return ""
	}
	return flink.UpgradeMode(template)
}

func groupKind(template map[string]any) schema.GroupKind {
	apiVersion, _ := template["apiVersion"].(string)
	kind, _ := template["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return schema.GroupKind{Group: gv.Group, Kind: kind}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
