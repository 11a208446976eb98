package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// updateRunnable serves PUT /api/v1/runnables/{ns}/{name}: a changed spec,
// optimistic on metadata.resourceVersion (required; 409 when the runnable
// moved since it was read, and nothing changes). A runnable waiting for a
// cluster or ended takes the new spec for its next attempt (placement,
// rerun, retry). One that runs keeps its object as it is: a Job's pod
// template is immutable on its cluster, so the answer says so and offers
// rerun; in-place changes of other kinds are not built yet and are refused
// the same way. The same spec again is a 200 that writes nothing.
func (s *Server) updateRunnable(r *http.Request, u auth.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	obj, err := decodeBody(r, v1alpha1.DecodeRunnable)
	if err != nil {
		return 0, nil, err
	}
	if err := matchPath(&obj.Metadata, ns, name); err != nil {
		return 0, nil, err
	}
	if obj.Metadata.ResourceVersion == "" {
		return 0, nil, newError(http.StatusPreconditionRequired, "PreconditionRequired",
			"an update binds to what was read: send metadata.resourceVersion as the runnable's last read returned it")
	}
	read, err := strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
	if err != nil || read < 1 {
		return 0, nil, errInvalid("Runnable is invalid", []v1alpha1.FieldError{{Field: "metadata.resourceVersion",
			Message: "must be the positive integer the runnable's last read returned"}})
	}
	obj.SetDefaults()
	if errs := v1alpha1.ValidateRunnable(obj, s.now()); len(errs) > 0 {
		return 0, nil, errInvalid("Runnable is invalid", errs)
	}
	if !s.policy().Allowed(u, ns, auth.VerbWrite) {
		return 0, nil, errForbidden("user %q may not change runnables in namespace %q", u.Name, ns)
	}
	if err := s.admit(r.Context(), u, ns, obj.Spec.Template, true); err != nil {
		return 0, nil, err
	}
	var out *v1alpha1.Runnable
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		rec, err := tx.Runnables().Get(r.Context(), ns, name)
		if err != nil {
			return err
		}
		if rec.ResourceVersion != read {
			return errConflict("runnable %s/%s is at resourceVersion %d, not %d as read; read it again and resend the change",
				ns, name, rec.ResourceVersion, read)
		}
		var old storedRunnable
		if err := json.Unmarshal(rec.Spec, &old); err != nil {
			return fmt.Errorf("runnable %s/%s: stored spec: %w", ns, name, err)
		}
		if obj.Spec.TTLSecondsAfterFinished == nil {
			obj.Spec.TTLSecondsAfterFinished = old.Spec.TTLSecondsAfterFinished
		}
		hash := v1alpha1.SpecHash(obj.Spec)
		attempts, err := tx.Attempts().List(r.Context(), rec.UID)
		if err != nil {
			return err
		}
		if hash == rec.SpecHash && equalStrings(old.Labels, obj.Metadata.Labels) && equalStrings(old.Annotations, obj.Metadata.Annotations) {
			out, err = runnableFromRecord(rec, attempts)
			return err // nothing changed
		}
		phase := v1alpha1.Phase(rec.Phase)
		if err := updatable(phase, templateKind(old.Spec.Template), ns, name); err != nil {
			return err
		}
		doc, err := json.Marshal(storedRunnable{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations, Spec: obj.Spec, Author: authorOf(u)})
		if err != nil {
			return err
		}
		cur, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		cur.Rec.Spec, cur.Rec.SpecHash, cur.Rec.Generation = doc, hash, rec.Generation+1
		details, err := redactValues(obj.Spec)
		if err != nil {
			return err
		}
		summary := fmt.Sprintf("updated the spec of %s (generation %d, %s); its next attempt uses it", ns+"/"+name, rec.Generation+1, phase)
		next, err := lifecycle.Apply(r.Context(), tx, cur, lifecycle.Transition{
			To: phase, By: lifecycle.ByAPI, Actor: u.Name,
			Audit: &audit.Entry{Action: "update", Summary: summary, Details: details},
		})
		if err != nil {
			return err
		}
		out, err = runnableFromRecord(next.Rec, attempts)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("runnable %s/%s not found; create it with POST /api/v1/runnables", ns, name)
	case errors.Is(err, store.ErrMoved):
		return 0, nil, errConflict("runnable %s/%s changed meanwhile; read it again and resend the change", ns, name)
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// updatable refuses a change of spec a runnable in phase cannot take.
func updatable(phase v1alpha1.Phase, kind, ns, name string) error {
	if lifecycle.Allowed(phase, phase, lifecycle.ByAPI) && (phase == v1alpha1.PhaseQueued || phase.Terminal()) {
		return nil
	}
	switch {
	case phase == v1alpha1.PhasePendingApproval:
		return errConflict("runnable %s/%s waits for approval of its spec; have it rejected, or wait for the decision, before changing it", ns, name)
	case kind == "Job" && slices.Contains([]v1alpha1.Phase{v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended, v1alpha1.PhaseFailingOver}, phase):
		return errConflict("runnable %s/%s is %s, and a Job's pod template is immutable on its cluster: the change cannot reach the running Job. "+
			"Cancel it (DELETE) or wait for it to end, then change it and rerun it (POST .../rerun)", ns, name, phase)
	}
	return errConflict("runnable %s/%s is %s: changing the object of a running %s in place is not supported yet; "+
		"cancel it (DELETE) or wait for it to end, then change it and rerun it (POST .../rerun)", ns, name, phase, kind)
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
