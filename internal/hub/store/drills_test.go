package store

import (
	"errors"
	"testing"
	"time"
)

// TestDrills is the drills table on each engine: ids in order, one
// running at a time, a stale writer refused, the running one listed
// apart, newest first, paged.
func TestDrills(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			start := time.Date(2026, 12, 7, 16, 0, 0, 123456789, time.UTC)
			a := &Drill{TargetKind: "dc", TargetName: "dc1", Actor: "root", State: DrillRunning, StartedAt: start, Planned: []byte(`{"verdict":"Absorbed"}`)}
			b := &Drill{TargetKind: "cluster", TargetName: "c1", Force: true, Actor: "root", State: DrillRunning, StartedAt: start.Add(time.Minute), Planned: []byte(`{}`)}
			mustTx(t, s, func(tx *Tx) error { return tx.Drills().Create(ctx, a) })
			// A second running drill: refused by the database itself.
			if err := s.Tx(ctx, func(tx *Tx) error { return tx.Drills().Create(ctx, b) }); !errors.Is(err, ErrConflict) {
				t.Fatalf("a second running drill: %v", err)
			}
			stale := *a
			end := start.Add(2 * time.Minute)
			mustTx(t, s, func(tx *Tx) error {
				a.State, a.EndedAt, a.Actual, a.MoveBack = DrillEnded, &end, []byte(`{"runnables":[]}`), true
				if err := tx.Drills().Update(ctx, a); err != nil {
					return err
				}
				wantErr(t, tx.Drills().Update(ctx, &stale), ErrConflict)
				wantErr(t, tx.Drills().Update(ctx, &Drill{ID: 999, ResourceVersion: 1}), ErrNotFound)
				_, err := tx.Drills().Get(ctx, 999)
				wantErr(t, err, ErrNotFound)
				// a has ended: another may run.
				return tx.Drills().Create(ctx, b)
			})
			if a.ID == 0 || b.ID <= a.ID || b.ResourceVersion != 1 || a.Name() == "" {
				t.Fatalf("ids %d then %d (rv %d)", a.ID, b.ID, b.ResourceVersion)
			}
			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Drills().Get(ctx, a.ID)
				if err != nil {
					return err
				}
				if got.State != DrillEnded || got.EndedAt == nil || !got.EndedAt.Equal(end.Truncate(time.Microsecond)) || !got.MoveBack || got.Force ||
					string(got.Actual) != `{"runnables":[]}` || string(got.Planned) != `{"verdict":"Absorbed"}` ||
					!got.StartedAt.Equal(start.Truncate(time.Microsecond)) || got.ResourceVersion != 2 || got.Actor != "root" {
					t.Errorf("after Update: %+v", got)
				}
				running, err := tx.Drills().List(ctx, DrillFilter{State: DrillRunning})
				if err != nil {
					return err
				}
				if len(running) != 1 || running[0].ID != b.ID || !running[0].Force || running[0].Actual != nil {
					t.Errorf("running: %+v", running)
				}
				all, err := tx.Drills().List(ctx, DrillFilter{})
				if err != nil {
					return err
				}
				if len(all) != 2 || all[0].ID != b.ID || all[1].ID != a.ID {
					t.Errorf("List: %+v, want newest first", all)
				}
				page, err := tx.Drills().List(ctx, DrillFilter{Before: b.ID, Limit: 1})
				if len(page) != 1 || page[0].ID != a.ID {
					t.Errorf("the page before %d: %+v", b.ID, page)
				}
				return err
			})
		})
	}
}
