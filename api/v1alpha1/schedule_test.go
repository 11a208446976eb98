package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

func validSchedule() *Schedule {
	return &Schedule{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindSchedule},
		Metadata: ObjectMeta{Name: "nightly", Namespace: "team-a"},
		Spec: ScheduleSpec{Schedule: "0 2 * * *", TimeZone: "Europe/Paris", Template: RunnableSpec{Template: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
		}}},
	}
}

func TestValidateScheduleAccepts(t *testing.T) {
	s := validSchedule()
	s.SetDefaults()
	if errs := ValidateSchedule(s, time.Now()); len(errs) > 0 {
		t.Fatalf("valid schedule refused: %v", errs)
	}
	if s.Spec.ConcurrencyPolicy != ConcurrencyAllow || s.Spec.CatchUp.Policy != CatchUpLast ||
		*s.Spec.SuccessfulRunsHistoryLimit != 3 || *s.Spec.FailedRunsHistoryLimit != 1 {
		t.Fatalf("defaults: %+v", s.Spec)
	}
}

func TestValidateScheduleRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Schedule)
		field string
	}{
		{"descriptor", func(s *Schedule) { s.Spec.Schedule = "@hourly" }, "spec.schedule"},
		{"every", func(s *Schedule) { s.Spec.Schedule = "@every 1s" }, "spec.schedule"},
		{"cron tz", func(s *Schedule) { s.Spec.Schedule = "CRON_TZ=Asia/Tokyo 0 2 * * *" }, "spec.schedule"},
		{"tz", func(s *Schedule) { s.Spec.Schedule = "TZ=UTC 0 2 * * *" }, "spec.schedule"},
		{"seconds", func(s *Schedule) { s.Spec.Schedule = "0 0 2 * * *" }, "spec.schedule"},
		{"huge", func(s *Schedule) { s.Spec.Schedule = strings.Repeat("1,", 5000) + "1 * * * *" }, "spec.schedule"},
		{"zero step", func(s *Schedule) { s.Spec.Schedule = "*/0 * * * *" }, "spec.schedule"},
		{"never", func(s *Schedule) { s.Spec.Schedule = "0 0 30 2 *" }, "spec.schedule"},
		{"empty", func(s *Schedule) { s.Spec.Schedule = "" }, "spec.schedule"},
		{"zone", func(s *Schedule) { s.Spec.TimeZone = "Mars/Olympus" }, "spec.timeZone"},
		{"local", func(s *Schedule) { s.Spec.TimeZone = "Local" }, "spec.timeZone"},
		{"policy", func(s *Schedule) { s.Spec.ConcurrencyPolicy = "Sometimes" }, "spec.concurrencyPolicy"},
		{"deadline", func(s *Schedule) { d := int64(0); s.Spec.StartingDeadlineSeconds = &d }, "spec.startingDeadlineSeconds"},
		{"catch-up", func(s *Schedule) { s.Spec.CatchUp = &CatchUp{Policy: "Some"} }, "spec.catchUp.policy"},
		{"window", func(s *Schedule) { s.Spec.CatchUp = &CatchUp{WindowSeconds: -1} }, "spec.catchUp.windowSeconds"},
		{"history", func(s *Schedule) { n := int32(-1); s.Spec.FailedRunsHistoryLimit = &n }, "spec.failedRunsHistoryLimit"},
		{"long name", func(s *Schedule) { s.Metadata.Name = strings.Repeat("a", 53) }, "metadata.name"},
		{"template", func(s *Schedule) { s.Spec.Template.Template = nil }, "spec.template.template"},
		{"secret", func(s *Schedule) {
			s.Spec.Template.Template = map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "x"}}
		}, "spec.template.template.kind"},
		{"kind", func(s *Schedule) { s.Kind = "Runnable" }, "kind"},
		{"object name", func(s *Schedule) { s.Spec.Template.Template["metadata"] = map[string]any{"name": "x"} }, "spec.template.template.metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSchedule()
			tc.edit(s)
			errs := ValidateSchedule(s, time.Now())
			for _, e := range errs {
				if e.Field == tc.field {
					return
				}
			}
			t.Fatalf("want a problem with %s, got %v", tc.field, errs)
		})
	}
}

func TestDecodeSchedule(t *testing.T) {
	body := `apiVersion: purser.io/v1alpha1
kind: Schedule
metadata: {name: nightly, namespace: team-a}
spec:
  schedule: "*/5 * * * *"
  template:
    template: {apiVersion: batch/v1, kind: Job, spec: {backoffLimit: 2}}
`
	s, err := DecodeSchedule([]byte(body), "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Spec.Template.Template["spec"].(map[string]any)["backoffLimit"].(int64); !ok {
		t.Fatalf("numbers not normalized: %#v", s.Spec.Template.Template)
	}
	if _, err := DecodeSchedule([]byte(strings.Replace(body, "schedule:", "scedule:", 1)), "application/yaml"); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestRunNames(t *testing.T) {
	tick := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	if got := TickRunName("nightly", tick); got != "nightly-29579130" {
		t.Fatalf("TickRunName = %s", got)
	}
	if got := ScheduledTimeLabel(tick.In(time.FixedZone("x", 3600))); got != "2026-03-29T01-30-00Z" {
		t.Fatalf("ScheduledTimeLabel = %s", got)
	}
}

// The runs of a schedule of the longest name are named within a label
// value's 63 characters, which a Job's name must be (it labels its
// pods), until Unix seconds need an eleventh digit (2286); one character
// more is refused.
func TestRunNamesOfTheLongestSchedule(t *testing.T) {
	longest := strings.Repeat("l", MaxScheduleNameLength)
	last := time.Unix(9_999_999_999, 0)
	for _, name := range []string{TickRunName(longest, last), ManualRunName(longest, last)} {
		if len(name) > 63 {
			t.Errorf("%s is %d characters long", name, len(name))
		}
	}
	s := validSchedule()
	s.Metadata.Name = longest + "l"
	if errs := ValidateSchedule(s, time.Now()); !strings.Contains(errs.String(), "metadata.name") {
		t.Fatalf("a schedule name of %d characters: %v", len(s.Metadata.Name), errs)
	}
	s.Metadata.Name = longest
	if errs := ValidateSchedule(s, time.Now()); len(errs) > 0 {
		t.Fatalf("a schedule name of %d characters: %v", len(s.Metadata.Name), errs)
	}
}
