package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// errSentAgain: the submitter sent a create for the attempt after the
// decision to move it was taken.
var errSentAgain = errors.New("a create for the attempt was sent again meanwhile; the next pass waits for it to land or lapse")

// evict ends the runnable's current attempt and, in the same transaction,
// keeps its preserved state, marks the old copy for removal and either
// queues the runnable for placement elsewhere or, when the old copy must
// go first, leaves it FailingOver until the cleanup has removed it.
func (c *Controller) evict(ctx context.Context, rec *store.Runnable, r *runnable, v Verdict, candidates []v1alpha1.RestorePoint) error {
	now := c.cfg.Now()
	var rules []v1alpha1.StatePreservationRule
	if app := appFailover(&r.doc.Spec); app != nil && app.StatePreservation != nil {
		rules = app.StatePreservation.Rules
	}

	err := c.runnableTx(ctx, rec, func(tx *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		attempts, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return nil, err
		}
		n := len(attempts)
		if n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].Cluster != rec.Cluster {
			return nil, store.ErrMoved
		}
		a := attempts[n-1]
		if v.TrustsFencing {
			// Read again under a lock that orders this end of the attempt
			// with the submitter's next send (store.Attempts.SetCreateLandedBy).
			landedBy, err := tx.Attempts().LockCreateLandedBy(ctx, a.RunnableUID, a.Number)
			if err != nil {
				return nil, err
			}
			if HoldLateCreate(v, Cluster{Name: a.Cluster}, a.Number, landedBy, now, c.timing()) != nil {
				return nil, errSentAgain
			}
		}
		// Only proven state travels: the attempt must have run Healthy.
		carry := attempt.Preserve(rules, st.Result, st.Preserved, st.RestorePoint, candidates, a.Number, st.HealthySince != nil)
		preserved, notes := carry.Preserved, carry.Notes
		a.EndedAt, a.Result, a.Reason, a.Message = &now, attempt.ResultEvicted, v.Reason, v.Message
		a.Reported, a.Note = carry.Reported, strings.Join(notes, "; ")
		if v.Purge != v1alpha1.PurgeNever {
			a.Cleanup = store.CleanupPending
			if v.Purge == v1alpha1.PurgeGracefully && !v.DeleteFirst {
				after := now.Add(v.Grace)
				a.CleanupAfter = &after
			}
		}
		if err := tx.Attempts().Put(ctx, a); err != nil {
			return nil, err
		}

		st.Preserved, st.RestorePoint = preserved, carry.RestorePoint
		st.Health, st.UnhealthySince, st.HealthySince = "", nil, nil
		st.Waiting, st.ConfirmedStopped = "", nil
		var b strings.Builder
		fmt.Fprintf(&b, "attempt %d evicted from %s (%s): %s", a.Number, a.Cluster, v.Reason, v.Message)
		if len(preserved) > 0 {
			fmt.Fprintf(&b, "; preserved %s", attempt.PreservedString(preserved))
		}
		if p := carry.RestorePoint; p != nil {
			fmt.Fprintf(&b, "; restore point %s (%s, attempt %d)", p.Path, p.Source, p.Attempt)
		}
		for _, note := range notes {
			fmt.Fprintf(&b, "; not preserved: %s", note)
		}
		phase := v1alpha1.PhaseQueued
		switch {
		case v.DeleteFirst:
			phase = v1alpha1.PhaseFailingOver
			fmt.Fprintf(&b, "; removing it from %s before placing it again", a.Cluster)
		case a.Cleanup == store.CleanupPending:
			fmt.Fprintf(&b, "; placing it again, and removing the old copy from %s when possible", a.Cluster)
		default:
			fmt.Fprintf(&b, "; placing it again; the old copy stays on %s (purge mode Never)", a.Cluster)
		}
		st.Message = b.String()
		ch := &change{phase: phase, audit: &audit.Entry{Action: "evict", Summary: st.Message,
			Details: evictDetails(a, v, preserved, carry)}}
		if phase == v1alpha1.PhaseQueued {
			ch.cluster, ch.enqueue = new(""), a.Number
		}
		return ch, nil
	})
	if err == nil {
		if !v.DeleteFirst {
			c.notify() // queued with its submission message
		}
		c.metrics.evictions.WithLabelValues(v.Reason).Inc()
		c.log.Info("evicted", "runnable", rec.Namespace+"/"+rec.Name, "reason", v.Reason, "message", v.Message)
	}
	return err
}

// setWaiting writes what a runnable waiting for a failover waits for,
// when that changed, without touching anything else.
func (c *Controller) setWaiting(ctx context.Context, rec *store.Runnable, r *runnable, waiting, msg string) error {
	if r.status.Message == msg && r.status.Waiting == waiting {
		return nil
	}
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		st.Message, st.Waiting = msg, waiting
		return &change{phase: v1alpha1.Phase(rec.Phase)}, nil
	})
}

// setUnknown writes that what a runnable's object does cannot be known
// (its cluster is not Ready): health Unknown, and what purser waits for.
// The time it turned Unhealthy, if it was, is kept: the toleration goes
// on counting from the object's own evidence once the cluster is back.
func (c *Controller) setUnknown(ctx context.Context, rec *store.Runnable, r *runnable, waiting, msg string) error {
	if r.status.Message == msg && r.status.Waiting == waiting && r.status.Health == v1alpha1.HealthUnknown {
		return nil
	}
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		st.Message, st.Waiting, st.Health = msg, waiting, v1alpha1.HealthUnknown
		return &change{phase: v1alpha1.Phase(rec.Phase)}, nil
	})
}

// readyAgain ends the wait of a runnable whose cluster is Ready again:
// its health is what was last observed of its attempt's object (nothing
// may have changed on it, so no new observation need come), Unknown if
// nothing was.
func (c *Controller) readyAgain(ctx context.Context, rec *store.Runnable, r *runnable) error {
	return c.runnableTx(ctx, rec, func(tx *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		observed, waits := v1alpha1.HealthUnknown, false
		sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRunnableUID: rec.UID})
		rows, _, err := tx.Inventory().List(ctx, store.InventoryFilter{Cluster: rec.Cluster, Namespace: rec.Namespace,
			Selector: sel, WithoutObject: true, Limit: 10})
		if err != nil {
			return nil, err
		}
		attempts, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return nil, err
		}
		if n := len(attempts); n > 0 {
			for _, row := range rows {
				if row.Labels[v1alpha1.LabelAttempt] == strconv.Itoa(attempts[n-1].Number) && row.Health != "" {
					observed = v1alpha1.Health(row.Health)
					waits = observed == v1alpha1.HealthUnhealthy || row.Phase == v1alpha1.ObjectUnobserved
				}
			}
		}
		st.Health, st.Waiting = observed, ""
		if !waits {
			st.UnhealthySince = nil
		}
		st.Message = fmt.Sprintf("cluster %s answers again and is Ready, so nothing holds the runnable back any more; it is %s there, health %s as last observed",
			rec.Cluster, rec.Phase, observed)
		return &change{phase: v1alpha1.Phase(rec.Phase)}, nil
	})
}

// change is what a runnableTx callback does to the runnable besides its
// status.
type change struct {
	phase   v1alpha1.Phase
	cluster *string      // nil keeps the cluster
	audit   *audit.Entry // Action, Summary
	// enqueue: the runnable waits for a cluster again after the end of
	// this attempt.
	enqueue int
}

// runnableTx applies edit to the runnable in one transaction, provided it
// is still as rec found it: edit changes the status, may write more, and
// says what else changes. A runnable that moved on meanwhile is left
// alone.
func (c *Controller) runnableTx(ctx context.Context, rec *store.Runnable,
	edit func(tx *store.Tx, st *v1alpha1.RunnableStatus) (*change, error)) error {
	r, err := lifecycle.Decode(rec)
	if err != nil {
		return err
	}
	err = c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		st := r.Status
		ch, err := edit(tx, &st)
		if err != nil {
			return err
		}
		t := lifecycle.Transition{
			To: ch.phase, By: lifecycle.ByController, Cluster: ch.cluster, Audit: ch.audit,
			Edit: func(cur *v1alpha1.RunnableStatus) error { *cur = st; return nil },
		}
		if ch.enqueue > 0 {
			t.Enqueue, t.EnqueueAttempt = stream.SubmissionFailover, ch.enqueue
		}
		_, err = lifecycle.Apply(ctx, tx, r, t)
		return err
	})
	if errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// evictDetails is the failover's record in the audit log: why, from
// where, what the attempt reported and what the next one carries. The
// target cluster is chosen by the submitter; its "place" entry names it
// with the same restore point.
func evictDetails(a *store.Attempt, v Verdict, preserved map[string]string, carry attempt.Carry) json.RawMessage {
	d := map[string]any{
		"attempt": a.Number, "reason": v.Reason, "sourceCluster": a.Cluster, "message": v.Message,
	}
	if len(preserved) > 0 {
		d["preserved"] = preserved
	}
	if len(carry.Reported) > 0 {
		d["reported"] = carry.Reported
	}
	if carry.RestorePoint != nil {
		d["restorePoint"] = carry.RestorePoint
	}
	if len(carry.Notes) > 0 {
		d["notes"] = carry.Notes
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil // only strings, numbers and maps of them: cannot happen
	}
	return b
}
