package printer

import (
	"bytes"
	"strings"
	"testing"
)

const schedule = `{"kind": "Schedule", "metadata": {"name": "nightly", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
  "spec": {"schedule": "30 6 * * 1-5", "timeZone": "Europe/Paris", "concurrencyPolicy": "Forbid", "catchUp": {"policy": "Last"},
    "successfulRunsHistoryLimit": 3, "failedRunsHistoryLimit": 1, "template": {"template": {"apiVersion": "batch/v1", "kind": "Job"}}},
  "status": {"lastScheduleTime": "2026-01-05T05:30:00Z", "nextScheduleTime": "2026-01-06T05:30:00Z",
    "active": [{"name": "nightly-29458650"}], "missed": 2, "message": "tick skipped",
    "lastRuns": [{"name": "nightly-29458650", "tick": "2026-01-05T05:30:00Z", "phase": "Running"}]}}`

func TestScheduleTableAndDescribe(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, "Schedule", []Object{decode(t, schedule)}, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST NEXT" {
		t.Fatalf("header %q", lines[0])
	}
	for _, want := range []string{"nightly", "30 6 * * 1-5", "Europe/Paris", "false", " 1 ", " ago", "2026-01-06T05:30:00Z"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row lacks %q: %q", want, lines[1])
		}
	}
	b.Reset()
	if err := Describe(&b, "Schedule", decode(t, schedule), nil); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"Schedule: 30 6 * * 1-5 (Europe/Paris)", "Concurrency: Forbid", "Missed: 2",
		"Active: nightly-29458650", "nightly-29458650 2026-01-05T05:30:00Z Running"} {
		if !strings.Contains(flat, want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}
