package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Operations on a runnable that already runs or has ended (docs/operating.md):
// suspend, resume and rerun. Each is a write of the runnable (VerbWrite in
// its namespace), one lifecycle move, audited, in one transaction; the
// submitter then does on the cluster what the move asks.

// operation decides one operation's move from the runnable as the
// transaction read it; an *APIError refuses it and nothing is written.
type operation func(ctx context.Context, tx *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error)

// operateRunnable runs op on runnable ns/name for u.
func (s *Server) operateRunnable(r *http.Request, u policy.User, verb string, op operation) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not %s runnables in namespace %q", u.Name, verb, ns)
	}
	var out *v1alpha1.Runnable
	notify := false
	err := s.txFresh(r.Context(), func(tx *store.Tx) error {
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
func (s *Server) suspendRunnable(r *http.Request, u policy.User) (int, any, error) {
	return s.operateRunnable(r, u, "suspend", func(_ context.Context, _ *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
		kind, _ := doc.Spec.Template["kind"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, errInvalid("the runnable's template has no valid apiVersion", nil)
		}
		return operated(operate.Suspend(cur, gv.WithKind(kind).GroupKind(), doc.Spec.Template, attempts, u.Name, s.now()))
	})
}

// resumeRunnable serves POST .../resume: a Suspended runnable stays
// Suspended until the submitter has cleared the kind's suspend field on
// its cluster, then it is Submitted again.
func (s *Server) resumeRunnable(r *http.Request, u policy.User) (int, any, error) {
	return s.operateRunnable(r, u, "resume", func(_ context.Context, _ *store.Tx, cur *lifecycle.Runnable, _ *storedRunnable, _ []*store.Attempt) (*lifecycle.Transition, error) {
		return operated(operate.Resume(cur, u.Name, s.now()))
	})
}

// rerunRunnable serves POST .../rerun: an ended runnable (Succeeded,
// Failed, Expired, Cancelled) is Queued again, for a new attempt with its
// current spec; its attempts so far stay in status.attempts (409 while a
// change of its spec waits for approval). The user who
// reruns it must be allowed to submit its template now (the same checks
// as a create), becomes its submitter, and in a namespace that needs
// approval the rerun waits for another approver.
func (s *Server) rerunRunnable(r *http.Request, u policy.User) (int, any, error) {
	return s.operateRunnable(r, u, "rerun", func(ctx context.Context, _ *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		if doc.Pending != nil {
			// A rerun runs the live spec; one asked for with a change
			// that waits would look approved with it, so the change is
			// decided first.
			return nil, errConflict("a change of the spec of runnable %s/%s proposed by %s waits for approval (status.pendingChange); have it approved or rejected, or withdraw it by sending the live spec again, before rerunning",
				cur.Rec.Namespace, cur.Rec.Name, pendingAuthor(doc))
		}
		if cur.Phase().Terminal() {
			if err := s.authorizePriority(u, cur.Rec.Namespace, &doc.Spec, ""); err != nil {
				return nil, err
			}
			if err := s.admitRunnable(ctx, u, cur.Rec.Namespace, &doc.Spec); err != nil {
				return nil, err
			}
		}
		return operated(operate.Rerun(cur, attempts, u.Name, s.policy().ApprovalRequired(cur.Rec.Namespace, v1alpha1.KindRunnable)))
	})
}

// operated turns operate's refusals into the API's answers: 409 for a
// phase that does not allow the operation, 422 for a kind that has none.
func operated(t *lifecycle.Transition, err error) (*lifecycle.Transition, error) {
	var state *operate.StateError
	var refused *operate.NotSuspendableError
	switch {
	case errors.As(err, &state):
		return nil, errConflict("%s", state.Message)
	case errors.As(err, &refused):
		return nil, errInvalid("runnable cannot be suspended", []v1alpha1.FieldError{{Field: "spec.template.kind", Message: refused.Error()}})
	}
	return t, err
}
