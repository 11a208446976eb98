package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/flink"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// Planned moves (POST .../move, purser drain): the API records the move
// in status.move; the controller does it, one step per pass, each step one
// transaction with its audit entry. A FlinkDeployment is stopped with a
// savepoint on its cluster (internal/flink, move.go), and once the
// operator reports the savepoint the attempt ends with exactly that
// savepoint as the restore point of the next one, which the submitter
// places on the move's target and creates with initialSavepointPath set
// to it; the stopped copy is removed once the new one runs. Should the
// savepoint fail, the job is put back to running where it is and the move
// ends Failed. Every other kind leaves as a cluster failover moves it,
// its old copy deleted before the next is placed (AtMostOne).

// Defaults of Config's move settings.
const (
	DefaultMoveTimeout = 5 * time.Minute
	DefaultMoveGrace   = time.Hour
)

// MoveStep is what the controller does next about a planned move, decided
// from the move and the last observed status of the runnable's object.
type MoveStep int

// Steps DecideMove gives.
const (
	MoveWait     MoveStep = iota // nothing to do yet
	MoveAskStop                  // ask the job to stop with a savepoint
	MoveHandOver                 // the savepoint is there: end the attempt, restore from it on the target
	MoveEvict                    // a kind without a savepoint: leave as a cluster failover does
	MovePutBack                  // the savepoint failed: put the job back to running, the move failed
	MoveAbandon                  // the runnable is no longer where the move found it
	MoveFinish                   // the copy runs on the target
	MoveNotMine                  // no planned move is under way
)

// MoveDecision is DecideMove's answer.
type MoveDecision struct {
	Step MoveStep
	// Savepoint and TakenAt: the savepoint of MoveHandOver.
	Savepoint string
	TakenAt   *time.Time
	// Why: the failure of MovePutBack and MoveAbandon.
	Why string
}

// DecideMove decides the next step of the runnable's planned move, with
// the runnable on cluster in phase, its status st, whether it moves by
// savepoint (a Flink job), at now, giving up on a savepoint not reported
// within timeout.
func DecideMove(st *v1alpha1.RunnableStatus, phase v1alpha1.Phase, cluster string, bySavepoint bool, now time.Time, timeout time.Duration) MoveDecision {
	m := st.Move
	if !m.Active() {
		return MoveDecision{Step: MoveNotMine}
	}
	switch m.Step {
	case v1alpha1.MoveAsked:
		if cluster != m.From || phase != v1alpha1.PhaseRunning {
			return MoveDecision{Step: MoveAbandon, Why: fmt.Sprintf("the runnable is %s on %q, no longer Running on %s, where the move found it", phase, cluster, m.From)}
		}
		if bySavepoint {
			return MoveDecision{Step: MoveAskStop}
		}
		return MoveDecision{Step: MoveEvict}
	case v1alpha1.MoveSavepointAsked:
		if cluster != m.From || phase != v1alpha1.PhaseRunning {
			return MoveDecision{Step: MoveAbandon, Why: fmt.Sprintf("the runnable is %s on %q, no longer Running on %s, while its savepoint was awaited", phase, cluster, m.From)}
		}
		if path, at := flink.StopSavepoint(st.Result, m.SavepointBefore); path != "" {
			return MoveDecision{Step: MoveHandOver, Savepoint: path, TakenAt: at}
		}
		if why := flink.SavepointFailure(st.Result); why != "" {
			return MoveDecision{Step: MovePutBack, Why: "the operator failed to stop the job with a savepoint: " + why}
		}
		if m.SavepointAskedAt != nil && now.Sub(*m.SavepointAskedAt) > timeout {
			return MoveDecision{Step: MovePutBack, Why: fmt.Sprintf("the operator reported no savepoint within %s", timeout)}
		}
		return MoveDecision{Step: MoveWait}
	case v1alpha1.MoveCopyStarting:
		if cluster == m.To && phase == v1alpha1.PhaseRunning && st.HealthySince != nil {
			return MoveDecision{Step: MoveFinish}
		}
	}
	return MoveDecision{Step: MoveWait}
}

// move acts on the runnable's planned move; handled says the pass is
// done with the runnable (no failover decision on top of a move's step).
func (c *Controller) move(ctx context.Context, rec *store.Runnable, r *runnable, view *clusterView) (handled bool, err error) {
	gvk, err := r.gvk()
	if err != nil {
		return false, nil
	}
	bySavepoint := operate.BySavepoint(gvk.GroupKind(), r.doc.Spec.Template)
	d := DecideMove(&r.status, v1alpha1.Phase(rec.Phase), rec.Cluster, bySavepoint, c.cfg.Now(), c.cfg.MoveTimeout)
	m := r.status.Move
	switch d.Step {
	case MoveNotMine:
		return false, nil
	case MoveWait:
		if m.Step != v1alpha1.MoveSavepointAsked {
			return false, nil
		}
		// While the savepoint is awaited the job is stopping on purpose:
		// no failover decision is taken on what that looks like. Until the
		// job is seen stopped, the stop is applied again (server-side
		// apply of the same fields is a no-op): the first apply follows
		// the step's commit, and may have failed.
		if flink.JobStopped(r.status.Result) {
			return true, nil
		}
		spec, _ := flink.MoveStop(r.doc.Spec.Template)
		return true, c.applySpec(ctx, rec, r, view, spec)
	case MoveAbandon:
		return false, c.endMove(ctx, rec, v1alpha1.MoveFailed, d.Why, "move-failed",
			fmt.Sprintf("planned move of %s/%s to %s abandoned: %s", rec.Namespace, rec.Name, m.To, d.Why))
	case MoveAskStop:
		return true, c.askStop(ctx, rec, r)
	case MovePutBack:
		return true, c.putBack(ctx, rec, r, view, d.Why)
	case MoveHandOver:
		return true, c.handOver(ctx, rec, r, d.Savepoint, d.TakenAt)
	case MoveEvict:
		return true, c.handOver(ctx, rec, r, "", nil)
	case MoveFinish:
		return false, c.finishMove(ctx, rec, r)
	}
	return false, nil
}

// askStop records that the job is asked to stop with a savepoint, with
// the upgrade savepoint its status shows before, so that a savepoint
// reported later is known to be the stop's; once that is committed the
// next pass sets spec.job.state suspended with upgradeMode savepoint on
// the attempt's object by server-side apply, as a suspend does. Applied
// before the record, the savepoint could be reported, and taken for the
// one before, by the time the record is written.
func (c *Controller) askStop(ctx context.Context, rec *store.Runnable, r *runnable) error {
	m := r.status.Move
	before := flink.UpgradeSavepointPath(r.status.Result)
	now := c.cfg.Now()
	msg := fmt.Sprintf("planned move to %s (asked by %s): asking the job on %s to stop with a savepoint (spec.job.state suspended, upgradeMode savepoint); waiting for the operator to report its location",
		m.To, m.By, m.From)
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		next := *st.Move
		next.Step, next.SavepointBefore, next.SavepointAskedAt = v1alpha1.MoveSavepointAsked, before, &now
		st.Move, st.Message = &next, msg
		return &change{phase: v1alpha1.PhaseRunning, audit: &audit.Entry{Action: "move-savepoint", Summary: msg}}, nil
	})
}

// putBack undoes askStop (the template's job state and upgradeMode) and
// ends the move Failed, saying why: the job runs on where it was.
func (c *Controller) putBack(ctx context.Context, rec *store.Runnable, r *runnable, view *clusterView, why string) error {
	if err := c.applySpec(ctx, rec, r, view, flink.MovePutBack(r.doc.Spec.Template, r.status.Result)); err != nil {
		return err
	}
	m := r.status.Move
	how := "the job was put back to spec.job.state running on %s and keeps running there"
	if flink.JobStopped(r.status.Result) {
		how = "the job had stopped, and was put back to spec.job.state running with upgradeMode savepoint on %s, to resume there from its last savepoint"
	}
	msg := fmt.Sprintf("planned move to %s failed: %s; "+how+" (attempt %d); nothing was moved", m.To, why, m.From, m.Attempt)
	return c.endMove(ctx, rec, v1alpha1.MoveFailed, why, "move-failed", msg)
}

// applySpec applies spec to the object of the runnable's open attempt.
func (c *Controller) applySpec(ctx context.Context, rec *store.Runnable, r *runnable, view *clusterView, spec map[string]any) error {
	a, err := c.openAttempt(ctx, rec)
	if err != nil {
		return err
	}
	gvk, err := r.gvk()
	if err != nil {
		return err
	}
	cl, err := c.cfg.Objects.Get(view.row)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	return cl.ApplySpec(actx, gvk, rec.Namespace, v1alpha1.ObjectName(r.doc.Spec.Template, rec.Name), a.ObjectUID, spec)
}

// endMove records the move's end (Done or Failed) with msg as the
// runnable's message and audit entry.
func (c *Controller) endMove(ctx context.Context, rec *store.Runnable, step, why, action, msg string) error {
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		next := *st.Move
		next.Step, next.Error = step, why
		st.Move, st.Message = &next, msg
		return &change{phase: v1alpha1.Phase(rec.Phase), audit: &audit.Entry{Action: action, Summary: msg}}, nil
	})
}

// handOver ends the moved attempt. With a savepoint (a Flink job that
// stopped with it) the runnable is queued at once with exactly that
// savepoint as its restore point, and the stopped copy stays until the
// next one is healthy; without one the old copy is deleted first
// (FailingOver), as a cluster failover of an AtMostOne runnable does. The
// submitter places the next attempt on the move's target.
func (c *Controller) handOver(ctx context.Context, rec *store.Runnable, r *runnable, savepoint string, takenAt *time.Time) error {
	now := c.cfg.Now()
	var rules []v1alpha1.StatePreservationRule
	if app := appFailover(&r.doc.Spec); app != nil && app.StatePreservation != nil {
		rules = app.StatePreservation.Rules
	}
	m := r.status.Move
	err := c.runnableTx(ctx, rec, func(tx *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		attempts, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return nil, err
		}
		n := len(attempts)
		if n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].Cluster != m.From {
			return nil, store.ErrMoved
		}
		a := attempts[n-1]
		// The preserved values travel as in a failover; the restore point
		// is the savepoint of the stop, whatever else is newer.
		carry := attempt.Preserve(rules, st.Result, st.Preserved, st.RestorePoint, nil, a.Number, st.HealthySince != nil)
		next := *st.Move
		next.Step = v1alpha1.MoveCopyStarting
		stopped := now
		if takenAt != nil {
			stopped = *takenAt
		}
		next.StoppedAt = &stopped
		a.EndedAt, a.Result, a.Reason = &now, attempt.ResultEvicted, v1alpha1.ReasonPlannedMove
		a.Reported, a.Note = carry.Reported, strings.Join(carry.Notes, "; ")
		a.Cleanup = store.CleanupPending
		var msg string
		phase := v1alpha1.PhaseQueued
		if savepoint != "" {
			point := &v1alpha1.RestorePoint{Path: savepoint, Kind: v1alpha1.RestoreSavepoint, TakenAt: takenAt, Attempt: a.Number,
				Source: "status.jobStatus.upgradeSavepointPath (the stop with savepoint of a planned move)"}
			if id := flink.JobID(st.Result); flink.WrittenBy(savepoint, id) {
				point.JobID = id
			}
			st.RestorePoint, next.Savepoint = point, savepoint
			if a.Reported == nil {
				a.Reported = map[string]string{}
			}
			a.Reported[attempt.RestorePathKey] = savepoint
			after := now.Add(c.cfg.MoveGrace)
			a.CleanupAfter = &after
			msg = fmt.Sprintf("planned move to %s: the job stopped on %s with a savepoint at %s; attempt %d ended, the copy is starting on %s restoring from that savepoint; the stopped copy on %s is removed once it runs",
				m.To, m.From, savepoint, a.Number, m.To, m.From)
		} else {
			phase = v1alpha1.PhaseFailingOver
			msg = fmt.Sprintf("planned move to %s: attempt %d ended; removing its copy from %s before the copy on %s starts (AtMostOne)",
				m.To, a.Number, m.From, m.To)
		}
		a.Message = msg
		if err := tx.Attempts().Put(ctx, a); err != nil {
			return nil, err
		}
		st.Preserved = carry.Preserved
		st.Health, st.UnhealthySince, st.HealthySince = "", nil, nil
		st.Waiting, st.ConfirmedStopped = "", nil
		st.Move, st.Message = &next, msg
		details, _ := json.Marshal(map[string]any{"attempt": a.Number, "reason": v1alpha1.ReasonPlannedMove,
			"sourceCluster": m.From, "targetCluster": m.To, "savepoint": savepoint, "by": m.By})
		ch := &change{phase: phase, audit: &audit.Entry{Action: "move-handover", Summary: msg, Details: details}}
		if phase == v1alpha1.PhaseQueued {
			ch.cluster, ch.enqueue = new(""), a.Number
		}
		return ch, nil
	})
	if err == nil {
		c.notify()
		c.metrics.evictions.WithLabelValues(v1alpha1.ReasonPlannedMove).Inc()
		c.log.Info("planned move handed over", "runnable", rec.Namespace+"/"+rec.Name, "from", m.From, "to", m.To, "savepoint", savepoint)
	}
	return err
}

// finishMove records that the copy runs on the target, with the downtime:
// from the job's stop on the source to the copy first seen running.
func (c *Controller) finishMove(ctx context.Context, rec *store.Runnable, r *runnable) error {
	return c.runnableTx(ctx, rec, func(_ *store.Tx, st *v1alpha1.RunnableStatus) (*change, error) {
		next := *st.Move
		next.Step = v1alpha1.MoveDone
		next.RunningAt = st.HealthySince
		from := fmt.Sprintf("from %s", next.From)
		if next.Savepoint != "" {
			from += " restoring savepoint " + next.Savepoint
		}
		down := ""
		if next.StoppedAt != nil && next.RunningAt != nil {
			s := next.RunningAt.Sub(*next.StoppedAt).Seconds()
			next.DowntimeSeconds = &s
			down = fmt.Sprintf("; downtime %.1f s", s)
		}
		msg := fmt.Sprintf("moved to %s by %s's planned move, %s%s; it runs there", next.To, next.By, from, down)
		if !next.OldCopyRemoved {
			msg += fmt.Sprintf("; the old copy on %s is being removed", next.From)
		}
		st.Move, st.Message = &next, msg
		return &change{phase: v1alpha1.PhaseRunning, audit: &audit.Entry{Action: "moved", Summary: msg}}, nil
	})
}
