package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// removeTimeout bounds one delete on a member cluster: a cluster that
// does not answer is tried again next pass, and does not hold up the
// others.
const removeTimeout = 5 * time.Second

// cleanup removes the copies that ended attempts left on their clusters:
// evicted attempts (at once, or for a graceful purge once the next attempt
// is healthy or the grace period is over) and attempts given up because
// their cluster could not be reached. A cluster that is unreachable is
// skipped until it is back; then its old copies go before anything else
// can happen there. A runnable FailingOver is queued for placement once
// its old copy is gone.
func (c *Controller) cleanup(ctx context.Context, views map[string]*clusterView) error {
	var pending []*store.Attempt
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		pending, err = tx.Attempts().ListPendingCleanups(ctx, 1000)
		return err
	})
	if err != nil {
		return err
	}
	failed := map[string]bool{} // clusters that failed a delete in this pass
	var errs []error
	for _, a := range pending {
		view := views[a.Cluster]
		if view != nil && !view.failover.Reachable {
			if err := c.release(ctx, a, view); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if view != nil && failed[a.Cluster] {
			continue
		}
		if err := c.purge(ctx, a, view); err != nil {
			failed[a.Cluster] = true
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// purge removes the copy of attempt a, if its time has come, and records
// that it is gone.
func (c *Controller) purge(ctx context.Context, a *store.Attempt, view *clusterView) error {
	var rec *store.Runnable
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Runnables().GetByUID(ctx, a.RunnableUID)
		return err
	})
	if err != nil {
		return err
	}
	r, err := readRunnable(rec)
	if err != nil {
		return err
	}
	if a.CleanupAfter != nil && c.cfg.Now().Before(*a.CleanupAfter) && !nextIsHealthy(rec, r) {
		return nil
	}
	name := v1alpha1.ObjectName(r.doc.Spec.Template, rec.Name)
	gvk, err := r.gvk()
	if err != nil {
		return c.purged(ctx, rec, a, "nothing to remove: "+err.Error())
	}
	if view == nil {
		return c.purged(ctx, rec, a, fmt.Sprintf("cluster %s was removed from purser; nothing to delete there", a.Cluster))
	}
	cl, err := c.cfg.Objects.Get(view.row)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	deleted, err := cl.Remove(rctx, gvk, rec.Namespace, name, rec.UID, a.Number)
	if err != nil {
		return fmt.Errorf("remove %s %s/%s of attempt %d from %s: %w", gvk.Kind, rec.Namespace, name, a.Number, a.Cluster, err)
	}
	if deleted {
		// Deleted now; it counts as cleaned up once a read shows it gone
		// (finalizers may hold it a while). An object without finalizers
		// is gone at once, so look again within this pass rather than
		// leave a FailingOver runnable to the next one.
		c.log.Info("deleted an old copy", "runnable", rec.Namespace+"/"+rec.Name, "attempt", a.Number, "cluster", a.Cluster)
		if deleted, err = cl.Remove(rctx, gvk, rec.Namespace, name, rec.UID, a.Number); err != nil || deleted {
			return nil // still there: the next pass looks again
		}
	}
	return c.purged(ctx, rec, a, fmt.Sprintf("%s %s/%s of attempt %d is gone from %s", gvk.Kind, rec.Namespace, name, a.Number, a.Cluster))
}

// nextIsHealthy: the runnable runs again, Healthy; since attempt a has
// ended, that is a later attempt, so a graceful purge need not wait any
// longer.
func nextIsHealthy(rec *store.Runnable, r *runnable) bool {
	switch v1alpha1.Phase(rec.Phase) {
	case v1alpha1.PhaseRunning, v1alpha1.PhaseSucceeded:
		return r.status.Health == v1alpha1.HealthHealthy
	}
	return false
}

// purged marks attempt a cleaned up, audits it and, if the runnable was
// waiting for exactly that (FailingOver), queues it for placement.
func (c *Controller) purged(ctx context.Context, rec *store.Runnable, a *store.Attempt, msg string) error {
	err := c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		attempts, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return err
		}
		var cur *store.Attempt
		for _, x := range attempts {
			if x.Number == a.Number {
				cur = x
			}
		}
		if cur == nil || cur.Cleanup != store.CleanupPending {
			return store.ErrMoved
		}
		cur.Cleanup, cur.CleanupAfter = store.CleanupDone, nil
		cur.Message = joinMessage(cur.Message, msg)
		if err := tx.Attempts().Put(ctx, cur); err != nil {
			return err
		}
		run, err := lifecycle.Load(ctx, tx, rec.UID)
		if err != nil {
			return err
		}
		last := attempts[len(attempts)-1]
		t := lifecycle.Transition{
			To: run.Phase(), By: lifecycle.ByController,
			Audit: &audit.Entry{Action: "purge", Summary: msg},
		}
		if m := run.Status.Move; m != nil && m.Attempt == a.Number && !m.OldCopyRemoved {
			// The progress of a planned move: its old copy is gone.
			t.Edit = func(st *v1alpha1.RunnableStatus) error {
				next := *st.Move
				next.OldCopyRemoved = true
				st.Move = &next
				if next.Step == v1alpha1.MoveDone {
					st.Message = strings.TrimSuffix(st.Message, fmt.Sprintf("; the old copy on %s is being removed", next.From)) +
						fmt.Sprintf("; the old copy on %s was removed", next.From)
				}
				return nil
			}
		}
		if run.Phase() == v1alpha1.PhaseFailingOver && last.Number == a.Number {
			t.To, t.Cluster, t.Message = v1alpha1.PhaseQueued, new(""), msg+"; placing it again"
			t.Enqueue, t.EnqueueAttempt = stream.SubmissionFailover, a.Number
		}
		_, err = lifecycle.Apply(ctx, tx, run, t)
		return err
	})
	if errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err == nil {
		c.metrics.purged.Inc()
		c.notify()
	}
	return err
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// release frees a runnable FailingOver whose old copy cannot be deleted
// because its cluster stopped answering meanwhile: it is queued for
// placement, at once for AtLeastOne, and for AtMostOne once the cluster's
// agent has certainly fenced the copy; the copy stays marked for removal
// when the cluster answers again.
func (c *Controller) release(ctx context.Context, a *store.Attempt, view *clusterView) error {
	var rec *store.Runnable
	var attempts []*store.Attempt
	err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Runnables().GetByUID(ctx, a.RunnableUID); err != nil {
			return err
		}
		attempts, err = tx.Attempts().List(ctx, a.RunnableUID)
		return err
	})
	if err != nil {
		return err
	}
	if rec.Phase != string(v1alpha1.PhaseFailingOver) || attempts[len(attempts)-1].Number != a.Number {
		return nil
	}
	r, err := readRunnable(rec)
	if err != nil {
		return err
	}
	if attempt.Consistency(&r.doc.Spec) == v1alpha1.ConsistencyAtMostOne && r.status.ConfirmedStopped == nil {
		from := *a.EndedAt
		if hb := view.failover.LastHeartbeat; hb != nil && hb.After(from) {
			from = *hb
		}
		if c.cfg.Now().Before(from.Add(c.cfg.AgentLease + c.cfg.FencingMargin)) {
			return nil
		}
		if k := view.failover.AgentReachesKubeAPI; k != nil && !*k {
			// The agent said it could not reach its kube-apiserver: it
			// cannot have fenced the copy. Only the cluster's return or
			// a person's confirmation lets the runnable go.
			return c.setWaiting(ctx, rec, r, v1alpha1.WaitingUnconfirmed, fmt.Sprintf(
				"the old copy of attempt %d on %s must go before the runnable is placed again, but %s stopped answering and its agent said it could not reach that cluster's API server, so nobody can stop the copy or confirm that it stopped; if you made sure it no longer runs, `purser failover runnable %s -n %s --confirm-stopped` moves it now",
				a.Number, a.Cluster, a.Cluster, rec.Name, rec.Namespace))
		}
	}
	msg := fmt.Sprintf("cluster %s stopped answering before the copy of attempt %d could be removed; placing the runnable again, and removing that copy when %s answers",
		a.Cluster, a.Number, a.Cluster)
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		st.Message, st.Waiting = msg, ""
		return &change{phase: v1alpha1.PhaseQueued, cluster: new(""), enqueue: a.Number,
			audit: &audit.Entry{Action: "requeue", Summary: msg}}, nil
	})
}
