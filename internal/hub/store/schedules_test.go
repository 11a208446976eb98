package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSchedules is the schedules table's CRUD on each engine: a name taken
// twice, a stale writer, the due query the scheduler sleeps on.
func TestSchedules(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			base := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
			early, late := base, base.Add(time.Hour)
			a := &Schedule{UID: "u-a", Namespace: "team-a", Name: "nightly", Spec: []byte(`{"spec":{}}`), NextTick: &late}
			b := &Schedule{UID: "u-b", Namespace: "team-a", Name: "hourly", Spec: []byte(`{"spec":{}}`), NextTick: &early}
			c := &Schedule{UID: "u-c", Namespace: "team-b", Name: "paused", Spec: []byte(`{"spec":{}}`)}
			mustTx(t, s, func(tx *Tx) error {
				for _, x := range []*Schedule{a, b, c} {
					if err := tx.Schedules().Create(ctx, x); err != nil {
						return err
					}
				}
				wantErr(t, tx.Schedules().Create(ctx, &Schedule{UID: "u-x", Namespace: "team-a", Name: "nightly", Spec: []byte(`{}`)}), ErrConflict)
				return nil
			})
			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Schedules().Get(ctx, "team-a", "nightly")
				if err != nil {
					return err
				}
				if got.UID != "u-a" || got.ResourceVersion != 1 || got.NextTick == nil || !got.NextTick.Equal(late) || got.Status != nil {
					t.Errorf("Get: %+v", got)
				}
				next, err := tx.Schedules().NextTick(ctx)
				if err != nil {
					return err
				}
				if next == nil || !next.Equal(early) {
					t.Errorf("NextTick = %v, want %v", next, early)
				}
				due, err := tx.Schedules().Due(ctx, base.Add(time.Minute), 10)
				if err != nil {
					return err
				}
				if len(due) != 1 || due[0].UID != "u-b" {
					t.Errorf("Due: %+v", due)
				}
				list, _, err := tx.Schedules().List(ctx, ScheduleFilter{Namespace: "team-a"})
				if len(list) != 2 || list[0].Name != "hourly" {
					t.Errorf("List: %+v", list)
				}
				return err
			})
			stale := *a
			mustTx(t, s, func(tx *Tx) error {
				a.Status = []byte(`{"message":"x"}`)
				a.NextTick = nil
				if err := tx.Schedules().Update(ctx, a); err != nil {
					return err
				}
				wantErr(t, tx.Schedules().Update(ctx, &stale), ErrConflict)
				return nil
			})
			mustTx(t, s, func(tx *Tx) error {
				got, err := tx.Schedules().Get(ctx, "team-a", "nightly")
				if err != nil {
					return err
				}
				if got.ResourceVersion != 2 || got.NextTick != nil || string(got.Status) != `{"message":"x"}` {
					t.Errorf("after Update: %+v", got)
				}
				if err := tx.Schedules().Delete(ctx, "team-a", "nightly"); err != nil {
					return err
				}
				wantErr(t, tx.Schedules().Delete(ctx, "team-a", "nightly"), ErrNotFound)
				_, err = tx.Schedules().Get(ctx, "team-a", "nightly")
				wantErr(t, err, ErrNotFound)
				return nil
			})
		})
	}
}

// TestListByNamePrefix: a schedule's runs are the runnables whose names
// start with its name and a dash, whichever way the engine finds them (a
// range of the index on SQLite): not a schedule's whose name only starts
// the same, nor another namespace's.
func TestListByNamePrefix(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			mustTx(t, s, func(tx *Tx) error {
				for i, key := range []string{"a/every-1", "a/every-29943933", "a/every-x-2", "a/every", "a/everyday-1", "a/every.1", "a/evert-1", "b/every-1"} {
					ns, name, _ := strings.Cut(key, "/")
					if err := tx.Runnables().Create(ctx, &Runnable{UID: fmt.Sprint("u", i), Namespace: ns, Name: name, Generation: 1,
						Spec: []byte(`{}`), SpecHash: "h", Phase: "Queued", Submitter: "alice"}); err != nil {
						return err
					}
				}
				return nil
			})
			mustRead(t, s, func(tx *Tx) error {
				recs, err := tx.Runnables().ListByNamePrefix(ctx, "a", "every-", 100)
				var names []string
				for _, r := range recs {
					names = append(names, r.Name)
				}
				if want := []string{"every-1", "every-29943933", "every-x-2"}; !slices.Equal(names, want) {
					t.Errorf("ListByNamePrefix(a, every-) = %v, want %v", names, want)
				}
				return err
			})
		})
	}
}
