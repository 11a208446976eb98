package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/store"
)

// Schedules create a runnable at each tick of a cron expression
// (docs/schedules.md). The API stores them; the scheduler, in the
// controller, fires them. A schedule's writer is its author: each tick's
// runnable is created with the author's rights as the policy stands at
// the tick, so the template is checked here as the runnable of a tick,
// and again at each tick.

// putSchedule serves PUT /api/v1/schedules/{namespace}/{name}: create
// (201) or replace (200) the schedule's spec; its status is the
// scheduler's and stays. The same spec from the same author writes
// nothing. metadata.resourceVersion, when set, is a
// precondition (409 when it moved).
func (s *Server) putSchedule(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not write schedules in namespace %q", u.Name, ns)
	}
	obj, err := decodeBody(r, v1alpha1.DecodeSchedule)
	if err != nil {
		return 0, nil, err
	}
	if err := matchPath(&obj.Metadata, ns, name); err != nil {
		return 0, nil, err
	}
	obj.SetDefaults()
	now := s.now()
	if errs := v1alpha1.ValidateSchedule(obj, now); len(errs) > 0 {
		return 0, nil, errInvalid("Schedule is invalid", errs)
	}
	// The template as the runnable of a tick, by the author: refused now
	// rather than at every tick.
	if err := s.gate().Prepare(r.Context(), tickRequest(obj, u, now)); err != nil {
		return 0, nil, templateError(err, "a tick")
	}
	var rec *store.Schedule
	status := http.StatusOK
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		status = http.StatusOK
		var did scheduler.PutResult
		var err error
		if rec, did, err = scheduler.Put(r.Context(), tx, obj, u, now); err != nil || did == scheduler.PutUnchanged {
			return err
		}
		action, outcome, verb := "update", "Updated", "changed"
		if did == scheduler.PutCreated {
			status, action, outcome, verb = http.StatusCreated, "create", "Created", "created"
		}
		summary := fmt.Sprintf("%s schedule %s/%s (%q in %s, %s)", verb, ns, name, obj.Spec.Schedule, obj.Spec.TimeZone, obj.Spec.ConcurrencyPolicy)
		if obj.Spec.Suspend {
			summary += ", suspended"
		}
		return appendAudit(r.Context(), tx, u, action, v1alpha1.KindSchedule, ns, name, summary, outcome, obj.Spec)
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return 0, nil, errConflict("schedule %s/%s changed since resourceVersion %s; read it again and redo the change", ns, name, obj.Metadata.ResourceVersion)
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("schedule %s/%s does not exist; drop metadata.resourceVersion to create it", ns, name)
	case err != nil:
		return 0, nil, err
	}
	s.scheduleWritten()
	out, err := scheduleFromRecord(rec)
	return status, out, err
}

func (s *Server) scheduleWritten() {
	if s.cfg.ScheduleWritten != nil {
		s.cfg.ScheduleWritten()
	}
}

// tickRequest is the runnable a tick of obj would create now, by author.
func tickRequest(obj *v1alpha1.Schedule, author policy.User, now time.Time) *submission.Request {
	at := now.UTC()
	return &submission.Request{
		Runnable: obj.RunnableAt(v1alpha1.TickRunName(obj.Metadata.Name, at),
			map[string]string{v1alpha1.LabelSchedule: obj.Metadata.Name, v1alpha1.LabelScheduledTime: v1alpha1.ScheduledTimeLabel(at)}),
		Author: author,
	}
}

func (s *Server) getSchedule(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Schedule
	var runs []scheduler.Run
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Schedules().Get(r.Context(), ns, name); err != nil {
			return err
		}
		runs, err = scheduler.Runs(r.Context(), tx, ns, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("schedule %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := scheduleFromRecord(rec)
	if err != nil {
		return 0, nil, err
	}
	// One schedule shows its runs as they are now; a list shows them as
	// the scheduler last wrote them, at a tick.
	scheduler.FillRuns(&out.Status, runs)
	return http.StatusOK, out, nil
}

func (s *Server) listSchedules(r *http.Request, u policy.User) (int, any, error) {
	return listOwn(s, r, u, scheduleKind)
}

// scheduleKind is how the list and delete handlers read and remove
// schedules.
var scheduleKind = ownKind[*store.Schedule, *v1alpha1.Schedule]{
	kind: v1alpha1.KindSchedule, plural: "schedules",
	get: func(ctx context.Context, tx *store.Tx, ns, name string) (*store.Schedule, error) {
		return tx.Schedules().Get(ctx, ns, name)
	},
	list: func(ctx context.Context, tx *store.Tx, ns, cont string, limit int) ([]*store.Schedule, string, error) {
		return tx.Schedules().List(ctx, store.ScheduleFilter{Namespace: ns, Continue: cont, Limit: limit})
	},
	remove: func(ctx context.Context, tx *store.Tx, ns, name string) error {
		return tx.Schedules().Delete(ctx, ns, name)
	},
	object: scheduleFromRecord,
}

// deleteSchedule serves DELETE: the schedule goes, and no tick runs any
// more; its runnables stay, as runnables of their own (delete them as
// any other).
func (s *Server) deleteSchedule(r *http.Request, u policy.User) (int, any, error) {
	out, err := deleteOwn(s, r, u, scheduleKind, "its runnables stay")
	if err != nil {
		return 0, nil, err
	}
	s.scheduleWritten()
	out.Status.Message = "deleted; its runnables stay"
	return http.StatusOK, out, nil
}

// runSchedule serves POST .../run: one run of the schedule now, by the
// caller, named <schedule>-manual-<unix seconds>, whatever its timetable,
// suspension or concurrency policy (as a Job created by hand from a
// CronJob). It is created the one way a runnable is, audited, and waits
// for approval where the namespace requires it.
func (s *Server) runSchedule(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not run schedules in namespace %q", u.Name, ns)
	}
	var rec *store.Schedule
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Schedules().Get(r.Context(), ns, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("schedule %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	sch, err := scheduler.Decode(rec)
	if err != nil {
		return 0, nil, err
	}
	now := s.now().UTC()
	req := &submission.Request{
		Runnable: sch.Obj.RunnableAt(v1alpha1.ManualRunName(name, now),
			map[string]string{v1alpha1.LabelSchedule: name, v1alpha1.LabelScheduledTime: v1alpha1.ScheduledTimeLabel(now)}),
		Author: u, Via: fmt.Sprintf("schedule %s, run by hand by %s", name, u.Name),
	}
	out, req, err := s.submit(r.Context(), req)
	if err != nil {
		return 0, nil, templateError(err, "a tick")
	}
	if !out.Created {
		return 0, nil, errConflict("schedule %s/%s was already run by hand this second (%s); try again", ns, name, out.Rec.Name)
	}
	if !req.NeedsApproval() {
		s.notifyOutbox()
	}
	obj, err := runnableFromRecord(out.Rec, nil)
	return http.StatusAccepted, obj, err
}

// backfillSchedule serves POST .../backfill {from, to}: the schedule's
// ticks in [from, to] run now, by the caller, as the timetable runs them
// (the same names, the concurrency policy, the same create), whatever its
// suspension; a tick already done is not run again. At most
// v1alpha1.MaxBackfillTicks ticks, and none in the future.
func (s *Server) backfillSchedule(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not backfill schedules in namespace %q", u.Name, ns)
	}
	req, err := decodeBody(r, func(data []byte, _ string) (v1alpha1.ScheduleBackfill, error) {
		var req v1alpha1.ScheduleBackfill
		if err := yaml.UnmarshalStrict(data, &req); err != nil {
			return req, errBadRequest("request body is malformed (want {\"from\": RFC 3339, \"to\": RFC 3339}): %v", err)
		}
		return req, nil
	})
	if err != nil {
		return 0, nil, err
	}
	now := s.now()
	var errs []v1alpha1.FieldError
	switch {
	case req.From.IsZero():
		errs = append(errs, v1alpha1.FieldError{Field: "from", Message: "is required (RFC 3339)"})
	case req.To.IsZero():
		errs = append(errs, v1alpha1.FieldError{Field: "to", Message: "is required (RFC 3339)"})
	case !req.From.Before(req.To):
		errs = append(errs, v1alpha1.FieldError{Field: "from", Message: fmt.Sprintf("%s is not before to (%s)",
			req.From.UTC().Format(time.RFC3339), req.To.UTC().Format(time.RFC3339))})
	case req.To.After(now):
		errs = append(errs, v1alpha1.FieldError{Field: "to", Message: fmt.Sprintf("%s is in the future (now is %s); a backfill runs past ticks only",
			req.To.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))})
	}
	if len(errs) > 0 {
		return 0, nil, errInvalid("backfill is invalid", errs)
	}
	var rec *store.Schedule
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		rec, err = tx.Schedules().Get(r.Context(), ns, name)
		return err
	}); errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("schedule %s/%s not found", ns, name)
	} else if err != nil {
		return 0, nil, err
	}
	sch, err := scheduler.Decode(rec)
	if err != nil {
		return 0, nil, err
	}
	ticks, n, err := scheduler.TicksBetween(&sch.Obj.Spec, req.From, req.To, v1alpha1.MaxBackfillTicks)
	if err != nil {
		return 0, nil, errInvalid("schedule's timetable cannot be read", []v1alpha1.FieldError{{Field: "spec.schedule", Message: err.Error()}})
	}
	if n > v1alpha1.MaxBackfillTicks {
		count := fmt.Sprint(n)
		if n >= 100*v1alpha1.MaxBackfillTicks {
			count = "at least " + count
		}
		return 0, nil, errInvalid(fmt.Sprintf("backfill of %s ticks refused: at most %d in one call", count, v1alpha1.MaxBackfillTicks),
			[]v1alpha1.FieldError{{Field: "to", Message: fmt.Sprintf("[from, to] holds %s ticks of %q; at most %d in one call: split the interval", count, sch.Obj.Spec.Schedule, v1alpha1.MaxBackfillTicks)}})
	}
	res, err := scheduler.Backfill(r.Context(), s.cfg.Store, s.gate(), sch, u, ticks, s.notifyOutbox)
	if res != nil {
		// What was run is said and audited even when a later batch failed.
		if aerr := s.tx(r.Context(), func(tx *store.Tx) error {
			return scheduler.AuditBackfill(r.Context(), tx, u, ns, name, req.From, req.To, res)
		}); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("schedule %s/%s was deleted during its backfill", ns, name)
	}
	if err != nil {
		return 0, nil, templateError(err, "a tick")
	}
	s.scheduleWritten()
	return http.StatusOK, res, nil
}

// scheduleFromRecord is the API object of a stored schedule.
func scheduleFromRecord(rec *store.Schedule) (*v1alpha1.Schedule, error) {
	sch, err := scheduler.Decode(rec)
	if err != nil {
		return nil, err
	}
	return sch.Obj, nil
}
