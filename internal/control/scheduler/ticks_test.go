package scheduler

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/purser-io/purser/api/v1alpha1"
)

func parse(t *testing.T, expr, zone string) (cron.Schedule, *time.Location) {
	t.Helper()
	s, loc, err := v1alpha1.ParseCron(expr, zone)
	if err != nil {
		t.Fatal(err)
	}
	return s, loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ticksOf(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

func sameTicks(t *testing.T, got []time.Time, want ...string) {
	t.Helper()
	g := ticksOf(got)
	if len(g) != len(want) {
		t.Fatalf("ticks %v, want %v", g, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Fatalf("ticks %v, want %v", g, want)
		}
	}
}

// Each tick of a time zone's wall clock, across both changes of daylight
// saving time in Europe/Paris in 2026 (29 March, 25 October).
func TestDecideTimeZones(t *testing.T) {
	s, loc := parse(t, "30 2 * * *", "Europe/Paris")
	all := Rules{CatchUp: v1alpha1.CatchUpAll}
	// Spring: 02:30 does not exist on 29 March; no run that day.
	p := Decide(s, loc, utc("2026-03-27T12:00:00Z"), utc("2026-03-30T12:00:00Z"), all)
	sameTicks(t, p.Run, "2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z")
	// Autumn: 02:30 happens twice on 25 October; it runs once, the first.
	p = Decide(s, loc, utc("2026-10-24T12:00:00Z"), utc("2026-10-26T12:00:00Z"), all)
	sameTicks(t, p.Run, "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z")
	if got := p.Next.UTC(); !got.Equal(utc("2026-10-27T01:30:00Z")) {
		t.Fatalf("next = %v", got)
	}
	// The same expression in UTC and in Asia/Kolkata (+05:30).
	s, loc = parse(t, "0 9 * * 1-5", "Asia/Kolkata")
	p = Decide(s, loc, utc("2026-12-04T00:00:00Z"), utc("2026-12-07T03:30:00Z"), all) // Fri 4 Dec .. Mon 7 Dec 09:00 IST
	sameTicks(t, p.Run, "2026-12-04T03:30:00Z", "2026-12-07T03:30:00Z")
	s, loc = parse(t, "0 9 * * 1-5", "")
	p = Decide(s, loc, utc("2026-12-04T00:00:00Z"), utc("2026-12-07T09:00:00Z"), all)
	sameTicks(t, p.Run, "2026-12-04T09:00:00Z", "2026-12-07T09:00:00Z")
}

func TestDecideOnTime(t *testing.T) {
	s, loc := parse(t, "*/5 * * * *", "")
	for _, policy := range []string{v1alpha1.CatchUpNone, v1alpha1.CatchUpLast, v1alpha1.CatchUpAll} {
		p := Decide(s, loc, utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:05:00.2Z"), Rules{CatchUp: policy})
		sameTicks(t, p.Run, "2026-12-07T10:05:00Z")
		if p.Missed != 0 || !p.Latest.Equal(utc("2026-12-07T10:05:00Z")) || !p.Next.Equal(utc("2026-12-07T10:10:00Z")) {
			t.Fatalf("%s: %+v", policy, p)
		}
	}
	// Nothing due yet.
	p := Decide(s, loc, utc("2026-12-07T10:05:00Z"), utc("2026-12-07T10:09:59Z"), Rules{})
	if len(p.Run) != 0 || p.Missed != 0 || !p.Latest.IsZero() {
		t.Fatalf("early: %+v", p)
	}
}

func TestDecideStartingDeadline(t *testing.T) {
	s, loc := parse(t, "*/5 * * * *", "")
	rules := Rules{CatchUp: v1alpha1.CatchUpAll, StartingDeadline: 30 * time.Second}
	p := Decide(s, loc, utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:05:20Z"), rules)
	sameTicks(t, p.Run, "2026-12-07T10:05:00Z")
	p = Decide(s, loc, utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:05:40Z"), rules)
	if len(p.Run) != 0 || p.Missed != 1 || p.MissedWhy != "reached after its startingDeadlineSeconds" {
		t.Fatalf("past deadline: %+v", p)
	}
	// After a downtime, the deadline holds for catch-up too.
	rules.StartingDeadline = 12 * time.Minute
	p = Decide(s, loc, utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:22:00Z"), rules)
	sameTicks(t, p.Run, "2026-12-07T10:10:00Z", "2026-12-07T10:15:00Z", "2026-12-07T10:20:00Z")
	if p.Missed != 1 {
		t.Fatalf("missed %d, want 1 (10:05)", p.Missed)
	}
}

func TestDecideCatchUp(t *testing.T) {
	s, loc := parse(t, "*/5 * * * *", "")
	since, now := utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:32:00Z") // down from 10:00 to 10:32
	p := Decide(s, loc, since, now, Rules{CatchUp: v1alpha1.CatchUpNone})
	if len(p.Run) != 0 || p.Missed != 6 {
		t.Fatalf("None: %+v", p)
	}
	p = Decide(s, loc, since, now, Rules{CatchUp: v1alpha1.CatchUpLast})
	sameTicks(t, p.Run, "2026-12-07T10:30:00Z")
	if p.Missed != 5 {
		t.Fatalf("Last: missed %d", p.Missed)
	}
	p = Decide(s, loc, since, now, Rules{CatchUp: v1alpha1.CatchUpAll})
	sameTicks(t, p.Run, "2026-12-07T10:05:00Z", "2026-12-07T10:10:00Z", "2026-12-07T10:15:00Z",
		"2026-12-07T10:20:00Z", "2026-12-07T10:25:00Z", "2026-12-07T10:30:00Z")
	p = Decide(s, loc, since, now, Rules{CatchUp: v1alpha1.CatchUpAll, Window: 13 * time.Minute})
	sameTicks(t, p.Run, "2026-12-07T10:20:00Z", "2026-12-07T10:25:00Z", "2026-12-07T10:30:00Z")
	if p.Missed != 3 {
		t.Fatalf("All in window: missed %d", p.Missed)
	}
	p = Decide(s, loc, since, now, Rules{CatchUp: v1alpha1.CatchUpLast, Window: time.Minute})
	if len(p.Run) != 0 || p.Missed != 6 {
		t.Fatalf("Last outside window: %+v", p)
	}
	// A long outage: All catches up at most MaxCatchUpTicks, the newest,
	// besides the tick of now.
	s, loc = parse(t, "* * * * *", "")
	p = Decide(s, loc, utc("2026-12-01T00:00:00Z"), utc("2026-12-07T00:00:30Z"), Rules{CatchUp: v1alpha1.CatchUpAll})
	if len(p.Run) != v1alpha1.MaxCatchUpTicks+1 || !p.Run[len(p.Run)-1].Equal(utc("2026-12-07T00:00:00Z")) || p.Missed != 6*24*60-v1alpha1.MaxCatchUpTicks-1 {
		t.Fatalf("long outage: %d runs, %d missed", len(p.Run), p.Missed)
	}
}
