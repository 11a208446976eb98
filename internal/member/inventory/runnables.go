package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/health"
)

// moveRunnables is the events' step that carries what the inventory now
// holds of the objects purser created onto their runnables, through the
// lifecycle (the one way a runnable moves): the phase moves forward
// (Running, then Succeeded or Failed), the health and the object's last
// status are kept, and the end of an attempt is recorded and audited. It
// runs in the transaction that stores the rows, on the rows the sink
// stored, because those are its only trace: a batch that failed is
// redelivered whole, and a row stored by an earlier delivery is not stored
// (nor handed here) again, so a move made apart from its rows could be
// lost for good. An older state handed back for redelivery is not among
// the stored rows either, so it never moves a runnable back. An object of
// an older attempt, or of a runnable that already ended otherwise
// (cancelled, failed over), changes nothing.
func moveRunnables(ctx context.Context, tx *store.Tx, _ eventBatch, stored []store.InventoryRow) error {
	for i := range stored {
		row := &stored[i]
		uid := row.Labels[v1alpha1.LabelRunnableUID]
		if uid == "" {
			continue
		}
		if err := observeRunnable(ctx, tx, uid, row); err != nil {
			return err
		}
	}
	return nil
}

func observeRunnable(ctx context.Context, tx *store.Tx, uid string, row *store.InventoryRow) error {
	rn, err := lifecycle.Load(ctx, tx, uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil // a runnable removed since; the inventory row still tells
	}
	if err != nil {
		return err
	}
	current := rn.Phase()
	if !lifecycle.Allowed(current, current, lifecycle.ByIngester) {
		return nil // not the ingester's to follow any more
	}
	attempts, err := tx.Attempts().List(ctx, uid)
	if err != nil || len(attempts) == 0 {
		return err
	}
	last := attempts[len(attempts)-1]
	if n, err := strconv.Atoi(row.Labels[v1alpha1.LabelAttempt]); err != nil || n != last.Number || row.Cluster != last.Cluster {
		return nil // an earlier attempt's object
	}
	result, fenced := objectStatus(row.Object)
	if current.Terminal() {
		// The object goes on settling after the verdict: a Job reports
		// SuccessCriteriaMet before its pod counts are final and Complete
		// after. Its result keeps following the object that ended it, as
		// long as the object says the same; nothing else changes.
		if verdict(row.Phase) != current || result == nil || equalJSON(rn.Status.Result, result) {
			return nil
		}
		_, err := lifecycle.Apply(ctx, tx, rn, lifecycle.Transition{To: current, By: lifecycle.ByIngester,
			Edit: func(st *v1alpha1.RunnableStatus) error { st.Result = result; return nil }})
		return err
	}

	next := current
	switch row.Phase {
	case health.PhaseRunning:
		if current != v1alpha1.PhaseRunning {
			next = v1alpha1.PhaseRunning
		}
	case health.PhaseSucceeded:
		next = v1alpha1.PhaseSucceeded
	case health.PhaseFailed:
		next = v1alpha1.PhaseFailed
	}
	st := rn.Status
	// An attempt proves itself the first time its object is Healthy and
	// running (or done): only then is what it reports carried on.
	proven := row.Health == string(v1alpha1.HealthHealthy) && (row.Phase == health.PhaseRunning || row.Phase == health.PhaseSucceeded)
	// An object its controller has not taken up is Unknown, but waits as
	// an Unhealthy one does: its toleration counts from the first such
	// observation (health.PhaseUnobserved).
	waits := row.Health == string(v1alpha1.HealthUnhealthy) || row.Phase == health.PhaseUnobserved
	if next == current && string(st.Health) == row.Health && equalJSON(st.Result, result) && st.Fenced == fenced &&
		(!proven || st.HealthySince != nil) && waits == (st.UnhealthySince != nil) {
		return nil
	}
	kind := row.Kind + " " + row.Namespace + "/" + row.Name
	t := lifecycle.Transition{To: next, By: lifecycle.ByIngester, Edit: func(st *v1alpha1.RunnableStatus) error {
		st.Health = v1alpha1.Health(row.Health)
		st.Fenced = fenced
		switch {
		case !waits:
			st.UnhealthySince = nil
		case st.UnhealthySince == nil:
			since := row.ObservedAt
			st.UnhealthySince = &since
		}
		if proven && st.HealthySince == nil {
			since := row.ObservedAt
			st.HealthySince = &since
		}
		if result != nil {
			st.Result = result
		}
		return nil
	}}
	// A planned move that failed left the job running where it was, and
	// its message says why and that nothing moved: true for as long as
	// that attempt runs on, so an observation of it keeps the message.
	moveFailedHere := st.Move != nil && st.Move.Step == v1alpha1.MoveFailed && st.Move.Attempt == last.Number
	switch next {
	case v1alpha1.PhaseRunning:
		if current == v1alpha1.PhaseRunning && moveFailedHere {
			break
		}
		t.Message = kind + " is running on " + row.Cluster
	case v1alpha1.PhaseSucceeded:
		t.Message = kind + " succeeded on " + row.Cluster
	case v1alpha1.PhaseFailed:
		t.Message = kind + " failed on " + row.Cluster
	}
	if next.Terminal() {
		ended := *last
		at := row.ObservedAt
		ended.EndedAt, ended.Result = &at, string(next)
		t.Attempt = &ended
		t.Audit = &audit.Entry{Action: "observe", Summary: fmt.Sprintf("%s (attempt %d)", t.Message, last.Number)}
		if next == v1alpha1.PhaseFailed {
			// The submitter judges the failure by spec.retry; the outbox
			// delivers the message once this commits.
			t.Enqueue, t.EnqueueAttempt = stream.SubmissionFailed, last.Number
		}
	}
	_, err = lifecycle.Apply(ctx, tx, rn, t)
	return err
}

// verdict is the runnable phase an interpreted object phase ends in, or
// "" when it does not end it.
func verdict(phase string) v1alpha1.Phase {
	switch phase {
	case health.PhaseSucceeded:
		return v1alpha1.PhaseSucceeded
	case health.PhaseFailed:
		return v1alpha1.PhaseFailed
	}
	return ""
}

// objectStatus is the status of an object as the agent sent it, and
// whether its agent fenced it.
func objectStatus(object []byte) (map[string]any, bool) {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	if len(object) == 0 || json.Unmarshal(object, &obj) != nil {
		return nil, false
	}
	_, fenced := obj.Metadata.Annotations[v1alpha1.AnnotationFenced]
	return obj.Status, fenced
}

func equalJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// markFencedDeletions is the events' step that records, on its runnable,
// that the agent deleted the current attempt's object when its lease
// expired (status.fenced, as for an object it suspended): the failover
// controller then creates it again from its template once the cluster is
// Ready, if the runnable did not move. Only the attempt's own object
// counts (its uid): a deletion redelivered after the object was created
// again changes nothing.
func markFencedDeletions(ctx context.Context, tx *store.Tx, b eventBatch, _ []store.InventoryRow) error {
	for _, d := range b.fenced {
		uid := d.labels[v1alpha1.LabelRunnableUID]
		rn, err := lifecycle.Load(ctx, tx, uid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		current := rn.Phase()
		if current.Terminal() || rn.Status.Fenced || !lifecycle.Allowed(current, current, lifecycle.ByIngester) {
			continue
		}
		attempts, err := tx.Attempts().List(ctx, uid)
		if err != nil {
			return err
		}
		if len(attempts) == 0 {
			continue
		}
		last := attempts[len(attempts)-1]
		if n, err := strconv.Atoi(d.labels[v1alpha1.LabelAttempt]); err != nil || n != last.Number || last.Cluster != d.cluster ||
			last.EndedAt != nil || last.ObjectUID != d.uid {
			continue
		}
		msg := fmt.Sprintf("%s %s/%s was deleted on %s by its agent, whose lease had expired (fenced)", d.kind, d.namespace, d.name, d.cluster)
		if _, err := lifecycle.Apply(ctx, tx, rn, lifecycle.Transition{To: current, By: lifecycle.ByIngester, Message: msg,
			Edit: func(st *v1alpha1.RunnableStatus) error { st.Fenced = true; return nil }}); err != nil {
			return err
		}
	}
	return nil
}
