package drill

import (
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

// TestObserve: an outcome follows its runnable's move only while the
// move is the one the drill asked (by its time); its end is final.
func TestObserve(t *testing.T) {
	asked := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	down := 2.5
	move := func(step string, at time.Time) *v1alpha1.Move {
		m := &v1alpha1.Move{From: "a", To: "b", At: at, Step: step}
		if step == v1alpha1.MoveDone {
			m.DowntimeSeconds, m.Savepoint = &down, "s3://sp"
		}
		if step == v1alpha1.MoveFailed {
			m.Error = "the operator reported no savepoint within 5m0s"
		}
		return m
	}
	for _, c := range []struct {
		name          string
		from          string
		m             *v1alpha1.Move
		gone, changed bool
		step, why     string
	}{
		{"under way", v1alpha1.MoveAsked, move(v1alpha1.MoveSavepointAsked, asked), false, true, v1alpha1.MoveSavepointAsked, ""},
		{"unchanged", v1alpha1.MoveSavepointAsked, move(v1alpha1.MoveSavepointAsked, asked), false, false, v1alpha1.MoveSavepointAsked, ""},
		{"done", v1alpha1.MoveCopyStarting, move(v1alpha1.MoveDone, asked), false, true, v1alpha1.MoveDone, ""},
		{"failed", v1alpha1.MoveSavepointAsked, move(v1alpha1.MoveFailed, asked), false, true, v1alpha1.MoveFailed, "the operator reported no savepoint within 5m0s"},
		{"replaced", v1alpha1.MoveAsked, move(v1alpha1.MoveAsked, asked.Add(time.Minute)), false, true, v1alpha1.MoveFailed, "its planned move ended unseen and another took its place"},
		{"gone", v1alpha1.MoveAsked, nil, true, true, v1alpha1.MoveFailed, "the runnable was deleted during the drill"},
		{"final stays", v1alpha1.MoveDone, move(v1alpha1.MoveAsked, asked.Add(time.Hour)), false, false, v1alpha1.MoveDone, ""},
	} {
		o := Outcome{Runnable: "ns/r", From: "a", PlannedTo: "b", To: "b", Step: c.from, AskedAt: &asked}
		if got := Observe(&o, c.m, c.gone); got != c.changed || o.Step != c.step || o.Error != c.why {
			t.Errorf("%s: changed %v, step %s, why %q", c.name, got, o.Step, o.Error)
		}
		if c.step == v1alpha1.MoveDone && c.changed && (o.To != "b" || o.RestorePoint != "s3://sp" || o.DowntimeSeconds == nil) {
			t.Errorf("%s: %+v", c.name, o)
		}
	}
	// Not asked: nothing to follow.
	left := Left(Unplaceable{Runnable: "ns/p", Reason: "no cluster"}, "a")
	if Observe(&left, nil, true) || left.Step != v1alpha1.DrillNotMoved {
		t.Errorf("a runnable left: %+v", left)
	}
}

// TestTotalsAndDone: what the totals count, and the state a settled
// drill takes.
func TestTotalsAndDone(t *testing.T) {
	rec := &Record{Runnables: []Outcome{
		{PlannedTo: "b", To: "b", Step: v1alpha1.MoveDone},
		{PlannedTo: "c", To: "c", Step: v1alpha1.MoveFailed},
		{PlannedTo: "c", Step: v1alpha1.DrillNotMoved},
		{Step: v1alpha1.DrillNotMoved},
	}}
	if got := Totals(rec); got != (v1alpha1.DrillTotals{Planned: 3, Unplaceable: 1, Moved: 1, Failed: 2, AsPlanned: 2}) {
		t.Errorf("totals %+v", got)
	}
	if !Settled(rec) || Done(rec) != v1alpha1.DrillEnded {
		t.Errorf("settled %v, done %s", Settled(rec), Done(rec))
	}
	rec.Runnables[0].Step = v1alpha1.MoveCopyStarting
	if Settled(rec) {
		t.Error("a move under way is settled")
	}
	rec.Runnables[0].Step = v1alpha1.MoveFailed
	if Done(rec) != v1alpha1.DrillFailed {
		t.Errorf("nothing moved: %s", Done(rec))
	}
}
