package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// countBound stops counting the ticks of an interval refused as too
// long: the refusal says "more than" this rather than enumerating a
// decade of minutes.
const countBound = 100 * v1alpha1.MaxBackfillTicks

// backfillBatch is how many ticks of a backfill share one transaction:
// the schedule's runs are read once per batch rather than once per tick,
// and no transaction holds the database for a thousand creates.
const backfillBatch = 50

// TicksBetween lists the ticks of spec's timetable in [from, to], oldest
// first, read on the wall clock of its time zone as the timetable reads
// them (a repeated hour fires once). It keeps the first limit ticks and
// counts on, up to countBound, so that a refusal can say how many; n is
// how many it counted.
func TicksBetween(spec *v1alpha1.ScheduleSpec, from, to time.Time, limit int) ([]time.Time, int, error) {
	sched, loc, err := v1alpha1.ParseCron(spec.Schedule, spec.TimeZone)
	if err != nil {
		return nil, 0, err
	}
	var out []time.Time
	n := 0
	for t := next(sched, from.Add(-time.Nanosecond).In(loc)); !t.IsZero() && !t.After(to); t = next(sched, t) {
		n++
		if n <= limit {
			out = append(out, t.UTC())
		}
		if n >= countBound {
			break
		}
	}
	return out, n, nil
}

// Backfill runs the ticks of schedule sch at ticks (oldest first) now, by
// caller, through the path the timetable's ticks take (runTick): each the
// runnable named after its tick, under the concurrency policy, created
// with the caller's rights the one way a runnable is. A tick whose
// runnable exists, or existed (its creation is in the audit log: the
// timetable ran it and its history limit removed it since), is already
// done and not run again. Every tick's request passes the gate before
// anything is written, so a refusal (403, 422) changes nothing. notify is
// called when a created runnable was queued.
func Backfill(ctx context.Context, st store.Transactor, gate *submission.Gate, sch *Stored, caller policy.User,
	ticks []time.Time, notify func(),
) (*v1alpha1.ScheduleBackfillResult, error) {
	ns, name := sch.Obj.Metadata.Namespace, sch.Obj.Metadata.Name
	via := fmt.Sprintf("schedule %s, backfill by %s", name, caller.Name)
	all := make([]tick, 0, len(ticks))
	for _, at := range ticks {
		req := &submission.Request{
			Runnable: sch.Obj.RunnableAt(v1alpha1.TickRunName(name, at),
				map[string]string{v1alpha1.LabelSchedule: name, v1alpha1.LabelScheduledTime: v1alpha1.ScheduledTimeLabel(at)}),
			Author: caller, Via: via + ", tick " + at.UTC().Format(time.RFC3339),
		}
		if err := gate.Prepare(ctx, req); err != nil {
			return nil, err
		}
		all = append(all, tick{at: at, req: req})
	}
	out := &v1alpha1.ScheduleBackfillResult{Ticks: make([]v1alpha1.BackfillTick, 0, len(all))}
	by := acting{Note: caller.Name, Cancel: caller.Name}
	for len(all) > 0 {
		batch := all[:min(backfillBatch, len(all))]
		all = all[len(batch):]
		var done []v1alpha1.BackfillTick
		var queued bool
		err := retryConflicts(ctx, func() error {
			return st.Tx(ctx, func(tx *store.Tx) error {
				done, queued = done[:0], false
				if _, err := tx.Schedules().Get(ctx, ns, name); err != nil {
					return err // deleted meanwhile: the rest is not run
				}
				runs, err := Runs(ctx, tx, ns, name)
				if err != nil {
					return err
				}
				for _, t := range batch {
					bt := v1alpha1.BackfillTick{Tick: t.at.UTC(), Name: t.req.Runnable.Metadata.Name}
					ran, err := ranBefore(ctx, tx, ns, bt.Name)
					if err != nil {
						return err
					}
					if ran != "" {
						bt.Outcome, bt.Message = v1alpha1.BackfillAlreadyDone, ran
						done = append(done, bt)
						continue
					}
					msg, created, err := runTick(ctx, tx, sch, runs, t, by)
					switch {
					case err != nil:
						return err
					case created != nil:
						runs = append(runs, *created)
						bt.Outcome, bt.Phase = v1alpha1.BackfillRun, v1alpha1.Phase(created.Rec.Phase)
						queued = queued || !t.req.NeedsApproval()
					case msg != "":
						bt.Outcome, bt.Message = v1alpha1.BackfillSkipped, msg
					default: // created meanwhile by the timetable
						bt.Outcome, bt.Message = v1alpha1.BackfillAlreadyDone, "created meanwhile by the timetable"
					}
					done = append(done, bt)
				}
				return nil
			})
		})
		if err != nil {
			if len(out.Ticks) > 0 {
				return out, fmt.Errorf("backfill of schedule %s/%s stopped after %d tick(s): %w", ns, name, len(out.Ticks), err)
			}
			return nil, err
		}
		if queued && notify != nil {
			notify()
		}
		for _, bt := range done {
			switch bt.Outcome {
			case v1alpha1.BackfillRun:
				out.Run++
			case v1alpha1.BackfillSkipped:
				out.Skipped++
			default:
				out.AlreadyDone++
			}
			out.Ticks = append(out.Ticks, bt)
		}
	}
	return out, nil
}

// ranBefore says how tick run name was done before, "" when it was not:
// its runnable is there, or its creation is in the audit log.
func ranBefore(ctx context.Context, tx *store.Tx, ns, name string) (string, error) {
	rec, err := tx.Runnables().Get(ctx, ns, name)
	if err == nil {
		return fmt.Sprintf("runnable %s exists (%s)", name, rec.Phase), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	entries, err := tx.Audit().List(ctx, store.AuditFilter{Namespace: ns, Kind: v1alpha1.KindRunnable, Name: name, Action: "create", Limit: 1})
	if err != nil {
		return "", err
	}
	if len(entries) > 0 {
		return fmt.Sprintf("runnable %s ran (created %s by %s) and was deleted since", name, entries[0].Time.UTC().Format(time.RFC3339), entries[0].Actor), nil
	}
	return "", nil
}

// retryConflicts runs f again, a few times, while another writer changed
// what it read (a runnable the timetable edited meanwhile).
func retryConflicts(ctx context.Context, f func() error) error {
	return reconcile.Tries(ctx, reconcile.Contention(10*time.Millisecond), fireTries, lostToAnotherWriter,
		func(context.Context) error { return f() })
}

// AuditBackfill records a backfill of ns/name by caller on the schedule.
func AuditBackfill(ctx context.Context, tx *store.Tx, caller policy.User, ns, name string, from, to time.Time, res *v1alpha1.ScheduleBackfillResult) error {
	return tx.Audit().Append(ctx, &audit.Entry{Actor: caller.Name, Action: "backfill", Kind: v1alpha1.KindSchedule, Namespace: ns, Name: name,
		Summary: fmt.Sprintf("backfilled schedule %s/%s from %s to %s: %d run, %d skipped, %d already done", ns, name,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), res.Run, res.Skipped, res.AlreadyDone),
		Outcome: "Backfilled"})
}
