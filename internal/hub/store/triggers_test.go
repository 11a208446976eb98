package store

import (
	"testing"
	"time"
)

// TestTriggers is the triggers table's CRUD on each engine (a name taken
// twice, a stale writer), and the read of a namespace's ended runnables
// by end time that the trigger loop makes.
func TestTriggers(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			mark := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC)
			a := &Trigger{UID: "u-a", Namespace: "team-a", Name: "hook", Spec: []byte(`{"spec":{}}`), TokenHash: "h1", Watermark: mark}
			mustTx(t, s, func(tx *Tx) error {
				if err := tx.Triggers().Create(ctx, a); err != nil {
					return err
				}
				wantErr(t, tx.Triggers().Create(ctx, &Trigger{UID: "u-x", Namespace: "team-a", Name: "hook", Spec: []byte(`{}`), Watermark: mark}), ErrConflict)
				return nil
			})
			stale := *a
			mustTx(t, s, func(tx *Tx) error {
				a.TokenHash, a.Seen, a.Status, a.Watermark = "h2", []byte(`{"recent":{}}`), []byte(`{"fired":1}`), mark.Add(time.Minute)
				if err := tx.Triggers().Update(ctx, a); err != nil {
					return err
				}
				wantErr(t, tx.Triggers().Update(ctx, &stale), ErrConflict)
				return nil
			})
			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Triggers().Get(ctx, "team-a", "hook")
				if err != nil {
					return err
				}
				if got.ResourceVersion != 2 || got.TokenHash != "h2" || string(got.Seen) != `{"recent":{}}` || string(got.Status) != `{"fired":1}` ||
					!got.Watermark.Equal(mark.Add(time.Minute).Truncate(time.Microsecond)) {
					t.Errorf("after Update: %+v", got)
				}
				list, next, err := tx.Triggers().List(ctx, TriggerFilter{Namespace: "team-a"})
				if len(list) != 1 || next != "" {
					t.Errorf("List: %+v %q", list, next)
				}
				return err
			})
			// Ended runnables by end time, of one namespace only.
			at := func(d time.Duration) *time.Time { x := mark.Add(d); return &x }
			mustTx(t, s, func(tx *Tx) error {
				for i, r := range []*Runnable{
					{Namespace: "team-a", Name: "late", UID: "r1", EndedAt: at(2 * time.Second)},
					{Namespace: "team-a", Name: "early", UID: "r2", EndedAt: at(time.Second)},
					{Namespace: "team-a", Name: "before", UID: "r3", EndedAt: at(-time.Second)},
					{Namespace: "team-a", Name: "running", UID: "r4"},
					{Namespace: "team-b", Name: "other", UID: "r5", EndedAt: at(time.Second)},
				} {
					r.Generation, r.Spec, r.SpecHash, r.Phase = 1, []byte(`{}`), "h", []string{"Succeeded", "Failed", "Succeeded", "Running", "Succeeded"}[i]
					if err := tx.Runnables().Create(ctx, r); err != nil {
						return err
					}
				}
				return nil
			})
			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Runnables().EndedSince(ctx, "team-a", mark, 10)
				if err != nil {
					return err
				}
				var names []string
				for _, r := range got {
					names = append(names, r.Name)
				}
				if len(names) != 2 || names[0] != "early" || names[1] != "late" {
					t.Errorf("EndedSince: %v, want [early late]", names)
				}
				return nil
			})
			mustTx(t, s, func(tx *Tx) error {
				if err := tx.Triggers().Delete(ctx, "team-a", "hook"); err != nil {
					return err
				}
				wantErr(t, tx.Triggers().Delete(ctx, "team-a", "hook"), ErrNotFound)
				_, err := tx.Triggers().Get(ctx, "team-a", "hook")
				wantErr(t, err, ErrNotFound)
				return nil
			})
		})
	}
}
