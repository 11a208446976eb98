package printer

import (
	"bytes"
	"strings"
	"testing"
)

const trigger = `{"kind": "Trigger", "metadata": {"name": "after-etl", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
  "spec": {"source": {"runnableEnded": {"phases": ["Succeeded", "Failed"]}}, "template": {"template": {"apiVersion": "batch/v1", "kind": "Job"}}},
  "status": {"fired": 4, "lastFired": "2026-01-05T05:30:00Z",
    "lastRuns": [{"name": "after-etl-3f9c0a1b2c4d", "event": "runnable team-a/etl ended Succeeded", "phase": "Running", "at": "2026-01-05T05:30:00Z"}]}}`

func TestTriggerTableAndDescribe(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, "Trigger", []Object{decode(t, trigger)}, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME SOURCE SUSPEND FIRED LAST AGE" {
		t.Fatalf("header %q", lines[0])
	}
	for _, want := range []string{"after-etl", "runnableEnded", "false", " 4 ", " ago"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row lacks %q: %q", want, lines[1])
		}
	}
	b.Reset()
	if err := Describe(&b, "Trigger", decode(t, trigger), nil); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"Source: runnableEnded", "Phases: Succeeded, Failed", "Fired: 4",
		"after-etl-3f9c0a1b2c4d Running runnable team-a/etl ended Succeeded"} {
		if !strings.Contains(flat, want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}
