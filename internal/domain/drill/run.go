package drill

import (
	"fmt"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

// A real drill cordons the target's clusters and asks a planned move of
// each runnable the what-if moves, to the cluster the what-if chose, in
// its order; the drill follower then reads each runnable's move
// (status.move) until every one is done or failed. What it keeps beside
// the plan is a Record; the decisions on it are here, pure.

// Outcome is one runnable's part in a drill.
type Outcome = v1alpha1.DrillOutcome

// Record is what a real drill keeps beside its plan (the drills table's
// actual column).
type Record struct {
	Runnables []Outcome `json:"runnables"`
	// Cordoned is the clusters the drill cordoned, which its end
	// uncordons.
	Cordoned []string           `json:"cordoned"`
	End      *v1alpha1.DrillEnd `json:"end,omitempty"`
	// DurationSeconds is from the start to when every move had finished
	// or failed; 0 until then.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	Message         string  `json:"message,omitempty"`
}

// Planned is the outcome of a planned move before it is asked.
func Planned(m Move) Outcome {
	return Outcome{Runnable: m.Runnable, From: m.From, PlannedTo: m.To, PlannedDowntimeSeconds: m.DowntimeSeconds,
		PlannedRestorePoint: m.RestorePoint, Step: v1alpha1.DrillNotMoved}
}

// Left is the outcome of a runnable the what-if left unplaceable, on
// cluster from: it is not moved and stays there.
func Left(u Unplaceable, from string) Outcome {
	return Outcome{Runnable: u.Runnable, From: from, PlannedReason: u.Reason, Step: v1alpha1.DrillNotMoved,
		Error: "not moved: the what-if left it without a cluster (" + u.Reason + ")"}
}

// Observe brings o up to date with its runnable's move m (status.move;
// gone: the runnable no longer exists), reporting whether o changed. A
// move is the drill's when it was asked at o.AskedAt; another one in its
// place means the drill's ended unseen and was replaced.
func Observe(o *Outcome, m *v1alpha1.Move, gone bool) bool {
	if o.AskedAt == nil || final(o.Step) {
		return false
	}
	before := *o
	step, to, down, point, why := follow(*o.AskedAt, m, gone)
	o.Step, o.Error = step, why
	if to != "" {
		o.To = to
	}
	if down != nil {
		o.DowntimeSeconds = down
	}
	if point != "" {
		o.RestorePoint = point
	}
	return !sameOutcome(before, *o)
}

// ObserveBack is Observe of o's move back.
func ObserveBack(o *Outcome, m *v1alpha1.Move, gone bool) bool {
	b := o.Back
	if b == nil || b.AskedAt == nil || final(b.Step) {
		return false
	}
	before := *b
	step, _, down, _, why := follow(*b.AskedAt, m, gone)
	b.Step, b.Error = step, why
	if down != nil {
		b.DowntimeSeconds = down
	}
	return before.Step != b.Step || before.Error != b.Error || (before.DowntimeSeconds == nil) != (b.DowntimeSeconds == nil)
}

func follow(asked time.Time, m *v1alpha1.Move, gone bool) (step, to string, down *float64, point, why string) {
	switch {
	case gone:
		return v1alpha1.MoveFailed, "", nil, "", "the runnable was deleted during the drill"
	case m == nil || !m.At.Equal(asked):
		return v1alpha1.MoveFailed, "", nil, "", "its planned move ended unseen and another took its place"
	}
	step, to = m.Step, m.To
	switch m.Step {
	case v1alpha1.MoveDone:
		down, point = m.DowntimeSeconds, m.Savepoint
	case v1alpha1.MoveFailed:
		why = m.Error
	}
	return step, to, down, point, why
}

func final(step string) bool {
	return step == v1alpha1.MoveDone || step == v1alpha1.MoveFailed || step == v1alpha1.DrillNotMoved
}

func sameOutcome(a, b Outcome) bool {
	return a.Step == b.Step && a.To == b.To && a.Error == b.Error && a.RestorePoint == b.RestorePoint &&
		(a.DowntimeSeconds == nil) == (b.DowntimeSeconds == nil)
}

// Settled reports whether nothing of rec is under way any more.
func Settled(rec *Record) bool {
	for i := range rec.Runnables {
		if !rec.Runnables[i].Settled() {
			return false
		}
	}
	return true
}

// Totals counts rec's outcomes.
func Totals(rec *Record) v1alpha1.DrillTotals {
	var t v1alpha1.DrillTotals
	for _, o := range rec.Runnables {
		if o.PlannedTo == "" {
			t.Unplaceable++
		} else {
			t.Planned++
		}
		switch o.Step {
		case v1alpha1.MoveDone:
			t.Moved++
		case v1alpha1.MoveFailed:
			t.Failed++
		case v1alpha1.DrillNotMoved:
			if o.PlannedTo != "" {
				t.Failed++
			}
		default:
			t.Moving++
		}
		if (o.PlannedTo == "" && o.Step == v1alpha1.DrillNotMoved) || (o.Step == v1alpha1.MoveDone && o.To == o.PlannedTo) {
			t.AsPlanned++
		}
		if b := o.Back; b != nil {
			switch b.Step {
			case v1alpha1.MoveDone:
				t.MovedBack++
			case v1alpha1.MoveFailed, v1alpha1.DrillNotMoved:
				t.FailedBack++
			}
		}
	}
	return t
}

// Done is the state a drill whose moves all settled takes: Failed when
// moves were planned and not one of them was done, Ended otherwise.
func Done(rec *Record) string {
	t := Totals(rec)
	if t.Planned > 0 && t.Moved == 0 {
		return v1alpha1.DrillFailed
	}
	return v1alpha1.DrillEnded
}

// Summary says where rec stands in one sentence.
func Summary(rec *Record, state string) string {
	t := Totals(rec)
	msg := fmt.Sprintf("%s: %d of %d planned moves done, %d failed, %d under way; %d left unplaceable stayed; %d as planned",
		state, t.Moved, t.Planned, t.Failed, t.Moving, t.Unplaceable, t.AsPlanned)
	if rec.End != nil && rec.End.MoveBack {
		msg += fmt.Sprintf("; moved back %d, %d failed", t.MovedBack, t.FailedBack)
	}
	return msg
}
