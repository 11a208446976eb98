package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

type storedRunnable = store.Document[v1alpha1.RunnableSpec]

// createRunnable serves POST /api/v1/runnables: 202 with the stored object,
// 200 with the existing one when the same spec is submitted again under the
// same name, 409 when that name holds another spec.
func (s *Server) createRunnable(r *http.Request, u policy.User) (int, any, error) {
	obj, err := decodeBody(r, v1alpha1.DecodeRunnable)
	if err != nil {
		return 0, nil, err
	}
	out, req, err := s.submit(r.Context(), &submission.Request{Runnable: obj, Author: u})
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusAccepted
	if !out.Created {
		if !out.SameSpec {
			return 0, nil, errConflict("runnable %s/%s already exists with another spec; submit under another name, or delete it first",
				obj.Metadata.Namespace, obj.Metadata.Name)
		}
		status = http.StatusOK
	}
	if out.Created && !req.NeedsApproval() {
		s.notifyOutbox()
	}
	rec, err := runnableFromRecord(out.Rec, nil)
	return status, rec, err
}

// submit creates a runnable the one way there is (submission): the
// gate's checks, then the transaction that stores it with its audit
// entry. The scheduler runs the same two steps for each tick.
func (s *Server) submit(ctx context.Context, req *submission.Request) (*submission.Outcome, *submission.Request, error) {
	if err := s.gate().Prepare(ctx, req); err != nil {
		return nil, nil, err
	}
	var out *submission.Outcome
	err := s.tx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = submission.Create(ctx, tx, req)
		return err
	})
	return out, req, err
}

func (s *Server) getRunnable(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Runnable
	var attempts []*store.Attempt
	var positions map[string]int
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Runnables().Get(r.Context(), ns, name); err != nil {
			return err
		}
		if attempts, err = tx.Attempts().List(r.Context(), rec.UID); err != nil || !anyQueued(rec) {
			return err
		}
		positions, err = s.queuePositions(r.Context(), tx)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := runnableFromRecord(rec, attempts)
	if err != nil {
		return 0, nil, err
	}
	out.Status.QueuePosition = positions[rec.UID]
	out.Status.Conditions = v1alpha1.RunnableConditions(out)
	return http.StatusOK, out, nil
}

func (s *Server) listRunnables(r *http.Request, u policy.User) (int, any, error) {
	q := r.URL.Query()
	f := store.RunnableFilter{Namespace: q.Get("namespace"), Phase: q.Get("phase"), Cluster: q.Get("cluster"), Continue: q.Get("continue")}
	if err := s.authorizeList(u, f.Namespace, "runnables"); err != nil {
		return 0, nil, err
	}
	if f.Phase != "" {
		if _, err := v1alpha1.ParseRunnablePhase(f.Phase); err != nil {
			return 0, nil, errBadRequest("phase: %v", err)
		}
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return 0, nil, err
	}
	var recs []*store.Runnable
	var next string
	var attempts, positions map[string]int
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		if recs, next, err = tx.Runnables().List(r.Context(), f); err != nil {
			return err
		}
		uids := make([]string, len(recs))
		for i, rec := range recs {
			uids[i] = rec.UID
		}
		if attempts, err = tx.Attempts().Count(r.Context(), uids); err != nil || f.Phase != string(v1alpha1.PhaseQueued) || !anyQueued(recs...) {
			return err
		}
		positions, err = s.queuePositions(r.Context(), tx)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := List[*v1alpha1.Runnable]{Items: make([]*v1alpha1.Runnable, 0, len(recs)), Continue: next}
	for _, rec := range recs {
		obj, err := runnableFromRecord(rec, nil)
		if err != nil {
			return 0, nil, err
		}
		obj.Status.AttemptCount = attempts[rec.UID]
		obj.Status.QueuePosition = positions[rec.UID]
		obj.Status.Conditions = v1alpha1.RunnableConditions(obj)
		out.Items = append(out.Items, obj)
	}
	return http.StatusOK, out, nil
}

// authorizeList allows a list in one namespace to its viewers, and a list
// across namespaces to those who read every namespace.
func (s *Server) authorizeList(u policy.User, ns, what string) error {
	if ns == "" {
		if !s.policy().ReadsEverywhere(u) {
			return errForbidden("user %q may not list %s in every namespace; pass ?namespace=", u.Name, what)
		}
		return nil
	}
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	return nil
}

// deleteRunnable serves DELETE. A runnable that has not ended is
// cancelled: it becomes Cancelled and the submitter removes it from its
// cluster. An ended one is removed: its record goes, what its attempts
// left on clusters is deleted there by the controller, and its history
// stays in the audit log. So a live runnable takes two deletes to go, as
// a cancelled one stays readable until someone removes it.
func (s *Server) deleteRunnable(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not cancel or delete runnables in namespace %q", u.Name, ns)
	}
	var out *v1alpha1.Runnable
	cancelled := false
	err := s.txFresh(r.Context(), func(tx *store.Tx) error {
		cancelled = false
		rec, err := tx.Runnables().Get(r.Context(), ns, name)
		if err != nil {
			return err
		}
		attempts, err := tx.Attempts().List(r.Context(), rec.UID)
		if err != nil {
			return err
		}
		cur, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		phase := cur.Phase()
		if !phase.Terminal() {
			next, err := lifecycle.Apply(r.Context(), tx, cur,
				submission.CancelTransition(u.Name, fmt.Sprintf("cancelled %s (was %s)", ns+"/"+name, phase)))
			if err != nil {
				return err
			}
			cancelled = true
			out, err = runnableFromRecord(next.Rec, attempts)
			return err
		}
		if n := len(attempts); n > 0 && phase == v1alpha1.PhaseCancelled && attempts[n-1].EndedAt == nil {
			return errConflict("runnable %s/%s is cancelled and its copy is still being removed from %s (attempt %d); delete it again once that is done",
				ns, name, attempts[n-1].Cluster, attempts[n-1].Number)
		}
		summary := fmt.Sprintf("deleted %s, which had ended %s", ns+"/"+name, phase)
		if err := lifecycle.Remove(r.Context(), tx, cur, lifecycle.ByAPI, u.Name,
			audit.Entry{Action: "delete", Summary: summary}); err != nil {
			return err
		}
		if out, err = runnableFromRecord(rec, attempts); err != nil {
			return err
		}
		out.Status.Message = summary + "; its history stays in the audit log"
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	}
	if errors.Is(err, store.ErrMoved) {
		return 0, nil, errConflict("runnable %s/%s changed while it was being deleted; try again", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	if cancelled {
		s.notifyOutbox()
	}
	return http.StatusOK, out, nil
}

// confirmStopped serves POST .../failover?confirmStopped=true: a person
// vouches that the copy of the current attempt no longer runs, where
// purser cannot confirm it (an AtMostOne runnable on a cluster that does
// not answer); the controller then moves the runnable at once.
func (s *Server) confirmStopped(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not fail over runnables in namespace %q", u.Name, ns)
	}
	if r.URL.Query().Get("confirmStopped") != "true" {
		return 0, nil, errInvalid("the failover override needs ?confirmStopped=true", []v1alpha1.FieldError{{Field: "confirmStopped",
			Message: "must be true: it says that you made sure the copy on the unreachable cluster no longer runs"}})
	}
	var out *v1alpha1.Runnable
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		rec, err := tx.Runnables().Get(r.Context(), ns, name)
		if err != nil {
			return err
		}
		cur, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		attempts, err := tx.Attempts().List(r.Context(), rec.UID)
		if err != nil {
			return err
		}
		n := len(attempts)
		waiting := cur.Status.Waiting == v1alpha1.WaitingFencing || cur.Status.Waiting == v1alpha1.WaitingUnconfirmed ||
			cur.Status.Waiting == v1alpha1.WaitingHeartbeats
		// The attempt whose copy is in doubt: the open one, or for a
		// runnable FailingOver, the evicted one whose copy must go first.
		current := n > 0 && (attempts[n-1].EndedAt == nil || cur.Phase() == v1alpha1.PhaseFailingOver)
		if !lifecycle.Allowed(cur.Phase(), cur.Phase(), lifecycle.ByAPI) || !current || !waiting {
			return errConflict("runnable %s/%s is %s and not waiting for a copy on an unreachable cluster to be confirmed stopped; nothing to override",
				ns, name, cur.Phase())
		}
		a := attempts[n-1]
		if c := cur.Status.ConfirmedStopped; c != nil && c.Attempt == a.Number {
			out, err = runnableFromRecord(rec, attempts)
			return err // said already
		}
		summary := fmt.Sprintf("%s confirmed that the copy of attempt %d on %s no longer runs; the controller moves %s without waiting",
			u.Name, a.Number, a.Cluster, ns+"/"+name)
		next, err := lifecycle.Apply(r.Context(), tx, cur, lifecycle.Transition{
			To: cur.Phase(), By: lifecycle.ByAPI, Actor: u.Name, Message: summary,
			Edit: func(st *v1alpha1.RunnableStatus) error {
				st.ConfirmedStopped = &v1alpha1.Confirmation{By: u.Name, At: s.now(), Attempt: a.Number}
				return nil
			},
			Audit: &audit.Entry{Action: "confirm-stopped", Summary: summary},
		})
		if err != nil {
			return err
		}
		out, err = runnableFromRecord(next.Rec, attempts)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	}
	if errors.Is(err, store.ErrMoved) {
		return 0, nil, errConflict("runnable %s/%s changed meanwhile; look at it again before overriding", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// decideRunnable serves approve and reject: only an approver who is not
// the author of what waits may decide, bound to the version reviewed.
// What waits is the runnable itself (PendingApproval: accepted, or rerun,
// in a namespace that needs approval), or a change of its spec that
// waits beside the live one, in any other phase (pending.go).
func (s *Server) decideRunnable(approve bool) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if !s.policy().Allowed(u, ns, policy.VerbApprove) {
			return 0, nil, errForbidden("user %q is not an approver in namespace %q", u.Name, ns)
		}
		reviewed, err := pendingVersion(r, "runnable")
		if err != nil {
			return 0, nil, err
		}
		if approve {
			// Checked on the version reviewed; the transaction below acts
			// only if the runnable is still at it.
			if err := s.authorizeRunnableAuthor(r, ns, name, reviewed); err != nil {
				return 0, nil, err
			}
		}
		var rec *store.Runnable
		var attempts []*store.Attempt
		notify := false
		err = s.tx(r.Context(), func(tx *store.Tx) error {
			var err error
			if rec, err = tx.Runnables().Get(r.Context(), ns, name); err != nil {
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
			waiting := cur.Phase() == v1alpha1.PhasePendingApproval
			if !waiting && doc.Pending == nil {
				return errConflict("runnable %s/%s is %s: neither it nor a change of its spec waits for approval", ns, name, rec.Phase)
			}
			// Its author may never decide, whatever the version: said
			// before the version, which the submitter may move meanwhile.
			if by := pendingAuthor(&doc); !waiting && by == u.Name {
				return errForbidden("user %q proposed the change of runnable %s/%s and cannot also decide on it; another approver must", u.Name, ns, name)
			}
			if waiting && rec.Submitter == u.Name {
				return errForbidden("user %q submitted runnable %s/%s and cannot also decide on it; another approver must", u.Name, ns, name)
			}
			if err := checkReviewedObject(r, rec.UID, "runnable "+ns+"/"+name); err != nil {
				return err
			}
			if err := checkPendingVersion(reviewed, rec.ResourceVersion, "runnable "+ns+"/"+name); err != nil {
				return err
			}
			var t *lifecycle.Transition
			if !waiting {
				if approve {
					if attempts, err = tx.Attempts().List(r.Context(), rec.UID); err != nil {
						return err
					}
					t, err = s.approveChange(cur, &doc, attempts, u.Name)
				} else {
					t, err = rejectChange(cur, &doc, u.Name)
				}
				if err != nil {
					return err
				}
			} else {
				t = &lifecycle.Transition{To: v1alpha1.PhaseRejected, By: lifecycle.ByAPI, Actor: u.Name,
					Message: "rejected by " + u.Name}
				action := "reject"
				generation := rec.Generation
				if approve {
					action = "approve"
					t.To, t.Message, t.Enqueue = v1alpha1.PhaseQueued, "approved by "+u.Name+"; waiting for a cluster", stream.SubmissionSubmit
					t.Edit = func(st *v1alpha1.RunnableStatus) error {
						st.ApprovedBy, st.ApprovedGeneration = u.Name, generation
						return nil
					}
				}
				t.Audit = &audit.Entry{Action: action, Summary: fmt.Sprintf("%sd %s submitted by %s (generation %d)", action, ns+"/"+name, rec.Submitter, generation)}
			}
			next, err := lifecycle.Apply(r.Context(), tx, cur, *t)
			if err != nil {
				return err
			}
			rec, notify = next.Rec, t.Enqueue != ""
			return nil
		})
		var state *operate.StateError
		var notInPlace *phaseRefusal
		switch {
		case errors.As(err, &state):
			return 0, nil, errConflict("the change cannot be approved now: %s", state.Message)
		case errors.As(err, &notInPlace):
			return 0, nil, errConflict("the change cannot be approved now: runnable %s/%s is %s: %s", ns, name, notInPlace.phase, notInPlace.err.Message)
		case errors.Is(err, store.ErrNotFound):
			return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
		case errors.Is(err, store.ErrMoved):
			return 0, nil, errConflict("runnable %s/%s changed meanwhile; read it again and review what waits", ns, name)
		case err != nil:
			return 0, nil, err
		}
		if notify {
			s.notifyOutbox()
		}
		out, err := runnableFromRecord(rec, attempts)
		return http.StatusOK, out, err
	}
}

// authorizeRunnableAuthor checks that the author of what waits in
// runnable ns/name, at version reviewed, may still submit it: the
// runnable's submitter, or the change's author.
func (s *Server) authorizeRunnableAuthor(r *http.Request, ns, name string, reviewed int64) error {
	var rec *store.Runnable
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Runnables().Get(r.Context(), ns, name)
		return err
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errNotFound("runnable %s/%s not found", ns, name)
		}
		return err
	}
	if rec.ResourceVersion != reviewed {
		return nil // the transaction says what moved
	}
	var doc storedRunnable
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return fmt.Errorf("runnable %s/%s: stored spec: %w", ns, name, err)
	}
	ref := "runnable " + ns + "/" + name
	author, spec := userOf(doc.Author, rec.Submitter), &doc.Spec
	switch {
	case v1alpha1.Phase(rec.Phase) == v1alpha1.PhasePendingApproval:
	case doc.Pending != nil:
		author, spec, ref = userOf(doc.Pending.Author, ""), &doc.Pending.Spec, "the pending change of "+ref
	default:
		return nil // nothing waits; the transaction says so
	}
	if err := s.authorizePriority(author, ns, spec, ref+" cannot be approved"); err != nil {
		return err
	}
	return s.authorizeAuthor(author, ns, ref, func(author policy.User) error {
		return s.admitRunnable(r.Context(), author, ns, spec)
	})
}

// runnableFromRecord turns a row (and its attempts, when read) into the
// API object.
func runnableFromRecord(rec *store.Runnable, attempts []*store.Attempt) (*v1alpha1.Runnable, error) {
	var doc storedRunnable
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, fmt.Errorf("runnable %s: stored spec: %w", rec.UID, err)
	}
	cur, err := lifecycle.Decode(rec)
	if err != nil {
		return nil, err
	}
	st := cur.Status
	st.EndedAt, st.RemoveAfter = rec.EndedAt, rec.RemoveAfter
	st.Phase = v1alpha1.Phase(rec.Phase)
	st.Cluster = rec.Cluster
	st.SubmittedBy = rec.Submitter
	st.PendingChange = pendingChangeOf(rec, &doc)
	if attempts != nil {
		st.Attempts = make([]v1alpha1.Attempt, 0, len(attempts))
		for _, a := range attempts {
			started := a.StartedAt
			st.Attempts = append(st.Attempts, v1alpha1.Attempt{
				Number: a.Number, Cluster: a.Cluster, UID: a.ObjectUID, StartedAt: &started,
				EndedAt: a.EndedAt, Result: a.Result, Reason: a.Reason, Message: a.Message,
				Cleanup: a.Cleanup, CarriedIn: a.CarriedIn, Reported: a.Reported, Note: a.Note, Generation: a.Generation,
			})
		}
		st.AttemptCount = len(st.Attempts)
	}
	return &v1alpha1.Runnable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindRunnable},
		Metadata: storedMeta(&doc, rec.Name, rec.Namespace, rec.UID, rec.Generation, rec.ResourceVersion, rec.CreatedAt),
		Spec:     doc.Spec,
		Status:   st,
	}, nil
}

// storedMeta is the metadata the API shows of a stored runnable or
// deployable: the user's labels and annotations beside the row's own.
func storedMeta[S any](doc *store.Document[S], name, namespace, uid string, generation, resourceVersion int64, created time.Time) v1alpha1.ObjectMeta {
	return v1alpha1.ObjectMeta{
		Name: name, Namespace: namespace, UID: uid,
		Labels: doc.Labels, Annotations: doc.Annotations,
		Generation: generation, ResourceVersion: strconv.FormatInt(resourceVersion, 10),
		CreationTimestamp: created,
	}
}

// appendAudit records a change in the transaction that makes it. details
// must never hold Secret values; callers pass specs with those removed,
// and whatever sits under data or stringData is redacted all the same.
func appendAudit(ctx context.Context, tx *store.Tx, u policy.User, action, kind, ns, name, summary, outcome string, details any) error {
	e := &audit.Entry{Actor: u.Name, Action: action, Kind: kind, Namespace: ns, Name: name, Summary: summary, Outcome: outcome}
	if details != nil {
		data, err := redactValues(details)
		if err != nil {
			return err
		}
		e.Details = data
	}
	return tx.Audit().Append(ctx, e)
}

func (s *Server) notifyOutbox() {
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify()
	}
}
