package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/purser-io/purser/api/v1alpha1"
)

// OnTime is how late a tick may be reached and still count as on time
// rather than missed while purser was down: the scheduler wakes at each
// tick, so a tick it reaches later than this passed while no scheduler
// ran (or the database did not answer).
const OnTime = time.Minute

// maxEnumerated bounds the ticks one look at a schedule enumerates: a
// schedule firing each minute, after a week down, has ten thousand; the
// ones beyond are counted as missed without being looked at one by one.
const maxEnumerated = 20000

// Plan is what one look at a schedule decides.
type Plan struct {
	// Run are the ticks to create a runnable for, oldest first.
	Run []time.Time
	// Missed are the due ticks not run, and why (the newest reason).
	Missed    int64
	MissedWhy string
	// Latest is the newest due tick (zero when none was due): the
	// schedule's lastScheduleTime once the plan is carried out.
	Latest time.Time
	// Next is the first tick after now (zero: the cron never fires again).
	Next time.Time
}

// Rules are a schedule's fields that decide which due ticks run.
type Rules struct {
	// StartingDeadline: a tick reached later than this after its time is
	// missed; 0 is no deadline.
	StartingDeadline time.Duration
	// CatchUp is None, Last or All; Window bounds it (0: no bound).
	CatchUp string
	Window  time.Duration
}

// RulesOf reads a schedule's spec (defaults applied).
func RulesOf(spec *v1alpha1.ScheduleSpec) Rules {
	r := Rules{CatchUp: v1alpha1.CatchUpLast}
	if d := spec.StartingDeadlineSeconds; d != nil {
		r.StartingDeadline = time.Duration(*d) * time.Second
	}
	if c := spec.CatchUp; c != nil {
		if c.Policy != "" {
			r.CatchUp = c.Policy
		}
		r.Window = time.Duration(c.WindowSeconds) * time.Second
	}
	return r
}

// Decide plans a schedule's ticks after since (exclusive) up to now
// (inclusive), read in loc. The newest due tick, reached within OnTime,
// is the tick of now and always runs (unless past its starting
// deadline); the others passed while purser was down, and run as the
// catch-up rule says: None, none of them; Last, the newest of them
// (which, late, is the newest due tick); All, each one, oldest first, at
// most MaxCatchUpTicks. A tick older than the catch-up window or the
// starting deadline never runs. Every due tick not run is counted missed.
func Decide(sched cron.Schedule, loc *time.Location, since, now time.Time, rules Rules) Plan {
	var p Plan
	var due []time.Time
	var skipped int64
	for t := next(sched, since.In(loc)); !t.IsZero() && !t.After(now); t = next(sched, t) {
		if len(due) == maxEnumerated {
			// Keep the newest maxEnumerated: drop the oldest.
			due = due[1:]
			skipped++
		}
		due = append(due, t)
	}
	p.Next = next(sched, now.In(loc))
	if len(due) == 0 {
		return p
	}
	p.Latest = due[len(due)-1]
	p.Missed = skipped
	if skipped > 0 {
		p.MissedWhy = "too many ticks passed while purser was down"
	}
	miss := func(why string) {
		p.Missed++
		p.MissedWhy = why
	}
	onTime := now.Sub(p.Latest) <= OnTime
	late := due
	if onTime {
		late = due[:len(due)-1]
	}
	// The late ticks, by the catch-up rule.
	var catchUp []time.Time
	switch rules.CatchUp {
	case v1alpha1.CatchUpNone:
		for range late {
			miss("passed while purser was down (catchUp.policy None)")
		}
	case v1alpha1.CatchUpAll:
		catchUp = late
	default: // Last
		if n := len(late); n > 0 {
			for range late[:n-1] {
				miss("passed while purser was down; catchUp.policy Last runs only the newest")
			}
			catchUp = late[n-1:]
		}
	}
	for _, t := range catchUp {
		if rules.Window > 0 && now.Sub(t) > rules.Window {
			miss("passed while purser was down, before the catch-up window")
			continue
		}
		p.Run = append(p.Run, t)
	}
	if len(p.Run) > v1alpha1.MaxCatchUpTicks {
		for range p.Run[:len(p.Run)-v1alpha1.MaxCatchUpTicks] {
			miss("passed while purser was down, beyond the most a catch-up runs")
		}
		p.Run = p.Run[len(p.Run)-v1alpha1.MaxCatchUpTicks:]
	}
	if onTime {
		p.Run = append(p.Run, p.Latest)
	}
	// The starting deadline, last: it holds for every tick, on time or not.
	if rules.StartingDeadline > 0 {
		kept := p.Run[:0]
		for _, t := range p.Run {
			if now.Sub(t) > rules.StartingDeadline {
				miss("reached after its startingDeadlineSeconds")
				continue
			}
			kept = append(kept, t)
		}
		p.Run = kept
	}
	return p
}

// next is the schedule's first tick after t, except that a wall-clock
// time that occurs twice, in the hour repeated when daylight saving time
// ends, fires once, at its first occurrence: "30 2 * * *" is one run on
// that night, not two. (A time skipped when daylight saving time starts
// does not fire that day, as with Kubernetes' CronJob.)
func next(sched cron.Schedule, t time.Time) time.Time {
	for range 4 {
		n := sched.Next(t)
		if n.IsZero() || !repeated(n) {
			return n
		}
		t = n
	}
	return sched.Next(t)
}

// repeated reports whether t's wall clock was already shown within the
// two hours before t: t is in the repeated hour.
func repeated(t time.Time) bool {
	y, mo, d := t.Date()
	h, mi, _ := t.Clock()
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-back)
		ey, emo, ed := e.Date()
		eh, emi, _ := e.Clock()
		if ey == y && emo == mo && ed == d && eh == h && emi == mi {
			return true
		}
	}
	return false
}
