package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/lifecycle"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// Operations on a runnable that already runs or has ended (docs/operating.md):
// suspend, resume and rerun. Each is a write of the runnable (VerbWrite in
// its namespace), one lifecycle move, audited, in one transaction; the
// submitter then does on the cluster what the move asks.

// operation decides one operation's move from the runnable as the
// transaction read it; an *APIError refuses it and nothing is written.
type operation func(ctx context.Context, tx *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error)

// operateRunnable runs op on runnable ns/name for u.
func (s *Server) operateRunnable(r *http.Request, u auth.User, verb string, op operation) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, auth.VerbWrite) {
		return 0, nil, errForbidden("user %q may not %s runnables in namespace %q", u.Name, verb, ns)
	}
	var out *v1alpha1.Runnable
	notify := false
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		notify = false
		rec, err := tx.Runnables().Get(r.Context(), ns, name)
		if err != nil {
			return err
		}
		cur, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		var doc storedRunnable
		if err := json.Unmarshal(rec.Spec, &doc); err != nil {
			return fmt.Errorf("runnable %s/%s: stored spec: %w", ns, name, err)
		}
		attempts, err := tx.Attempts().List(r.Context(), rec.UID)
		if err != nil {
			return err
		}
		t, err := op(r.Context(), tx, cur, &doc, attempts)
		if err != nil {
			return err
		}
		t.By, t.Actor = lifecycle.ByAPI, u.Name
		next, err := lifecycle.Apply(r.Context(), tx, cur, *t)
		if err != nil {
			return err
		}
		if t.Attempt == nil {
			attempts, err = tx.Attempts().List(r.Context(), rec.UID)
			if err != nil {
				return err
			}
		}
		notify = t.Enqueue != ""
		out, err = runnableFromRecord(next.Rec, attempts)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	case errors.Is(err, store.ErrMoved):
		return 0, nil, errConflict("runnable %s/%s changed meanwhile; look at it again and retry", ns, name)
	case err != nil:
		return 0, nil, err
	}
	if notify {
		s.notifyOutbox()
	}
	return http.StatusOK, out, nil
}

// suspendRunnable serves POST .../suspend: a Submitted or Running
// runnable becomes Suspended; the submitter sets the kind's own suspend
// field on its cluster. Kinds purser cannot suspend are refused with 422.
func (s *Server) suspendRunnable(r *http.Request, u auth.User) (int, any, error) {
	return s.operateRunnable(r, u, "suspend", func(_ context.Context, _ *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		ref := cur.Rec.Namespace + "/" + cur.Rec.Name
		if err := suspendable(doc); err != nil {
			return nil, err
		}
		phase := cur.Phase()
		n := len(attempts)
		if phase == v1alpha1.PhaseSuspended {
			return nil, errConflict("runnable %s is Suspended already", ref)
		}
		if !lifecycle.Allowed(phase, v1alpha1.PhaseSuspended, lifecycle.ByAPI) || n == 0 || attempts[n-1].EndedAt != nil {
			return nil, errConflict("runnable %s/%s is %s; only a Submitted or Running runnable can be suspended", cur.Rec.Namespace, cur.Rec.Name, phase)
		}
		a := attempts[n-1]
		summary := fmt.Sprintf("suspended %s (was %s; attempt %d on %s)", ref, phase, a.Number, a.Cluster)
		return &lifecycle.Transition{
			To: v1alpha1.PhaseSuspended, Message: summary + "; its suspend field is being set on the cluster",
			Edit: func(st *v1alpha1.RunnableStatus) error {
				st.Suspension = &v1alpha1.Suspension{Suspend: true, By: u.Name, At: s.now(), Attempt: a.Number}
				return nil
			},
			Enqueue: stream.SubmissionSuspend, EnqueueAttempt: a.Number,
			Audit:   &audit.Entry{Action: "suspend", Summary: summary},
		}, nil
	})
}

// resumeRunnable serves POST .../resume: a Suspended runnable stays
// Suspended until the submitter has cleared the kind's suspend field on
// its cluster, then it is Submitted again.
func (s *Server) resumeRunnable(r *http.Request, u auth.User) (int, any, error) {
	return s.operateRunnable(r, u, "resume", func(_ context.Context, _ *store.Tx, cur *lifecycle.Runnable, _ *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		ref := cur.Rec.Namespace + "/" + cur.Rec.Name
		sp := cur.Status.Suspension
		if cur.Phase() != v1alpha1.PhaseSuspended || sp == nil {
			return nil, errConflict("runnable %s is %s, not Suspended; nothing to resume", ref, cur.Phase())
		}
		if !sp.Suspend {
			return nil, errConflict("runnable %s is being resumed already (asked by %s)", ref, sp.By)
		}
		summary := fmt.Sprintf("resume of %s asked (attempt %d)", ref, sp.Attempt)
		return &lifecycle.Transition{
			To: v1alpha1.PhaseSuspended, Message: summary + "; its suspend field is being cleared on the cluster",
			Edit: func(st *v1alpha1.RunnableStatus) error {
				st.Suspension = &v1alpha1.Suspension{Suspend: false, By: u.Name, At: s.now(), Attempt: sp.Attempt}
				return nil
			},
			Enqueue: stream.SubmissionResume, EnqueueAttempt: sp.Attempt,
			Audit:   &audit.Entry{Action: "resume", Summary: summary},
		}, nil
	})
}

// rerunRunnable serves POST .../rerun: an ended runnable (Succeeded,
// Failed, Expired, Cancelled) is Queued again, for a new attempt with its
// current spec; its attempts so far stay in status.attempts. The user who
// reruns it must be allowed to submit its template now (the same checks
// as a create), becomes its submitter, and in a namespace that needs
// approval the rerun waits for another approver.
func (s *Server) rerunRunnable(r *http.Request, u auth.User) (int, any, error) {
	return s.operateRunnable(r, u, "rerun", func(ctx context.Context, _ *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		ns, name := cur.Rec.Namespace, cur.Rec.Name
		phase := cur.Phase()
		if !lifecycle.Allowed(phase, v1alpha1.PhaseQueued, lifecycle.ByAPI) {
			return nil, errConflict("runnable %s/%s is %s; only an ended runnable (Succeeded, Failed, Expired, Cancelled) can be rerun", ns, name, phase)
		}
		n := len(attempts)
		if n > 0 && attempts[n-1].EndedAt == nil {
			return nil, errConflict("runnable %s/%s is %s and its attempt %d on %s is still being removed; rerun it once that is done",
				ns, name, phase, attempts[n-1].Number, attempts[n-1].Cluster)
		}
		if err := s.admit(ctx, u, ns, doc.Spec.Template, true); err != nil {
			return nil, err
		}
		number := 1
		if n > 0 {
			number = attempts[n-1].Number + 1
		}
		cur.Rec.Submitter = u.Name // cur is this transaction's own read
		summary := fmt.Sprintf("rerun %s, which had ended %s, as attempt %d", ns+"/"+name, phase, number)
		t := &lifecycle.Transition{
			To: v1alpha1.PhaseQueued, Message: summary + "; waiting for a cluster",
			Edit: func(st *v1alpha1.RunnableStatus) error {
				// The new attempt starts afresh: nothing the last one
				// observed or carried applies to it.
				*st = v1alpha1.RunnableStatus{Message: st.Message, ApprovedBy: st.ApprovedBy}
				return nil
			},
			Enqueue: stream.SubmissionSubmit, EnqueueAttempt: number,
			Audit:   &audit.Entry{Action: "rerun", Summary: summary},
		}
		if s.policy().ApprovalRequired(ns, v1alpha1.KindRunnable) {
			t.To, t.Enqueue = v1alpha1.PhasePendingApproval, ""
			t.Message = summary + "; waiting for approval by an approver other than " + u.Name
			t.Edit = func(st *v1alpha1.RunnableStatus) error { *st = v1alpha1.RunnableStatus{Message: st.Message}; return nil }
			t.Audit.Summary += "; waits for approval"
		}
		return t, nil
	})
}

// suspendable refuses, with the reason, a runnable whose kind purser
// cannot suspend.
func suspendable(doc *storedRunnable) error {
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return errInvalid("the runnable's template has no valid apiVersion", nil)
	}
	var refused *operate.NotSuspendableError
	if _, err := operate.SuspendSpec(gv.WithKind(kind).GroupKind(), doc.Spec.Template, true); errors.As(err, &refused) {
		return errInvalid("runnable cannot be suspended", []v1alpha1.FieldError{{Field: "spec.template.kind", Message: refused.Error()}})
	}
	return nil
}
