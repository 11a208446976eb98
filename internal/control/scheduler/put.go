package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Put writes schedule obj (defaults applied, validated) in tx, as author:
// a new one, or the new spec of the one there, provided it is still at
// obj's metadata.resourceVersion when that is set (store.ErrConflict
// otherwise). Its status is the scheduler's and kept. Its timetable
// starts again (no catch-up of ticks before now) when it is created,
// when its schedule or time zone changes, and when it is resumed. It
// returns the row and what it did: PutCreated, PutChanged, or
// PutUnchanged when the same spec came again from the same author (then
// nothing is written, as `purser apply` of an unchanged file expects).
func Put(ctx context.Context, tx *store.Tx, obj *v1alpha1.Schedule, author policy.User, now time.Time) (*store.Schedule, PutResult, error) {
	ns, name := obj.Metadata.Namespace, obj.Metadata.Name
	cur, err := tx.Schedules().Get(ctx, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, 0, err
	}
	at := now.UTC()
	var status v1alpha1.ScheduleStatus
	if cur != nil {
		if rv := obj.Metadata.ResourceVersion; rv != "" && rv != strconv.FormatInt(cur.ResourceVersion, 10) {
			return nil, 0, fmt.Errorf("schedule %s/%s is at resourceVersion %d, not %s: %w", ns, name, cur.ResourceVersion, rv, store.ErrConflict)
		}
		old, err := Decode(cur)
		if err != nil {
			return nil, 0, err
		}
		status = old.Obj.Status
		sameTimetable := old.Obj.Spec.Schedule == obj.Spec.Schedule && old.Obj.Spec.TimeZone == obj.Spec.TimeZone
		resumed := old.Obj.Spec.Suspend && !obj.Spec.Suspend
		if sameTimetable && !resumed {
			at = old.At
		}
	} else if obj.Metadata.ResourceVersion != "" {
		return nil, 0, fmt.Errorf("schedule %s/%s does not exist, so it is at no resourceVersion %s: %w", ns, name, obj.Metadata.ResourceVersion, store.ErrNotFound)
	}
	doc, err := json.Marshal(store.Document[v1alpha1.ScheduleSpec]{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
		Spec: obj.Spec, Author: &store.Author{Name: author.Name, Groups: author.Groups}, At: &at})
	if err != nil {
		return nil, 0, err
	}
	next, err := NextTick(&obj.Spec, at, status.LastScheduleTime, now)
	if err != nil {
		return nil, 0, err
	}
	status.NextScheduleTime = next
	if obj.Spec.Suspend {
		status.Message = "suspended: no tick runs until spec.suspend is false"
	} else if status.Message == "suspended: no tick runs until spec.suspend is false" {
		status.Message = ""
	}
	st, err := json.Marshal(status)
	if err != nil {
		return nil, 0, err
	}
	if cur == nil {
		rec := &store.Schedule{UID: uuid.NewString(), Namespace: ns, Name: name, Spec: doc, Status: st, NextTick: next}
		return rec, PutCreated, tx.Schedules().Create(ctx, rec)
	}
	if bytes.Equal(cur.Spec, doc) {
		return cur, PutUnchanged, nil
	}
	cur.Spec, cur.Status, cur.NextTick = doc, st, next
	return cur, PutChanged, tx.Schedules().Update(ctx, cur)
}

// PutResult is what Put did.
type PutResult int

// What Put did.
const (
	PutUnchanged PutResult = iota + 1
	PutChanged
	PutCreated
)

// NextTick is when the scheduler must look at a schedule whose timetable
// started at since and whose last tick dealt with was last: its first
// tick after both (which may be past, then it is due now); nil when it is
// suspended or never fires.
func NextTick(spec *v1alpha1.ScheduleSpec, since time.Time, last *time.Time, now time.Time) (*time.Time, error) {
	if spec.Suspend {
		return nil, nil
	}
	sched, loc, err := v1alpha1.ParseCron(spec.Schedule, spec.TimeZone)
	if err != nil {
		return nil, err
	}
	if last != nil && last.After(since) {
		since = *last
	}
	n := next(sched, since.In(loc))
	if n.IsZero() {
		return nil, nil
	}
	n = n.UTC()
	return &n, nil
}
