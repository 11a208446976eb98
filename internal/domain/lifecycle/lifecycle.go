// Package lifecycle is the one way a runnable moves. The API, the
// submitter, the ingester and the controller decide when a runnable's
// phase or status changes; this package owns how: the typed status
// (decoded here and nowhere else), the table of allowed moves (table.go),
// and Apply, which writes a move with its attempt, its submission message
// and its audit entry in one transaction, against the resourceVersion the
// caller read.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// ErrNotAllowed is Apply's answer to a move the table does not have.
var ErrNotAllowed = errors.New("move not allowed")

// Runnable is a stored runnable with its status decoded.
type Runnable struct {
	Rec    *store.Runnable
	Status v1alpha1.RunnableStatus
}

// Phase is the runnable's stored phase.
func (r *Runnable) Phase() v1alpha1.Phase { return v1alpha1.Phase(r.Rec.Phase) }

// Decode reads rec's status. A row without status gives the zero status.
func Decode(rec *store.Runnable) (*Runnable, error) {
	r := &Runnable{Rec: rec}
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &r.Status); err != nil {
			return nil, fmt.Errorf("runnable %s/%s: stored status: %w", rec.Namespace, rec.Name, err)
		}
	}
	return r, nil
}

// Load reads the runnable uid in tx; store.ErrNotFound when it is gone.
func Load(ctx context.Context, tx *store.Tx, uid string) (*Runnable, error) {
	rec, err := tx.Runnables().GetByUID(ctx, uid)
	if err != nil {
		return nil, err
	}
	return Decode(rec)
}

// Transition is one move of a runnable.
type Transition struct {
	// To is the phase after the move; the current phase for a change
	// that keeps it.
	To v1alpha1.Phase
	By Cause
	// Actor names the audit entry's actor when a person caused the move;
	// "" is By.
	Actor string
	// Cluster, when set, replaces the runnable's cluster.
	Cluster *string
	// Message, when set, replaces the status message.
	Message string
	// Edit changes more of the status. An error aborts the move.
	Edit func(st *v1alpha1.RunnableStatus) error
	// Attempt is written (inserted or replaced) with the move.
	Attempt *store.Attempt
	// Audit is the move's audit entry: Action, Summary and Details; the
	// rest is filled in. Moves the table marks audited need one.
	Audit *audit.Entry
	// Enqueue, when set, is the submission event (stream.Submission*)
	// that tells the submitters to look at the runnable again;
	// EnqueueAttempt tells one failover's message from the next.
	Enqueue        string
	EnqueueAttempt int
}

// Apply writes t in tx, provided the runnable is still at the
// resourceVersion of r (else store.ErrMoved, and nothing is written) and
// the table has the move (else ErrNotAllowed). The runnable is written
// first (its optimistic check decides), then the attempt, the submission
// message, and the audit entry last, because appending it holds the
// chain's head until commit. r itself is not changed, so that a
// transaction run again by store.Tx starts from what the caller read.
func Apply(ctx context.Context, tx *store.Tx, r *Runnable, t Transition) (*Runnable, error) {
	from := r.Phase()
	if !Allowed(from, t.To, t.By) {
		return nil, fmt.Errorf("runnable %s/%s: %s may not move it from %s to %s: %w",
			r.Rec.Namespace, r.Rec.Name, t.By, from, t.To, ErrNotAllowed)
	}
	if t.Audit == nil && needsAudit(from, t.To, t.By) {
		return nil, fmt.Errorf("runnable %s/%s: the move from %s to %s by %s needs an audit entry: %w",
			r.Rec.Namespace, r.Rec.Name, from, t.To, t.By, ErrNotAllowed)
	}
	next, err := Decode(r.Rec) // a copy of the status to edit
	if err != nil {
		return nil, err
	}
	rec := *r.Rec
	next.Rec = &rec
	if t.Message != "" {
		next.Status.Message = t.Message
	}
	if t.To == v1alpha1.PhaseScheduled && from != v1alpha1.PhaseScheduled {
		// A new attempt: nothing is known of its object yet, whatever
		// the one before it showed.
		next.Status.Health, next.Status.UnhealthySince, next.Status.HealthySince = v1alpha1.HealthUnknown, nil, nil
	}
	if t.Edit != nil {
		if err := t.Edit(&next.Status); err != nil {
			return nil, err
		}
	}
	rec.Phase = string(t.To)
	if t.Cluster != nil {
		rec.Cluster = *t.Cluster
	}
	if t.To.Terminal() && !from.Terminal() {
		if err := stampEnd(&rec); err != nil {
			return nil, err
		}
	}
	if from.Terminal() && !t.To.Terminal() {
		// Started again (a rerun): retention waits for the new end.
		rec.EndedAt, rec.RemoveAfter = nil, nil
	}
	if rec.Status, err = encode(next.Status); err != nil {
		return nil, err
	}
	if err := tx.Runnables().Update(ctx, &rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, store.ErrMoved
		}
		return nil, err
	}
	if err := finish(ctx, tx, next, t); err != nil {
		return nil, err
	}
	return next, nil
}

// Create writes a new runnable in the phase t moves it to from New, with
// its audit entry and submission message. rec carries everything but its
// status, which t.Message and t.Edit fill in. A name or uid taken is
// store.ErrConflict, and nothing is written.
func Create(ctx context.Context, tx *store.Tx, rec *store.Runnable, t Transition) (*Runnable, error) {
	out, err := CreateMany(ctx, tx, []Creation{{Rec: rec, T: t}})
	if err != nil {
		return nil, err
	}
	if out[0] == nil {
		return nil, fmt.Errorf("create runnable %s/%s (uid %s): name or uid already exists: %w", rec.Namespace, rec.Name, rec.UID, store.ErrConflict)
	}
	return out[0], nil
}

// Creation is one runnable for CreateMany: its record and the move that
// creates it.
type Creation struct {
	Rec *store.Runnable
	T   Transition
}

// CreateMany creates each of news as Create does, with a few statements
// for all of them rather than a few for each (a page of a schedule's
// ticks): the runnables, then their attempts, their submission messages,
// and their audit entries last, in the order of news. One whose name or
// uid is taken is left out, nil in the result, and nothing of it is
// written.
func CreateMany(ctx context.Context, tx *store.Tx, news []Creation) ([]*Runnable, error) {
	out := make([]*Runnable, len(news))
	recs := make([]*store.Runnable, len(news))
	for i, n := range news {
		rec, t := n.Rec, n.T
		if !Allowed(New, t.To, t.By) || t.Audit == nil {
			return nil, fmt.Errorf("runnable %s/%s: %s may not create it %s: %w", rec.Namespace, rec.Name, t.By, t.To, ErrNotAllowed)
		}
		r := &Runnable{Rec: rec, Status: v1alpha1.RunnableStatus{Message: t.Message}}
		if t.Edit != nil {
			if err := t.Edit(&r.Status); err != nil {
				return nil, err
			}
		}
		rec.Phase = string(t.To)
		if t.To.Terminal() {
			if err := stampEnd(rec); err != nil {
				return nil, err
			}
		}
		var err error
		if rec.Status, err = encode(r.Status); err != nil {
			return nil, err
		}
		out[i], recs[i] = r, rec
	}
	created, err := tx.Runnables().CreateMany(ctx, recs)
	if err != nil {
		return nil, err
	}
	var msgs []*store.OutboxMessage
	var entries []*audit.Entry
	for i, n := range news {
		if !created[i] {
			out[i] = nil
			continue
		}
		t := n.T
		if t.Attempt != nil {
			if err := tx.Attempts().Put(ctx, t.Attempt); err != nil {
				return nil, err
			}
		}
		if t.Enqueue != "" {
			m, err := submissionMessage(n.Rec, t.Enqueue, t.EnqueueAttempt)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		}
		entries = append(entries, auditEntry(n.Rec, t.By, t.Actor, t.To, t.Audit))
	}
	if err := tx.Outbox().EnqueueMany(ctx, msgs); err != nil {
		return nil, err
	}
	if err := tx.Audit().AppendMany(ctx, entries); err != nil {
		return nil, err
	}
	return out, nil
}

// Remove deletes an ended runnable's record and its attempts, provided it
// is still at r's resourceVersion; the audit log keeps its history. What
// its attempts may have left on their clusters is handed to the
// controller as leftover copies, to delete there.
func Remove(ctx context.Context, tx *store.Tx, r *Runnable, by Cause, actor string, entry audit.Entry) error {
	from := r.Phase()
	if !Allowed(from, Removed, by) {
		return fmt.Errorf("runnable %s/%s: %s may not remove it while it is %s: %w",
			r.Rec.Namespace, r.Rec.Name, by, from, ErrNotAllowed)
	}
	attempts, err := tx.Attempts().List(ctx, r.Rec.UID)
	if err != nil {
		return err
	}
	var doc store.Document[v1alpha1.RunnableSpec]
	if err := json.Unmarshal(r.Rec.Spec, &doc); err != nil {
		return fmt.Errorf("runnable %s/%s: stored spec: %w", r.Rec.Namespace, r.Rec.Name, err)
	}
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	for _, a := range attempts {
		if a.Cleanup == store.CleanupDone || (a.ObjectUID == "" && a.Cleanup != store.CleanupPending) {
			continue // nothing of it can be on its cluster
		}
		if err := tx.LeftoverCopies().Put(ctx, &store.LeftoverCopy{
			RunnableUID: r.Rec.UID, Attempt: a.Number, Cluster: a.Cluster,
			APIVersion: apiVersion, Kind: kind, Namespace: r.Rec.Namespace,
			Name: v1alpha1.ObjectName(doc.Spec.Template, r.Rec.Name), Runnable: r.Rec.Namespace + "/" + r.Rec.Name,
		}); err != nil {
			return err
		}
	}
	if err := tx.Runnables().Delete(ctx, r.Rec.UID, r.Rec.ResourceVersion); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.ErrMoved
		}
		return err
	}
	return appendAudit(ctx, tx, r.Rec, by, actor, Removed, &entry)
}

// stampEnd stamps a runnable that reaches an ended phase: when, and when
// retention removes it (spec.ttlSecondsAfterFinished).
func stampEnd(rec *store.Runnable) error {
	now := time.Now()
	rec.EndedAt = &now
	var doc struct {
		Spec struct {
			TTL *int64 `json:"ttlSecondsAfterFinished"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return fmt.Errorf("runnable %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
	}
	if ttl := doc.Spec.TTL; ttl != nil {
		at := now.Add(time.Duration(*ttl) * time.Second)
		rec.RemoveAfter = &at
	}
	return nil
}

// finish writes what comes with a move besides the runnable's row.
func finish(ctx context.Context, tx *store.Tx, r *Runnable, t Transition) error {
	if t.Attempt != nil {
		if err := tx.Attempts().Put(ctx, t.Attempt); err != nil {
			return err
		}
	}
	if t.Enqueue != "" {
		if err := enqueue(ctx, tx, r.Rec, t.Enqueue, t.EnqueueAttempt); err != nil {
			return err
		}
	}
	if t.Audit == nil {
		return nil
	}
	return appendAudit(ctx, tx, r.Rec, t.By, t.Actor, t.To, t.Audit)
}

func appendAudit(ctx context.Context, tx *store.Tx, rec *store.Runnable, by Cause, actor string, to v1alpha1.Phase, in *audit.Entry) error {
	return tx.Audit().Append(ctx, auditEntry(rec, by, actor, to, in))
}

// auditEntry is a move's audit entry, from the one its transition gave.
func auditEntry(rec *store.Runnable, by Cause, actor string, to v1alpha1.Phase, in *audit.Entry) *audit.Entry {
	e := *in
	e.Actor = actor
	if e.Actor == "" {
		e.Actor = string(by)
	}
	e.Kind, e.Namespace, e.Name = v1alpha1.KindRunnable, rec.Namespace, rec.Name
	e.Outcome = string(to)
	if to == Removed {
		e.Outcome = "Removed"
	}
	return &e
}

// enqueue writes the outbox row that tells the submitters to look at the
// runnable again.
func enqueue(ctx context.Context, tx *store.Tx, rec *store.Runnable, event string, attempt int) error {
	m, err := submissionMessage(rec, event, attempt)
	if err != nil {
		return err
	}
	return tx.Outbox().Enqueue(ctx, m)
}

// submissionMessage is the outbox row of a submission event. The message
// id makes a re-published row a duplicate the stream drops; the attempt
// number tells one failover's message from the next, the spec's
// generation one update's from the next.
func submissionMessage(rec *store.Runnable, event string, attempt int) (*store.OutboxMessage, error) {
	msg := stream.Submission{UID: rec.UID, Namespace: rec.Namespace, Name: rec.Name, Event: event, Attempt: attempt}
	if event == stream.SubmissionUpdate {
		// Two updates of one attempt are two messages, not a duplicate.
		msg.Generation = rec.Generation
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return &store.OutboxMessage{Subject: stream.SubjectSubmissions, MsgID: msg.ID(), Data: data}, nil
}

func encode(st v1alpha1.RunnableStatus) ([]byte, error) {
	// Phase, cluster and attempts have columns and tables of their own;
	// the stored status never carries a second, stale copy of them.
	st.Phase, st.Cluster, st.SubmittedBy, st.Attempts = "", "", "", nil
	return json.Marshal(st)
}
