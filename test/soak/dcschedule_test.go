package soak

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

// TestDCScheduleExactlyOnce: a schedule firing every minute (the real
// clock: the scheduler has no faster one) keeps exactly one runnable per
// tick on the three-DC farm while (a) the DC of the controller's leader,
// where the scheduler runs, is powered off across a tick, and (b) the
// database's primary is powered off two seconds before a tick. Its
// catchUp is All, so a tick that passed while no scheduler reached the
// database runs late rather than not at all. The runnables are counted by
// their label purser.io/schedule: missed 0 (every minute from the first
// tick to the last has its runnable, status.missed is 0), doubled 0 (no
// tick has two).
// It runs in `make soak-dc` (-soak.dc-schedule), not in `make test`: it
// waits on the wall clock's minutes (five or more), and CI's DC soak
// already keeps a schedule through the loss of a DC and of the primary
// and counts its ticks (missed 0, doubled 0).
var dcScheduleTest = flag.Bool("soak.dc-schedule", false, "run TestDCScheduleExactlyOnce (minutes of wall clock)")

func TestDCScheduleExactlyOnce(t *testing.T) {
	if testing.Short() || !*dcScheduleTest {
		t.Skip("starts the three-DC farm and waits on whole minutes: make soak-dc runs it (-soak.dc-schedule)")
	}
	ctx := t.Context()
	dir := keptDir(t)
	f, clusters := startDCFarm(ctx, t, dir, withSchedules(dir, controllerArgs), agentArgs)
	const ns, name = "dc-schedule", "every-minute"
	for _, c := range clusters {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	first := putMinuteSchedule(t, f.API, ns, name)
	waitTick(t, f, ns, name, first, "the first tick")

	// (a) The leader's DC, powered off ten seconds before a tick, comes
	// back once a controller of another DC has run that tick.
	leader := leaderDC(t, f)
	reconcile.Sleep(ctx, time.Until(nextMinute(time.Now().Add(10*time.Second)).Add(-10*time.Second)))
	t.Logf("%s power off %s, the DC of the controller's leader", stamp(), leader.Name)
	f.PowerOff(leader)
	tickA := nextMinute(time.Now())
	waitTick(t, f, ns, name, tickA, "the tick after the leader's DC lost power")
	if err := f.PowerOn(ctx, leader, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}

	// (b) The database's primary lost two seconds before a tick.
	var primary *farm.DC
	sandboxtest.Eventually(t, 2*time.Minute, "one PostgreSQL primary seen by every DC", func(ctx context.Context) error {
		var err error
		primary, err = f.Primary(ctx)
		return err
	})
	reconcile.Sleep(ctx, time.Until(nextMinute(time.Now().Add(5*time.Second)).Add(-2*time.Second)))
	t.Logf("%s power off %s, the DC of the database's primary", stamp(), primary.Name)
	f.PowerOff(primary)
	tickB := nextMinute(time.Now())
	waitTick(t, f, ns, name, tickB, "the tick at the primary's loss")
	if err := f.PowerOn(ctx, primary, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}
	last := nextMinute(time.Now())
	waitTick(t, f, ns, name, last, "a tick on the whole farm again")

	c := countTicks(t, f, ns, name, first, last)
	t.Logf("schedule %s over %d ticks (%s to %s, the leader's DC off at %s, the primary off at %s): %s",
		name, c.Ticks, first.Format("15:04"), last.Format("15:04"), tickA.Format("15:04"), tickB.Format("15:04"), c)
	if v := c.Violation(); v != "" {
		t.Error(v)
	}
}

// minuteSchedule is the schedule of the DC tests: every minute, every
// tick caught up (catchUp All), every run kept so that each tick's
// runnable can be counted.
func putMinuteSchedule(t *testing.T, api *farm.Client, ns, name string) (first time.Time) {
	t.Helper()
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindSchedule,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"schedule": "* * * * *", "catchUp": map[string]any{"policy": v1alpha1.CatchUpAll},
			"successfulRunsHistoryLimit": v1alpha1.MaxHistoryLimit, "failedRunsHistoryLimit": v1alpha1.MaxHistoryLimit,
			"template": runnableBody(&submission{Namespace: ns, Name: "x"})["spec"],
		},
	}
	if code, err := api.Do(t.Context(), http.MethodPut, "/api/v1/schedules/"+ns+"/"+name, nil, body, nil); code != http.StatusCreated {
		t.Fatalf("put schedule %s/%s: %d %v", ns, name, code, err)
	}
	return nextMinute(time.Now())
}

// tickCount is what the runnables of a schedule say of its ticks.
type tickCount struct {
	Ticks           int
	Missed, Doubled []string
	StatusMissed    int64
	Message         string
}

func (c tickCount) String() string {
	return fmt.Sprintf("missed %d, doubled %d (status.missed %d)", len(c.Missed), len(c.Doubled), c.StatusMissed)
}

// Violation is "" when every tick has exactly one runnable.
func (c tickCount) Violation() string {
	if len(c.Missed) == 0 && len(c.Doubled) == 0 && c.StatusMissed == 0 {
		return ""
	}
	return fmt.Sprintf("schedule: missed %v, doubled %v, status.missed %d (%s)", c.Missed, c.Doubled, c.StatusMissed, c.Message)
}

// countTicks lists the runnables labelled purser.io/schedule: name and
// checks that each minute from first to last has exactly one.
func countTicks(t *testing.T, f *farm.DCFarm, ns, name string, first, last time.Time) tickCount {
	t.Helper()
	ctx := t.Context()
	perTick := map[string][]string{}
	if err := list(ctx, f.API, "/api/v1/runnables", url.Values{"namespace": {ns}}, func(r v1alpha1.Runnable) {
		if r.Metadata.Labels[v1alpha1.LabelSchedule] == name {
			tick := r.Metadata.Labels[v1alpha1.LabelScheduledTime]
			perTick[tick] = append(perTick[tick], r.Metadata.Name)
		}
	}); err != nil {
		t.Fatal(err)
	}
	var c tickCount
	for tick := first; !tick.After(last); tick = tick.Add(time.Minute) {
		c.Ticks++
		label := v1alpha1.ScheduledTimeLabel(tick)
		switch runs := perTick[label]; {
		case len(runs) == 0:
			c.Missed = append(c.Missed, label)
		case len(runs) > 1:
			c.Doubled = append(c.Doubled, fmt.Sprintf("%s: %v", label, runs))
		}
		delete(perTick, label)
	}
	for label, runs := range perTick {
		if label > v1alpha1.ScheduledTimeLabel(last) {
			continue // a tick after the last one looked at
		}
		c.Doubled = append(c.Doubled, fmt.Sprintf("%s (no tick of the timetable): %v", label, runs))
	}
	slices.Sort(c.Doubled)
	var sch v1alpha1.Schedule
	if code, err := f.API.Do(ctx, http.MethodGet, "/api/v1/schedules/"+ns+"/"+name, nil, nil, &sch); code != http.StatusOK {
		t.Fatal(callError("get schedule", code, err))
	}
	c.StatusMissed, c.Message = sch.Status.Missed, sch.Status.Message
	return c
}

// withSchedules adds to a controller's flags the policy each tick is
// checked against: without it a controller fires no schedule. The farm
// writes the policy in its folder.
func withSchedules(dir string, args []string) []string {
	return append(slices.Clone(args), "--policy", filepath.Join(dir, "policy.yaml"))
}

// nextMinute is the first whole minute after t.
func nextMinute(t time.Time) time.Time { return t.UTC().Truncate(time.Minute).Add(time.Minute) }

// waitTick waits until the schedule's lastScheduleTime reaches tick:
// some scheduler dealt with it.
func waitTick(t *testing.T, f *farm.DCFarm, ns, name string, tick time.Time, what string) {
	t.Helper()
	deadline := tick.Add(4 * time.Minute)
	for {
		var sch v1alpha1.Schedule
		code, err := f.API.Do(t.Context(), http.MethodGet, "/api/v1/schedules/"+ns+"/"+name, nil, nil, &sch)
		if code == http.StatusOK && sch.Status.LastScheduleTime != nil && !sch.Status.LastScheduleTime.Before(tick) {
			t.Logf("%s %s (%s) dealt with, %s after it", stamp(), what, tick.Format("15:04"), time.Since(tick).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (%s) not dealt with 4 minutes after it: %d %v, status %+v", what, tick.Format("15:04"), code, err, sch.Status)
		}
		reconcile.Sleep(t.Context(), time.Second)
	}
}
