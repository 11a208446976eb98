package drill_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestFollowerStep: the follower reads each asked move from its
// runnable's status.move (the one asked at the time the drill recorded),
// writes how it ended into the drill with an audit entry as the drill's
// admin, and ends the drill once every move ended; a move under way
// keeps it Running, a runnable deleted is a failed move.
func TestFollowerStep(t *testing.T) {
	ctx := context.Background()
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			asked := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
			status := func(step string) []byte {
				m := v1alpha1.Move{From: "a", To: "b", By: "root", At: asked, Attempt: 1, Step: step}
				if step == v1alpha1.MoveDone {
					down := 1.5
					m.DowntimeSeconds, m.Savepoint = &down, "s3://sp/1"
				}
				data, _ := json.Marshal(v1alpha1.RunnableStatus{Phase: v1alpha1.PhaseRunning, Cluster: "b", Move: &m})
				return data
			}
			r := &store.Runnable{Namespace: "team-a", Name: "job", UID: "u1", Generation: 1, Spec: []byte(`{}`), SpecHash: "h",
				Phase: "Running", Cluster: "a", Status: status(v1alpha1.MoveCopyStarting)}
			rec := drill.Record{Cordoned: []string{"a"}, Runnables: []drill.Outcome{
				{Runnable: "team-a/job", From: "a", PlannedTo: "b", Step: v1alpha1.MoveAsked, AskedAt: &asked},
				{Runnable: "team-a/gone", From: "a", PlannedTo: "b", Step: v1alpha1.MoveAsked, AskedAt: &asked},
				{Runnable: "team-a/left", From: "a", Step: v1alpha1.DrillNotMoved},
			}}
			actual, _ := json.Marshal(rec)
			d := &store.Drill{TargetKind: "dc", TargetName: "dc1", Actor: "root", State: store.DrillRunning, StartedAt: asked,
				Planned: []byte(`{}`), Actual: actual}
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				if err := tx.Runnables().Create(ctx, r); err != nil {
					return err
				}
				return tx.Drills().Create(ctx, d)
			}); err != nil {
				t.Fatal(err)
			}
			f := controldrill.NewFollower(controldrill.FollowerConfig{Store: st, Now: func() time.Time { return asked.Add(time.Minute) }})
			read := func() (*store.Drill, drill.Record) {
				t.Helper()
				var got *store.Drill
				if err := st.Read(ctx, func(tx *store.Tx) error {
					var err error
					got, err = tx.Drills().Get(ctx, d.ID)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				var out drill.Record
				if err := json.Unmarshal(got.Actual, &out); err != nil {
					t.Fatal(err)
				}
				return got, out
			}

			running, err := f.Step(ctx, d.ID)
			if err != nil || !running {
				t.Fatalf("first step: running %v, %v", running, err)
			}
			got, out := read()
			if got.State != store.DrillRunning || out.Runnables[0].Step != v1alpha1.MoveCopyStarting || out.Runnables[0].To != "b" ||
				out.Runnables[1].Step != v1alpha1.MoveFailed || out.Runnables[1].Error != "the runnable was deleted during the drill" {
				t.Fatalf("after the first step: %s %+v", got.State, out.Runnables)
			}

			if err := st.Tx(ctx, func(tx *store.Tx) error {
				cur, err := tx.Runnables().Get(ctx, "team-a", "job")
				if err != nil {
					return err
				}
				cur.Cluster, cur.Status = "b", status(v1alpha1.MoveDone)
				return tx.Runnables().Update(ctx, cur)
			}); err != nil {
				t.Fatal(err)
			}
			if running, err = f.Step(ctx, d.ID); err != nil || running {
				t.Fatalf("second step: running %v, %v", running, err)
			}
			got, out = read()
			o := out.Runnables[0]
			if got.State != store.DrillEnded || got.EndedAt == nil || o.Step != v1alpha1.MoveDone || o.RestorePoint != "s3://sp/1" ||
				o.DowntimeSeconds == nil || *o.DowntimeSeconds != 1.5 || out.DurationSeconds != 60 {
				t.Fatalf("after the second step: %s %+v (%gs)", got.State, o, out.DurationSeconds)
			}
			if tot := drill.Totals(&out); tot.Moved != 1 || tot.Failed != 1 || tot.Unplaceable != 1 || tot.AsPlanned != 2 {
				t.Errorf("totals %+v", tot)
			}
			var actions []string
			if err := st.Read(ctx, func(tx *store.Tx) error {
				es, err := tx.Audit().List(ctx, store.AuditFilter{})
				for _, e := range es {
					if e.Actor != "root" {
						t.Errorf("audit entry %s by %s, not the drill's admin", e.Action, e.Actor)
					}
					actions = append(actions, e.Action+" "+e.Outcome)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{"drill-move Failed": true, "drill-move Done": true, "drill-ended Ended": true}
			if len(actions) != 3 {
				t.Fatalf("audit: %v", actions)
			}
			for _, a := range actions {
				if !want[a] {
					t.Errorf("audit: %v", actions)
				}
			}
			// An ended drill is left alone.
			if running, err = f.Step(ctx, d.ID); err != nil || running {
				t.Fatalf("a step of an ended drill: running %v, %v", running, err)
			}
		})
	}
}
