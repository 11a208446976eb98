package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// Request is one runnable to create, by its author.
type Request struct {
	// Runnable is the object as written; Prepare fills in its defaults.
	Runnable *v1alpha1.Runnable
	// Author is whose rights it is created with: the caller of the API,
	// or the last writer of the schedule whose tick creates it.
	Author policy.User
	// Via, when set, says in the audit entry what created it for the
	// author (a schedule's tick).
	Via string

	// What Prepare found.
	prepared      bool
	needsApproval bool
	hash          string
	doc           []byte
	details       json.RawMessage
}

// NeedsApproval reports whether the runnable waits for an approver
// (PendingApproval) rather than being queued; set by Prepare.
func (r *Request) NeedsApproval() bool { return r.needsApproval }

// Prepare applies the defaults (failover, retention, priority class),
// validates the runnable, and checks by the policy in force that its
// author may write in its namespace, give it its priority, and run its
// template and what its mutations render. Its refusals are
// v1alpha1.Status errors: 422 naming the field, 403.
func (g *Gate) Prepare(ctx context.Context, req *Request) error {
	obj, u := req.Runnable, req.Author
	obj.SetDefaults()
	if obj.Spec.TTLSecondsAfterFinished == nil {
		obj.Spec.TTLSecondsAfterFinished = g.Policy.RetentionTTL(obj.Metadata.Namespace)
	}
	g.DefaultPriority(obj.Metadata.Namespace, &obj.Spec)
	if errs := v1alpha1.ValidateRunnable(obj, g.now()); len(errs) > 0 {
		return Invalid("Runnable is invalid", errs)
	}
	ns := obj.Metadata.Namespace
	if !g.Policy.Allowed(u, ns, policy.VerbWrite) {
		return forbidden("user %q may not submit runnables in namespace %q", u.Name, ns)
	}
	if err := g.AuthorizePriority(u, ns, &obj.Spec, ""); err != nil {
		return err
	}
	if err := g.AdmitRunnable(ctx, u, ns, &obj.Spec); err != nil {
		return err
	}
	req.needsApproval = g.Policy.ApprovalRequired(ns, v1alpha1.KindRunnable)
	req.hash = v1alpha1.SpecHash(obj.Spec)
	var err error
	if req.doc, err = json.Marshal(store.Document[v1alpha1.RunnableSpec]{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
		Spec: obj.Spec, Author: &store.Author{Name: u.Name, Groups: u.Groups}}); err != nil {
		return err
	}
	if req.details, err = Redact(obj.Spec); err != nil {
		return err
	}
	req.prepared = true
	return nil
}

// Outcome is what Create did.
type Outcome struct {
	// Rec is the runnable created, or the one that holds its name.
	Rec *store.Runnable
	// Created: Rec is new. Otherwise a runnable of that name was there
	// already, and SameSpec says whether it has the request's spec (the
	// same submission sent again).
	Created, SameSpec bool
}

// Create stores a prepared request in tx: a runnable named as requested
// (or a free name from metadata.generateName), Queued with its message to
// the submitters, or PendingApproval where the namespace needs approval,
// with its audit entry, all in tx. When the name is taken nothing is
// written and the Outcome says by what: the name's uniqueness is what
// makes a retried submission, or a tick run by two schedulers, one
// runnable.
func Create(ctx context.Context, tx *store.Tx, req *Request) (*Outcome, error) {
	out, err := CreateMany(ctx, tx, []*Request{req})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// CreateMany stores prepared requests in tx as Create does, together: a
// few statements for all of them rather than a few for each (a page of
// schedules' ticks accepted at once). Each name taken is an Outcome
// saying by what, as in Create.
func CreateMany(ctx context.Context, tx *store.Tx, reqs []*Request) ([]*Outcome, error) {
	news := make([]lifecycle.Creation, len(reqs))
	for i, req := range reqs {
		if !req.prepared {
			return nil, errors.New("submission: Create of a request Prepare did not accept")
		}
		obj, u := req.Runnable, req.Author
		ns, name := obj.Metadata.Namespace, obj.Metadata.Name
		if name == "" {
			var err error
			if name, err = freeName(ctx, tx, ns, obj.Metadata.GenerateName); err != nil {
				return nil, err
			}
		}
		t := lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI, Actor: u.Name,
			Message: "waiting for a cluster", Enqueue: stream.SubmissionSubmit}
		summary := fmt.Sprintf("submitted %s %s", TemplateKind(obj.Spec.Template), ns+"/"+name)
		if req.Via != "" {
			summary += " (" + req.Via + ")"
		}
		if req.needsApproval {
			t.To, t.Enqueue = v1alpha1.PhasePendingApproval, ""
			t.Message = "waiting for approval by an approver other than " + u.Name
			summary += "; waits for approval"
		}
		t.Audit = &audit.Entry{Action: "create", Summary: summary, Details: req.details}
		uid, err := newUID()
		if err != nil {
			return nil, err
		}
		news[i] = lifecycle.Creation{T: t, Rec: &store.Runnable{
			Namespace: ns, Name: name, UID: uid, Generation: 1,
			Spec: req.doc, SpecHash: req.hash, Submitter: u.Name,
		}}
	}
	// The name taken, before or concurrently by another writer (the same
	// submission retried, or another scheduler's tick), is read back:
	// nothing of this request was written.
	created, err := lifecycle.CreateMany(ctx, tx, news)
	if err != nil {
		return nil, err
	}
	out := make([]*Outcome, len(reqs))
	for i, r := range created {
		if r != nil {
			out[i] = &Outcome{Rec: r.Rec, Created: true, SameSpec: true}
			continue
		}
		ns, name := news[i].Rec.Namespace, news[i].Rec.Name
		if out[i], err = existing(ctx, tx, ns, name, reqs[i].hash); err != nil {
			return nil, err
		}
		if out[i] == nil {
			// Its uid cannot have been taken: it is new. So the name was,
			// by a runnable that is gone again within this transaction's
			// view (deleted meanwhile at READ COMMITTED).
			return nil, Conflict("runnable %s/%s was created concurrently and is gone again; submit it again", ns, name)
		}
	}
	return out, nil
}

// existing is the runnable ns/name when there is one.
func existing(ctx context.Context, tx *store.Tx, ns, name, hash string) (*Outcome, error) {
	rec, err := tx.Runnables().Get(ctx, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &Outcome{Rec: rec, SameSpec: rec.SpecHash == hash}, nil
}

// freeName appends random suffixes to prefix until a name is free.
func freeName(ctx context.Context, tx *store.Tx, ns, prefix string) (string, error) {
	for range 8 {
		name := v1alpha1.GenerateName(prefix)
		if _, err := tx.Runnables().Get(ctx, ns, name); errors.Is(err, store.ErrNotFound) {
			return name, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", Conflict("no free name with prefix %q after 8 tries; use a longer prefix", prefix)
}

// TemplateKind is the kind a template names, "object" when none.
func TemplateKind(t map[string]any) string {
	if k, ok := t["kind"].(string); ok {
		return k
	}
	return "object"
}

// newUID is a runnable's uid: a version 7 UUID, whose leading bits are
// the time, so that uids made one after another sort together. The
// unique index on uid then takes a page of new runnables (ten thousand
// schedules' ticks) at its end, a few leaf pages written, rather than
// one leaf in each part of the index, the whole index written again.
func newUID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("a runnable's uid: %w", err)
	}
	return u.String(), nil
}
