package server_test

import (
	"net/http"
	"strings"
	"testing"

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
