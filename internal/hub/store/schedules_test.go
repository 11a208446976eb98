package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
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
				if err != nil {
					return err
				}
				recs, err = tx.Runnables().ListByNamePrefixes(ctx, "a", []string{"everyday-", "evert-", "every-x-", "nothing-"}, 100)
				names = nil
				for _, r := range recs {
					names = append(names, r.Name)
				}
				if want := []string{"evert-1", "every-x-2", "everyday-1"}; !slices.Equal(names, want) {
					t.Errorf("ListByNamePrefixes(a, everyday- evert- every-x- nothing-) = %v, want %v", names, want)
				}
				if _, err := tx.Runnables().ListByNamePrefixes(ctx, "a", []string{"every%"}, 100); err == nil {
					t.Error("a prefix holding % was taken")
				}
				return err
			})
		})
	}
}

// TestBulkWrites: what a page of schedules' ticks writes together. Of
// runnables created together, one whose name is taken is left out and
// the others are written; messages and audit entries appended together
// keep the chain whole; statuses written together are all written, or
// none when one schedule moved meanwhile (ErrConflict); the due
// schedules are read in pages after a cursor.
func TestBulkWrites(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			mustTx(t, s, func(tx *Tx) error {
				return tx.Runnables().Create(ctx, &Runnable{UID: "taken", Namespace: "a", Name: "r-1", Generation: 1, Spec: []byte(`{}`), SpecHash: "h", Phase: "Queued", Submitter: "alice"})
			})
			var recs []*Runnable
			for i := range 3 {
				recs = append(recs, &Runnable{UID: fmt.Sprint("new-", i), Namespace: "a", Name: fmt.Sprint("r-", i), Generation: 1, Spec: []byte(`{}`), SpecHash: "h", Phase: "Queued", Submitter: "alice"})
			}
			mustTx(t, s, func(tx *Tx) error {
				created, err := tx.Runnables().CreateMany(ctx, recs)
				if err != nil {
					return err
				}
				if want := []bool{true, false, true}; !slices.Equal(created, want) {
					t.Errorf("CreateMany created %v, want %v (r-1 is taken)", created, want)
				}
				if recs[0].ID == 0 || recs[2].ID == 0 || recs[0].ResourceVersion != 1 {
					t.Errorf("created runnables not filled in: %+v %+v", recs[0], recs[2])
				}
				if err := tx.Outbox().EnqueueMany(ctx, []*OutboxMessage{{Subject: "s", MsgID: "m1", Data: []byte("1")}, {Subject: "s", MsgID: "m2"}}); err != nil {
					return err
				}
				var entries []*audit.Entry
				for i := range 3 {
					entries = append(entries, &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable", Namespace: "a", Name: fmt.Sprint("r-", i), Summary: "s", Outcome: "Queued"})
				}
				return tx.Audit().AppendMany(ctx, entries)
			})
			if pending, err := s.PendingOutbox(ctx, 10); err != nil || len(pending) != 2 {
				t.Errorf("outbox after EnqueueMany of 2: %d messages, %v", len(pending), err)
			}
			if res, err := s.VerifyAudit(ctx); err != nil || !res.OK {
				t.Errorf("audit chain after AppendMany: %+v, %v", res, err)
			}

			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var scheds []*Schedule
			for i := range 3 {
				next := at.Add(time.Duration(i) * time.Second)
				scheds = append(scheds, &Schedule{UID: fmt.Sprint("s", i), Namespace: "a", Name: fmt.Sprint("s-", i), Spec: []byte(`{}`), NextTick: &next})
			}
			mustTx(t, s, func(tx *Tx) error {
				for _, sc := range scheds {
					if err := tx.Schedules().Create(ctx, sc); err != nil {
						return err
					}
				}
				return nil
			})
			mustRead(t, s, func(tx *Tx) error {
				first, err := tx.Schedules().DueAfter(ctx, at.Add(time.Minute), ScheduleDueCursor{}, 2)
				if err != nil || len(first) != 2 {
					t.Fatalf("first page of due: %d, %v", len(first), err)
				}
				rest, err := tx.Schedules().DueAfter(ctx, at.Add(time.Minute), DueCursor(first[1]), 2)
				if err != nil || len(rest) != 1 || rest[0].UID != "s2" {
					t.Errorf("page after the cursor: %v, %v; want s2 alone", rest, err)
				}
				return nil
			})
			for _, sc := range scheds {
				sc.Status = []byte(`{"message":"fired"}`)
			}
			stale := *scheds[1]
			stale.ResourceVersion = 7
			err := s.Tx(ctx, func(tx *Tx) error {
				return tx.Schedules().UpdateStatuses(ctx, []*Schedule{scheds[0], &stale, scheds[2]})
			})
			if !errors.Is(err, ErrConflict) {
				t.Errorf("UpdateStatuses with one stale: %v, want ErrConflict", err)
			}
			mustTx(t, s, func(tx *Tx) error { return tx.Schedules().UpdateStatuses(ctx, scheds) })
			mustRead(t, s, func(tx *Tx) error {
				for _, sc := range scheds {
					got, err := tx.Schedules().Get(ctx, "a", sc.Name)
					if err != nil {
						return err
					}
					if string(got.Status) != `{"message":"fired"}` || got.ResourceVersion != 2 || got.NextTick == nil || !got.NextTick.Equal(*sc.NextTick) {
						t.Errorf("%s after UpdateStatuses: status %s rv %d next %v", sc.Name, got.Status, got.ResourceVersion, got.NextTick)
					}
				}
				return nil
			})
		})
	}
}
