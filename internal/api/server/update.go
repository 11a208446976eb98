package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// updateRunnable serves PUT /api/v1/runnables/{ns}/{name}: a changed spec,
// optimistic on metadata.resourceVersion (required; 409 when the runnable
// moved since it was read, and nothing changes). A runnable waiting for a
// cluster or ended takes the new spec for its next attempt (placement,
// rerun, retry). One that runs (Submitted, Running, Suspended) takes it in
// place where its kind allows (operate.InPlace: a FlinkDeployment, through
// the operator's upgrade): the change is stored with its audit entry and
// an outbox message, and the submitter applies the new template to the
// attempt's object; its later attempts use it too. A Job's pod template is
// immutable on its cluster and an Argo Workflow runs the spec it started
// with, so the answer says so and offers rerun. The same spec again is a
// 200 that writes nothing. In a namespace that needs approval, a change
// that could be made now waits beside the live spec until another person
// approves it (pending.go); the live spec sent again withdraws it.
func (s *Server) updateRunnable(r *http.Request, u policy.User) (int, any, error) {
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
	s.defaultPriority(ns, &obj.Spec)
	if errs := v1alpha1.ValidateRunnable(obj, s.now()); len(errs) > 0 {
		return 0, nil, errInvalid("Runnable is invalid", errs)
	}
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not change runnables in namespace %q", u.Name, ns)
	}
	if err := s.authorizePriority(u, ns, &obj.Spec, ""); err != nil {
		return 0, nil, err
	}
	if err := s.admitRunnable(r.Context(), u, ns, &obj.Spec); err != nil {
		return 0, nil, err
	}
	needsApproval := s.policy().ApprovalRequired(ns, v1alpha1.KindRunnable)
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
		next := storedRunnable{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations, Spec: obj.Spec, Author: authorOf(u)}
		cur, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		phase := cur.Phase()
		var t *lifecycle.Transition
		switch {
		case sameDocument(&old, hash, rec.SpecHash, &next) && old.Pending == nil:
			out, err = runnableFromRecord(rec, attempts)
			return err // nothing changed
		case sameDocument(&old, hash, rec.SpecHash, &next):
			// The live spec sent again over a pending change: its author
			// (or another editor) takes the change back.
			if t, err = withdrawPending(cur, &old, u.Name); err != nil {
				return err
			}
		case needsApproval && old.Pending != nil && sameDocument(old.Pending, hash, v1alpha1.SpecHash(old.Pending.Spec), &next):
			out, err = runnableFromRecord(rec, attempts)
			return err // the change that waits, sent again
		case needsApproval:
			// Refused now what could not be applied once approved either.
			if _, err := updatable(phase, old.Spec.Template, obj.Spec.Template, ns, name); err != nil {
				return err
			}
			if t, err = proposeChange(cur, &old, next, s.now()); err != nil {
				return err
			}
		default:
			inPlace, err := updatable(phase, old.Spec.Template, obj.Spec.Template, ns, name)
			if err != nil {
				return err
			}
			if t, err = s.changeSpec(cur, attempts, next, inPlace, u.Name); err != nil {
				return err
			}
		}
		nextRec, err := lifecycle.Apply(r.Context(), tx, cur, *t)
		if err != nil {
			return err
		}
		out, err = runnableFromRecord(nextRec.Rec, attempts)
		return err
	})
	var state *operate.StateError
	var notInPlace *phaseRefusal
	switch {
	case errors.As(err, &state):
		return 0, nil, errConflict("%s", state.Message)
	case errors.As(err, &notInPlace):
		return 0, nil, errConflict("runnable %s/%s is %s: %s", ns, name, notInPlace.phase, notInPlace.err.Message)
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("runnable %s/%s not found; create it with POST /api/v1/runnables", ns, name)
	case errors.Is(err, store.ErrMoved):
		return 0, nil, errConflict("runnable %s/%s changed meanwhile; read it again and resend the change", ns, name)
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// updatable says whether a change of spec from old to next reaches a
// runnable in phase: for its next attempt only (Queued, or ended), or in
// place as well (true: Submitted, Running or Suspended, of a kind whose
// object takes a change in place, operate.InPlace). Otherwise it refuses
// the change, saying why and what to do instead.
func updatable(phase v1alpha1.Phase, old, next map[string]any, ns, name string) (bool, error) {
	switch {
	case phase == v1alpha1.PhaseQueued || phase.Terminal():
		if lifecycle.Allowed(phase, phase, lifecycle.ByAPI) {
			return false, nil
		}
	case phase == v1alpha1.PhasePendingApproval:
		return false, errConflict("runnable %s/%s waits for approval of its spec; have it rejected, or wait for the decision, before changing it", ns, name)
	}
	var refused *operate.NotUpdatableError
	if err := operate.InPlace(old, next, name); errors.As(err, &refused) {
		return false, &phaseRefusal{phase: phase, err: refused}
	}
	if slices.Contains([]v1alpha1.Phase{v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended}, phase) {
		return true, nil
	}
	return false, errConflict("runnable %s/%s is %s: its object is not on a cluster that could take the change now; "+
		"change it once it runs (Submitted or Running), or cancel it (DELETE) or wait for it to end, then change it and rerun it (POST .../rerun)",
		ns, name, phase)
}

// phaseRefusal is operate.InPlace's refusal with the phase it was made in.
type phaseRefusal struct {
	phase v1alpha1.Phase
	err   *operate.NotUpdatableError
}

func (e *phaseRefusal) Error() string { return string(e.phase) + ": " + e.err.Error() }

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
