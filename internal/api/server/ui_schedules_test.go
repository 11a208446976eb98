package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
)

// The Schedules view: the list, and a schedule's timeline of ticks run
// and skipped (a Forbid backfill of two ticks runs one and skips one),
// with "Run now" for a writer, which adds a run to the timeline.
func TestConsoleSchedules(t *testing.T) {
	alice := browsertest.Browser(t)
	h := newHarness(t, storetest.Engines()[0])
	forbid := strings.Replace(scheduleYAML, `"0 2 * * *"`, `"* * * * *"`, 1)
	h.yaml("alice", http.MethodPut, "/api/v1/schedules/team-a/nightly", forbid).want(t, http.StatusCreated)
	base := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	h.do("alice", http.MethodPost, "/api/v1/schedules/team-a/nightly/backfill", "application/json", backfillBody(base, base.Add(time.Minute))).want(t, http.StatusOK)

	browsertest.Do(alice, t, "open the console", chromedp.Navigate(h.url+"/#token="+h.tokens["alice"]), chromedp.WaitVisible(chromedp.CSS("#user")))
	browsertest.Do(alice, t, "open the schedules", browsertest.GoTo("#/schedules"), chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-name="nightly"]`)))
	browsertest.WaitText(alice, t, `#schedules tr[data-name="nightly"]`, "* * * * *")
	browsertest.Do(alice, t, "open the schedule", chromedp.Click(chromedp.CSS(`#schedules tr[data-name="nightly"] a`)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	browsertest.WaitText(alice, t, `#timeline tr[data-what="run"]`, v1alpha1.TickRunName("nightly", base)+" Queued")
	browsertest.WaitText(alice, t, `#timeline tr[data-what="skipped"]`, "concurrencyPolicy Forbid")
	browsertest.Screenshot(alice, t, "schedule-timeline")
	browsertest.Do(alice, t, "run now", chromedp.Click(chromedp.CSS("#run-now")))
	browsertest.WaitText(alice, t, "#timeline", "nightly-manual-")
}
