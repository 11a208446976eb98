package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

const scheduleYAML = `apiVersion: purser.io/v1alpha1
kind: Schedule
metadata: {name: nightly, namespace: team-a}
spec:
  schedule: "0 2 * * *"
  timeZone: Europe/Paris
  concurrencyPolicy: Forbid
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

func TestSchedulesAPI(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	path := "/api/v1/schedules/team-a/nightly"
	r := h.yaml("alice", http.MethodPut, path, scheduleYAML).want(t, http.StatusCreated)
	if r.str("spec", "catchUp", "policy") != v1alpha1.CatchUpLast || r.str("status", "nextScheduleTime") == "" {
		t.Fatalf("defaults or next tick missing: %s", r.raw)
	}
	changed := h.yaml("alice", http.MethodPut, path, strings.Replace(scheduleYAML, "Forbid", "Replace", 1)).want(t, http.StatusOK)
	// The same again writes nothing (no new version, no audit entry).
	same := h.yaml("alice", http.MethodPut, path, strings.Replace(scheduleYAML, "Forbid", "Replace", 1)).want(t, http.StatusOK)
	if same.str("metadata", "resourceVersion") != changed.str("metadata", "resourceVersion") {
		t.Fatalf("an unchanged PUT moved the version: %s -> %s", changed.str("metadata", "resourceVersion"), same.str("metadata", "resourceVersion"))
	}
	if got := h.get("bob", path).want(t, http.StatusOK).str("spec", "concurrencyPolicy"); got != "Replace" {
		t.Fatalf("concurrencyPolicy %q after the update", got)
	}
	if n := len(h.get("bob", "/api/v1/schedules?namespace=team-a").want(t, http.StatusOK).items()); n != 1 {
		t.Fatalf("list: %d items", n)
	}
	// Refusals: a viewer writes, a stranger reads, a descriptor, a
	// privileged template (named under spec.template), a huge body.
	h.yaml("bob", http.MethodPut, path, scheduleYAML).want(t, http.StatusForbidden)
	h.get("mallory", path).want(t, http.StatusForbidden)
	h.get("mallory", "/api/v1/schedules").want(t, http.StatusForbidden)
	bad := h.yaml("alice", http.MethodPut, path, strings.Replace(scheduleYAML, `"0 2 * * *"`, `"@hourly"`, 1)).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(bad.raw), `"field":"spec.schedule"`) {
		t.Fatalf("@hourly: %s", bad.raw)
	}
	priv := strings.Replace(scheduleYAML, "image: busybox}", "image: busybox, securityContext: {privileged: true}}", 1)
	bad = h.yaml("alice", http.MethodPut, path, priv).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(bad.raw), `"field":"spec.template.template.spec.template.spec"`) {
		t.Fatalf("privileged template: %s", bad.raw)
	}
	huge := strings.Replace(scheduleYAML, `"0 2 * * *"`, `"`+strings.Repeat("1,", 3000)+`1 2 * * *"`, 1)
	h.yaml("alice", http.MethodPut, path, huge).want(t, http.StatusUnprocessableEntity)

	// One run now, by hand.
	run := h.do("alice", http.MethodPost, path+"/run", "", nil).want(t, http.StatusAccepted)
	name := run.str("metadata", "name")
	if !strings.HasPrefix(name, "nightly-manual-") || run.str("metadata", "labels", v1alpha1.LabelSchedule) != "nightly" ||
		run.str("metadata", "labels", v1alpha1.LabelScheduledTime) == "" {
		t.Fatalf("manual run: %s", run.raw)
	}
	h.do("bob", http.MethodPost, path+"/run", "", nil).want(t, http.StatusForbidden)
	// One schedule shows its runs as they are now.
	one := h.get("bob", path).want(t, http.StatusOK)
	if !strings.Contains(string(one.raw), `"active":[{"name":"`+name+`"`) || !strings.Contains(string(one.raw), `"lastRuns":[{"name":"`+name+`"`) {
		t.Fatalf("the run by hand is not among the schedule's runs: %s", one.raw)
	}

	h.do("bob", http.MethodDelete, path, "", nil).want(t, http.StatusForbidden)
	h.do("alice", http.MethodDelete, path, "", nil).want(t, http.StatusOK)
	h.get("alice", path).want(t, http.StatusNotFound)
	h.get("alice", "/api/v1/runnables/team-a/"+name).want(t, http.StatusOK) // its runs stay
	for _, action := range []string{"create", "update", "delete"} {
		if n := len(h.get("admin", "/api/v1/history?kind=Schedule&name=nightly&action="+action).want(t, http.StatusOK).items()); n != 1 {
			t.Errorf("%d audit entries of the schedule's %s, want 1", n, action)
		}
	}
}

// backfillBody is the body of a backfill of [from, to].
func backfillBody(from, to time.Time) []byte {
	return fmt.Appendf(nil, `{"from": %q, "to": %q}`, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
}

// Backfill runs the ticks of an interval under the names the timetable
// uses: a tick already done is not run again, Forbid skips while a run is
// active, approval holds the runs, and bad intervals are refused whole.
func TestScheduleBackfill(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	every := strings.Replace(strings.Replace(scheduleYAML, `"0 2 * * *"`, `"* * * * *"`, 1), "concurrencyPolicy: Forbid", "concurrencyPolicy: Allow", 1)
	path := "/api/v1/schedules/team-a/nightly"
	h.yaml("alice", http.MethodPut, path, every).want(t, http.StatusCreated)
	base := time.Now().UTC().Truncate(time.Minute).Add(-30 * time.Minute)
	tickNames := func(r response) []string {
		var out []string
		for _, tk := range r.body["ticks"].([]any) {
			m := tk.(map[string]any)
			out = append(out, m["name"].(string)+"="+m["outcome"].(string))
		}
		return out
	}
	name := func(m int) string { return v1alpha1.TickRunName("nightly", base.Add(time.Duration(m)*time.Minute)) }

	r := h.do("alice", http.MethodPost, path+"/backfill", "application/json", backfillBody(base, base.Add(2*time.Minute))).want(t, http.StatusOK)
	want := []string{name(0) + "=Run", name(1) + "=Run", name(2) + "=Run"}
	if got := tickNames(r); !slices.Equal(got, want) {
		t.Fatalf("first backfill: %v, want %v", got, want)
	}
	// Overlapping: the ticks done are not run again.
	r = h.do("alice", http.MethodPost, path+"/backfill", "application/json", backfillBody(base.Add(time.Minute), base.Add(3*time.Minute))).want(t, http.StatusOK)
	want = []string{name(1) + "=AlreadyDone", name(2) + "=AlreadyDone", name(3) + "=Run"}
	if got := tickNames(r); !slices.Equal(got, want) || r.body["run"] != 1.0 || r.body["alreadyDone"] != 2.0 {
		t.Fatalf("overlapping backfill: %v (%s), want %v", got, r.raw, want)
	}
	run := h.get("bob", "/api/v1/runnables/team-a/"+name(3)).want(t, http.StatusOK)
	if run.str("metadata", "labels", v1alpha1.LabelScheduledTime) != v1alpha1.ScheduledTimeLabel(base.Add(3*time.Minute)) || run.str("status", "phase") != "Queued" {
		t.Fatalf("backfilled run: %s", run.raw)
	}
	// Refusals, each changing nothing.
	h.do("bob", http.MethodPost, path+"/backfill", "application/json", backfillBody(base, base.Add(time.Minute))).want(t, http.StatusForbidden)
	h.do("alice", http.MethodPost, "/api/v1/schedules/team-a/nope/backfill", "application/json", backfillBody(base, base.Add(time.Minute))).want(t, http.StatusNotFound)
	bad := h.do("alice", http.MethodPost, path+"/backfill", "application/json", backfillBody(base.Add(time.Minute), base)).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(bad.raw), "is not before to") {
		t.Fatalf("from after to: %s", bad.raw)
	}
	bad = h.do("alice", http.MethodPost, path+"/backfill", "application/json", backfillBody(base, time.Now().Add(time.Hour))).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(bad.raw), "in the future") {
		t.Fatalf("to in the future: %s", bad.raw)
	}
	bad = h.do("alice", http.MethodPost, path+"/backfill", "application/json", backfillBody(base.Add(-2000*time.Minute), base.Add(-time.Minute))).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(bad.raw), "backfill of 2000 ticks refused: at most 1000") {
		t.Fatalf("too many ticks: %s", bad.raw)
	}
	h.do("alice", http.MethodPost, path+"/backfill", "application/json", []byte(`{"from": "yesterday"}`)).want(t, http.StatusBadRequest)
	if n := len(h.get("bob", "/api/v1/runnables?namespace=team-a").want(t, http.StatusOK).items()); n != 4 {
		t.Fatalf("%d runnables after the refusals, want the 4 backfilled", n)
	}

	// Forbid: the first tick runs, the next ones wait for it and are skipped.
	forbid := strings.Replace(strings.Replace(scheduleYAML, `"0 2 * * *"`, `"* * * * *"`, 1), "name: nightly", "name: forbid", 1)
	h.yaml("alice", http.MethodPut, "/api/v1/schedules/team-a/forbid", forbid).want(t, http.StatusCreated)
	r = h.do("alice", http.MethodPost, "/api/v1/schedules/team-a/forbid/backfill", "application/json", backfillBody(base, base.Add(2*time.Minute))).want(t, http.StatusOK)
	if r.body["run"] != 1.0 || r.body["skipped"] != 2.0 || !strings.Contains(string(r.raw), "concurrencyPolicy Forbid") {
		t.Fatalf("Forbid backfill: %s", r.raw)
	}

	// Approval: the runs wait PendingApproval.
	h.yaml("alice", http.MethodPut, "/api/v1/schedules/team-b/nightly", strings.Replace(every, "namespace: team-a", "namespace: team-b", 1)).want(t, http.StatusCreated)
	r = h.do("dave", http.MethodPost, "/api/v1/schedules/team-b/nightly/backfill", "application/json", backfillBody(base, base)).want(t, http.StatusUnprocessableEntity)
	r = h.do("dave", http.MethodPost, "/api/v1/schedules/team-b/nightly/backfill", "application/json", backfillBody(base, base.Add(time.Minute))).want(t, http.StatusOK)
	if r.body["run"] != 2.0 || !strings.Contains(string(r.raw), `"phase":"PendingApproval"`) {
		t.Fatalf("backfill where approval is required: %s", r.raw)
	}
	if got := h.get("dave", "/api/v1/runnables/team-b/"+name(0)).want(t, http.StatusOK).str("status", "phase"); got != "PendingApproval" {
		t.Fatalf("backfilled run in team-b is %s", got)
	}
	// Audited: the backfill on the schedule, each run by its caller.
	entries := h.get("admin", "/api/v1/history?kind=Schedule&name=nightly&action=backfill").want(t, http.StatusOK).items()
	if len(entries) != 3 || entries[0]["actor"] != "alice" {
		t.Fatalf("backfill audit entries: %v", entries)
	}
	created := h.get("admin", "/api/v1/history?kind=Runnable&namespace=team-b&name="+name(0)+"&action=create").want(t, http.StatusOK).items()
	if len(created) != 1 || created[0]["actor"] != "dave" || !strings.Contains(fmt.Sprint(created[0]["summary"]), "backfill by dave") {
		t.Fatalf("the run's audit entry: %v", created)
	}
}
