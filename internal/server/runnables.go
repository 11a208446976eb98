package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/auth"
	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/stream"
)

type storedRunnable = store.Document[v1alpha1.RunnableSpec]

// createRunnable serves POST /api/v1/runnables: 202 with the stored object,
// 200 with the existing one when the same spec is submitted again under the
// same name, 409 when that name holds another spec.
func (s *Server) createRunnable(r *http.Request, u auth.User) (int, any, error) {
	obj, err := decodeBody(r, v1alpha1.DecodeRunnable)
	if err != nil {
		return 0, nil, err
	}
	obj.SetDefaults()
	if errs := v1alpha1.ValidateRunnable(obj, s.now()); len(errs) > 0 {
		return 0, nil, errInvalid("Runnable is invalid", errs)
	}
	ns := obj.Metadata.Namespace
	if !s.cfg.Policy.Allowed(u, ns, auth.VerbWrite) {
		return 0, nil, errForbidden("user %q may not submit runnables in namespace %q", u.Name, ns)
	}
	if err := s.authorizeKind(r.Context(), u, ns, obj.Spec.Template); err != nil {
		return 0, nil, err
	}
	needsApproval := s.cfg.Policy.ApprovalRequired(ns, v1alpha1.KindRunnable)
	hash := v1alpha1.SpecHash(obj.Spec)
	doc, err := json.Marshal(storedRunnable{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations, Spec: obj.Spec, Author: authorOf(u)})
	if err != nil {
		return 0, nil, err
	}

	var rec *store.Runnable
	status := http.StatusAccepted
	err = s.cfg.Store.Tx(r.Context(), func(tx *store.Tx) error {
		rec, status = nil, http.StatusAccepted
		name := obj.Metadata.Name
		if name == "" {
			var err error
			if name, err = freeRunnableName(r.Context(), tx, ns, obj.Metadata.GenerateName); err != nil {
				return err
			}
		} else if existing, err := tx.GetRunnable(r.Context(), ns, name); err == nil {
			if existing.SpecHash != hash {
				return errConflict("runnable %s/%s already exists with another spec; submit under another name, or delete it first", ns, name)
			}
			rec, status = existing, http.StatusOK
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}

		phase := v1alpha1.PhaseQueued
		message := "waiting for a cluster"
		if needsApproval {
			phase = v1alpha1.PhasePendingApproval
			message = "waiting for approval by an approver other than " + u.Name
		}
		st, _ := json.Marshal(v1alpha1.RunnableStatus{Message: message})
		rec = &store.Runnable{
			Namespace: ns, Name: name, UID: uuid.NewString(), Generation: 1,
			Spec: doc, SpecHash: hash, Phase: string(phase), Submitter: u.Name, Status: st,
		}
		if err := tx.CreateRunnable(r.Context(), rec); err != nil {
			return err
		}
		if !needsApproval {
			if err := enqueueSubmission(r.Context(), tx, rec, stream.SubmissionSubmit); err != nil {
				return err
			}
		}
		summary := fmt.Sprintf("submitted %s %s", templateKind(obj.Spec.Template), ns+"/"+name)
		if needsApproval {
			summary += "; waits for approval"
		}
		return appendAudit(r.Context(), tx, u, "create", v1alpha1.KindRunnable, ns, name, summary, string(phase), obj.Spec)
	})
	if err != nil {
		return 0, nil, err
	}
	if status == http.StatusAccepted && !needsApproval {
		s.notifyOutbox()
	}
	out, err := runnableFromRecord(rec, nil)
	return status, out, err
}

// freeRunnableName appends random suffixes to prefix until a name is free.
func freeRunnableName(ctx context.Context, tx *store.Tx, ns, prefix string) (string, error) {
	for range 8 {
		name := v1alpha1.GenerateName(prefix)
		if _, err := tx.GetRunnable(ctx, ns, name); errors.Is(err, store.ErrNotFound) {
			return name, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", errConflict("no free name with prefix %q after 8 tries; use a longer prefix", prefix)
}

func (s *Server) getRunnable(r *http.Request, u auth.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.cfg.Policy.Allowed(u, ns, auth.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Runnable
	var attempts []*store.Attempt
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.GetRunnable(r.Context(), ns, name); err != nil {
			return err
		}
		attempts, err = tx.ListAttempts(r.Context(), rec.UID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := runnableFromRecord(rec, attempts)
	return http.StatusOK, out, err
}

func (s *Server) listRunnables(r *http.Request, u auth.User) (int, any, error) {
	q := r.URL.Query()
	f := store.RunnableFilter{Namespace: q.Get("namespace"), Phase: q.Get("phase"), Cluster: q.Get("cluster"), Continue: q.Get("continue")}
	if err := s.authorizeList(u, f.Namespace, "runnables"); err != nil {
		return 0, nil, err
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return 0, nil, err
	}
	var recs []*store.Runnable
	var next string
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		recs, next, err = tx.ListRunnables(r.Context(), f)
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
		out.Items = append(out.Items, obj)
	}
	return http.StatusOK, out, nil
}

// authorizeList allows a list in one namespace to its viewers, and a list
// across namespaces to those who read every namespace.
func (s *Server) authorizeList(u auth.User, ns, what string) error {
	if ns == "" {
		if !s.cfg.Policy.ReadsEverywhere(u) {
			return errForbidden("user %q may not list %s in every namespace; pass ?namespace=", u.Name, what)
		}
		return nil
	}
	if !s.cfg.Policy.Allowed(u, ns, auth.VerbRead) {
		return errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	return nil
}

// cancelRunnable serves DELETE: the runnable becomes Cancelled and the
// submitter removes it from its cluster. Cancelling twice is a no-op.
func (s *Server) cancelRunnable(r *http.Request, u auth.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.cfg.Policy.Allowed(u, ns, auth.VerbWrite) {
		return 0, nil, errForbidden("user %q may not cancel runnables in namespace %q", u.Name, ns)
	}
	var rec *store.Runnable
	changed := false
	err := s.cfg.Store.Tx(r.Context(), func(tx *store.Tx) error {
		changed = false
		var err error
		if rec, err = tx.GetRunnable(r.Context(), ns, name); err != nil {
			return err
		}
		phase := v1alpha1.Phase(rec.Phase)
		if phase == v1alpha1.PhaseCancelled {
			return nil
		}
		if phase.Terminal() {
			return errConflict("runnable %s/%s already ended (%s); there is nothing to cancel", ns, name, phase)
		}
		if err := setRunnablePhase(rec, v1alpha1.PhaseCancelled, "cancelled by "+u.Name, nil); err != nil {
			return err
		}
		if err := tx.UpdateRunnable(r.Context(), rec); err != nil {
			return err
		}
		if err := enqueueSubmission(r.Context(), tx, rec, stream.SubmissionCancel); err != nil {
			return err
		}
		changed = true
		return appendAudit(r.Context(), tx, u, "cancel", v1alpha1.KindRunnable, ns, name,
			fmt.Sprintf("cancelled %s (was %s)", ns+"/"+name, phase), string(v1alpha1.PhaseCancelled), nil)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	if changed {
		s.notifyOutbox()
	}
	out, err := runnableFromRecord(rec, nil)
	return http.StatusOK, out, err
}

// decideRunnable serves approve and reject: only an approver who is not
// the submitter may decide, and only while the runnable waits.
func (s *Server) decideRunnable(approve bool) apiHandler {
	return func(r *http.Request, u auth.User) (int, any, error) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if !s.cfg.Policy.Allowed(u, ns, auth.VerbApprove) {
			return 0, nil, errForbidden("user %q is not an approver in namespace %q", u.Name, ns)
		}
		reviewed, err := pendingVersion(r, "runnable")
		if err != nil {
			return 0, nil, err
		}
		var rec *store.Runnable
		err = s.cfg.Store.Tx(r.Context(), func(tx *store.Tx) error {
			var err error
			if rec, err = tx.GetRunnable(r.Context(), ns, name); err != nil {
				return err
			}
			if v1alpha1.Phase(rec.Phase) != v1alpha1.PhasePendingApproval {
				return errConflict("runnable %s/%s is %s, not waiting for approval", ns, name, rec.Phase)
			}
			if err := checkPendingVersion(reviewed, rec.ResourceVersion, "runnable "+ns+"/"+name); err != nil {
				return err
			}
			if rec.Submitter == u.Name {
				return errForbidden("user %q submitted runnable %s/%s and cannot also decide on it; another approver must", u.Name, ns, name)
			}
			action, phase, msg := "reject", v1alpha1.PhaseRejected, "rejected by "+u.Name
			if approve {
				action, phase, msg = "approve", v1alpha1.PhaseQueued, "approved by "+u.Name+"; waiting for a cluster"
			}
			if err := setRunnablePhase(rec, phase, msg, func(st *v1alpha1.RunnableStatus) { st.ApprovedBy = u.Name }); err != nil {
				return err
			}
			if err := tx.UpdateRunnable(r.Context(), rec); err != nil {
				return err
			}
			if approve {
				if err := enqueueSubmission(r.Context(), tx, rec, stream.SubmissionSubmit); err != nil {
					return err
				}
			}
			return appendAudit(r.Context(), tx, u, action, v1alpha1.KindRunnable, ns, name,
				fmt.Sprintf("%sd %s submitted by %s", action, ns+"/"+name, rec.Submitter), string(phase), nil)
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, errNotFound("runnable %s/%s not found", ns, name)
		}
		if err != nil {
			return 0, nil, err
		}
		if approve {
			s.notifyOutbox()
		}
		out, err := runnableFromRecord(rec, nil)
		return http.StatusOK, out, err
	}
}

// setRunnablePhase changes phase and message in a record, and lets edit
// change more of the status.
func setRunnablePhase(rec *store.Runnable, phase v1alpha1.Phase, message string, edit func(*v1alpha1.RunnableStatus)) error {
	var st v1alpha1.RunnableStatus
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &st); err != nil {
			return fmt.Errorf("runnable %s status: %w", rec.UID, err)
		}
	}
	st.Message = message
	if edit != nil {
		edit(&st)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rec.Phase, rec.Status = string(phase), data
	return nil
}

// enqueueSubmission writes the outbox row that tells submitters to look at
// a runnable again. The message id makes a re-published row a duplicate
// the stream drops.
func enqueueSubmission(ctx context.Context, tx *store.Tx, rec *store.Runnable, event string) error {
	msg := stream.Submission{UID: rec.UID, Namespace: rec.Namespace, Name: rec.Name, Event: event}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return tx.EnqueueOutbox(ctx, &store.OutboxMessage{
		Subject: stream.SubjectSubmissions,
		MsgID:   msg.ID(),
		Data:    data,
	})
}

// runnableFromRecord turns a row (and its attempts, when read) into the
// API object.
func runnableFromRecord(rec *store.Runnable, attempts []*store.Attempt) (*v1alpha1.Runnable, error) {
	var doc storedRunnable
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, fmt.Errorf("runnable %s: stored spec: %w", rec.UID, err)
	}
	var st v1alpha1.RunnableStatus
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &st); err != nil {
			return nil, fmt.Errorf("runnable %s: stored status: %w", rec.UID, err)
		}
	}
	st.Phase = v1alpha1.Phase(rec.Phase)
	st.Cluster = rec.Cluster
	st.SubmittedBy = rec.Submitter
	if st.Phase == v1alpha1.PhasePendingApproval {
		spec := doc.Spec
		st.PendingChange = &v1alpha1.PendingChange[v1alpha1.RunnableSpec]{
			ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10), Spec: &spec, Author: rec.Submitter, Time: rec.CreatedAt,
		}
	}
	if attempts != nil {
		st.Attempts = make([]v1alpha1.Attempt, 0, len(attempts))
		for _, a := range attempts {
			started := a.StartedAt
			st.Attempts = append(st.Attempts, v1alpha1.Attempt{
				Number: a.Number, Cluster: a.Cluster, UID: a.ObjectUID, StartedAt: &started,
				EndedAt: a.EndedAt, Result: a.Result, Reason: a.Reason, Message: a.Message,
				Cleanup: a.Cleanup,
			})
		}
	}
	return &v1alpha1.Runnable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindRunnable},
		Metadata: v1alpha1.ObjectMeta{
			Name: rec.Name, Namespace: rec.Namespace, UID: rec.UID,
			Labels: doc.Labels, Annotations: doc.Annotations,
			Generation: rec.Generation, ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10),
			CreationTimestamp: rec.CreatedAt,
		},
		Spec:   doc.Spec,
		Status: st,
	}, nil
}

// appendAudit records a change in the transaction that makes it. details
// must never hold Secret values; callers pass specs with those removed,
// and whatever sits under data or stringData is redacted all the same.
func appendAudit(ctx context.Context, tx *store.Tx, u auth.User, action, kind, ns, name, summary, outcome string, details any) error {
	e := &audit.Entry{Actor: u.Name, Action: action, Kind: kind, Namespace: ns, Name: name, Summary: summary, Outcome: outcome}
	if details != nil {
		data, err := redactValues(details)
		if err != nil {
			return err
		}
		e.Details = data
	}
	return tx.AppendAudit(ctx, e)
}

func templateKind(t map[string]any) string {
	if k, ok := t["kind"].(string); ok {
		return k
	}
	return "object"
}

func (s *Server) notifyOutbox() {
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify()
	}
}
