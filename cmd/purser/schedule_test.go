package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const everyMinute = `apiVersion: purser.io/v1alpha1
kind: Schedule
metadata: {name: every, namespace: team-a}
spec:
  schedule: "* * * * *"
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
`

// Schedules through the command line against `purser up`, whose
// controller runs the scheduler with up's policy: apply, get, describe,
// a run by hand, the tick of a schedule firing every minute, delete.
func TestCLISchedules(t *testing.T) {
	t.Parallel() // no clusters; most of it waits for a tick
	bin := buildPurser(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "client.yaml")
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	up, _ := startUp(t, bin, filepath.Join(dir, "farm"), config)
	defer stopUp(t, up)

	matches(t, "apply", me.ok("apply", "-f", "examples/schedule.yaml"),
		`^schedule/team-a/nightly-report created \(next tick 20\d\d-\d\d-\d\dT\d\d:\d\d:00Z\)`)
	matches(t, "apply again", me.ok("apply", "-f", "examples/schedule.yaml"), `^schedule/team-a/nightly-report unchanged`)
	matches(t, "get schedules", me.ok("get", "schedules", "-n", "team-a"),
		`(?m)^NAME\s+SCHEDULE\s+TIMEZONE\s+SUSPEND\s+ACTIVE\s+LAST\s+NEXT$`,
		`(?m)^nightly-report\s+30 6 \* \* 1-5\s+Europe/Paris\s+false\s+0\s+<none>\s+20\d\d-`)
	matches(t, "schedule run", me.ok("schedule", "run", "nightly-report", "-n", "team-a"),
		`^runnable/team-a/nightly-report-manual-\d+ created by schedule nightly-report: Queued`)
	matches(t, "describe", me.ok("describe", "schedule", "nightly-report", "-n", "team-a"),
		`(?m)^Concurrency:\s+Forbid$`, `(?m)^Active:\s+<none>$|(?m)^Active:\s+nightly-report-manual-`, `(?m)admin\s+create\s+created schedule team-a/nightly-report`)
	bad := strings.Replace(everyMinute, `"* * * * *"`, `"@hourly"`, 1)
	if out := me.with(bad).fail("apply", "-f", "-"); !strings.Contains(out, "spec.schedule") {
		t.Fatalf("apply of @hourly: %s", out)
	}

	// A tick: the scheduler wakes at the next minute and creates one
	// runnable named after it, labelled with the schedule.
	me.with(everyMinute).ok("apply", "-f", "-")
	deadline := time.Now().Add(90 * time.Second)
	tick := regexp.MustCompile(`(?m)^runnable/every-\d+$`)
	for {
		out := me.ok("get", "rn", "-n", "team-a", "-l", "purser.io/schedule=every", "-o", "name")
		if names := tick.FindAllString(out, -1); len(names) > 0 {
			if len(names) > 1 {
				t.Logf("several ticks passed: %v", names)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tick of every-minute after 90 s:\n%s\n%s", out, me.ok("describe", "schedule", "every", "-n", "team-a"))
		}
		time.Sleep(2 * time.Second)
	}
	// A backfill of two past minutes: a line per tick, under the names
	// the timetable gives them.
	from := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	matches(t, "schedule backfill", me.ok("schedule", "backfill", "every", "-n", "team-a",
		"--from", from.Format(time.RFC3339), "--to", from.Add(time.Minute).Format(time.RFC3339)),
		`(?m)^`+regexp.QuoteMeta(from.Format(time.RFC3339))+`  runnable/team-a/every-\d+ created: Queued$`,
		`(?m)^schedule every backfilled: 2 run, 0 skipped, 0 already done$`)
	if out := me.fail("schedule", "backfill", "every", "-n", "team-a", "--from", from.Format(time.RFC3339), "--to", "2999-01-01T00:00:00Z"); !strings.Contains(out, "in the future") {
		t.Fatalf("backfill into the future: %s", out)
	}
	if out := me.ok("delete", "schedule", "every", "-n", "team-a"); !strings.Contains(out, "schedule/team-a/every") {
		t.Fatalf("delete: %q", out)
	}
	if out := me.fail("get", "schedule", "every", "-n", "team-a"); !strings.Contains(out, "not found") {
		t.Fatalf("get after delete: %s", out)
	}
}
