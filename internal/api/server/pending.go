package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// A change of a runnable's spec in a namespace that needs approval waits
// beside the live spec (store.Document.Pending) until another person
// approves it; only then is it the live spec, at the next generation,
// with status.approvedBy and approvedGeneration naming who approved it
// and as which. So a runnable approved once cannot be changed into
// something else by its author before it runs, nor while it runs: the
// spec the submitter creates, or applies in place, is always one an
// approver saw. Each of these moves is a row of the lifecycle table.

// sameDocument reports whether next (of spec hash nextHash) is doc (of
// spec hash docHash): the same spec, labels and annotations.
func sameDocument(doc *storedRunnable, nextHash, docHash string, next *storedRunnable) bool {
	return nextHash == docHash && equalStrings(doc.Labels, next.Labels) && equalStrings(doc.Annotations, next.Annotations)
}

// setDocument stores doc as cur's spec column.
func setDocument(cur *lifecycle.Runnable, doc *storedRunnable) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	cur.Rec.Spec = b
	return nil
}

// proposeChange is the move that puts next beside cur's live spec (old)
// to wait for approval; a change that waited already is replaced, and
// the version an approver reviewed with it moves on (409 for them).
func proposeChange(cur *lifecycle.Runnable, old *storedRunnable, next storedRunnable, now time.Time) (*lifecycle.Transition, error) {
	at := now.UTC()
	next.At, next.Pending, next.Approval = &at, nil, nil
	live := *old
	live.Pending = &next
	if err := setDocument(cur, &live); err != nil {
		return nil, err
	}
	details, err := redactValues(next.Spec)
	if err != nil {
		return nil, err
	}
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	author := next.Author.Name
	summary := fmt.Sprintf("proposed a change of the spec of %s (generation %d once approved); it waits for approval by an approver other than %s, and generation %d stays live (%s)",
		ref, cur.Rec.Generation+1, author, cur.Rec.Generation, cur.Phase())
	return &lifecycle.Transition{
		To: cur.Phase(), By: lifecycle.ByAPI, Actor: author,
		Audit: &audit.Entry{Action: "update", Summary: summary, Details: details},
	}, nil
}

// withdrawPending is the move that drops the change waiting beside cur's
// live spec (old), for actor, who sent the live spec again.
func withdrawPending(cur *lifecycle.Runnable, old *storedRunnable, actor string) (*lifecycle.Transition, error) {
	by := pendingAuthor(old)
	live := *old
	live.Pending = nil
	if err := setDocument(cur, &live); err != nil {
		return nil, err
	}
	summary := fmt.Sprintf("withdrew the change of the spec of %s proposed by %s; generation %d stays live",
		cur.Rec.Namespace+"/"+cur.Rec.Name, by, cur.Rec.Generation)
	return &lifecycle.Transition{
		To: cur.Phase(), By: lifecycle.ByAPI, Actor: actor,
		Audit: &audit.Entry{Action: "update", Summary: summary},
	}, nil
}

// changeSpec is the move that makes next cur's live spec at the next
// generation: for its next attempt, or (inPlace) applied to the running
// attempt's object as well, by the submitter. actor is who made the
// change live: its author where no approval is needed, else its approver.
func (s *Server) changeSpec(cur *lifecycle.Runnable, attempts []*store.Attempt, next storedRunnable, inPlace bool, actor string) (*lifecycle.Transition, error) {
	next.Pending = nil
	if err := setDocument(cur, &next); err != nil {
		return nil, err
	}
	generation := cur.Rec.Generation + 1
	cur.Rec.SpecHash, cur.Rec.Generation = v1alpha1.SpecHash(next.Spec), generation
	details, err := redactValues(next.Spec)
	if err != nil {
		return nil, err
	}
	phase := cur.Phase()
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	t := &lifecycle.Transition{
		To: phase, By: lifecycle.ByAPI, Actor: actor,
		Audit: &audit.Entry{Action: "update", Summary: fmt.Sprintf("updated the spec of %s (generation %d, %s); its next attempt uses it",
			ref, generation, phase)},
	}
	if inPlace {
		if t, err = operate.Update(cur, attempts, actor, s.now(), generation); err != nil {
			return nil, err
		}
	}
	t.Audit.Details = details
	return t, nil
}

// approveChange is the move that makes the change waiting beside cur's
// live spec (old) live, for approver: as an update would have, had it
// needed no approval, provided the runnable can take it now (else the
// refusal, and the change keeps waiting).
func (s *Server) approveChange(cur *lifecycle.Runnable, old *storedRunnable, attempts []*store.Attempt, approver string) (*lifecycle.Transition, error) {
	ref := cur.Rec.Namespace + "/" + cur.Rec.Name
	pending := *old.Pending
	inPlace, err := updatable(cur.Phase(), old.Spec.Template, pending.Spec.Template, cur.Rec.Namespace, cur.Rec.Name)
	if err != nil {
		return nil, err
	}
	by := pendingAuthor(old)
	t, err := s.changeSpec(cur, attempts, pending, inPlace, approver)
	if err != nil {
		return nil, err
	}
	generation := cur.Rec.Generation
	edit := t.Edit
	t.Edit = func(st *v1alpha1.RunnableStatus) error {
		st.ApprovedBy, st.ApprovedGeneration = approver, generation
		if edit != nil {
			return edit(st)
		}
		return nil
	}
	t.Audit.Action = "approve"
	t.Audit.Summary = fmt.Sprintf("approved the change of %s proposed by %s, live as generation %d: %s", ref, by, generation, t.Audit.Summary)
	return t, nil
}

// rejectChange is the move that drops the change waiting beside cur's
// live spec (old), for approver.
func rejectChange(cur *lifecycle.Runnable, old *storedRunnable, approver string) (*lifecycle.Transition, error) {
	by := pendingAuthor(old)
	t, err := withdrawPending(cur, old, approver)
	if err != nil {
		return nil, err
	}
	t.Audit.Action = "reject"
	t.Audit.Summary = fmt.Sprintf("rejected the change of %s proposed by %s; generation %d stays live",
		cur.Rec.Namespace+"/"+cur.Rec.Name, by, cur.Rec.Generation)
	return t, nil
}

// pendingAuthor names who proposed the change waiting in doc.
func pendingAuthor(doc *storedRunnable) string {
	if doc.Pending == nil || doc.Pending.Author == nil {
		return "an unknown author"
	}
	return doc.Pending.Author.Name
}

// pendingChangeOf is status.pendingChange of a runnable: the change
// waiting beside its live spec, or, while it waits to run at all
// (PendingApproval), the live spec itself; nil when nothing waits.
func pendingChangeOf(rec *store.Runnable, doc *storedRunnable) *v1alpha1.PendingChange[v1alpha1.RunnableSpec] {
	rv := strconv.FormatInt(rec.ResourceVersion, 10)
	switch {
	case v1alpha1.Phase(rec.Phase) == v1alpha1.PhasePendingApproval:
		spec := doc.Spec
		return &v1alpha1.PendingChange[v1alpha1.RunnableSpec]{ResourceVersion: rv, Spec: &spec, Generation: rec.Generation,
			Author: rec.Submitter, Time: rec.UpdatedAt}
	case doc.Pending != nil:
		spec := doc.Pending.Spec
		pc := &v1alpha1.PendingChange[v1alpha1.RunnableSpec]{ResourceVersion: rv, Spec: &spec, Generation: rec.Generation + 1,
			Author: pendingAuthor(doc), Time: rec.UpdatedAt}
		if doc.Pending.At != nil {
			pc.Time = *doc.Pending.At
		}
		return pc
	}
	return nil
}
