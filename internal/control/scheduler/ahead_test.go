package scheduler_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestReviewedAhead: the firings prepared Early before a tick are used
// at the tick only while they still hold. A schedule changed after it was
// reviewed runs its new template; a policy reloaded after the review
// decides the tick, which refuses a runnable its author may no longer
// create. An unchanged schedule's review is used as made.
func TestReviewedAhead(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			var pol atomic.Pointer[policy.Policy]
			pol.Store(testPolicy(t, "alice"))
			var clk clock
			tick := time.Date(2026, 12, 7, 10, 1, 0, 0, time.UTC)
			clk.Set(tick.Add(-30 * time.Second))
			put(t, st, newSchedule("kept", "* * * * *"), clk.Now())
			put(t, st, newSchedule("changed", "* * * * *"), clk.Now())
			sched := scheduler.New(scheduler.Config{Store: st, Policy: pol.Load, Now: clk.Now})

			// Reviewed ahead, then one schedule changed before the tick.
			clk.Set(tick.Add(-3 * time.Second))
			sched.PrepareAhead(t.Context(), tick)
			changed := newSchedule("changed", "* * * * *")
			changed.Spec.Template.Template = job()
			changed.Spec.Template.Template["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{
				map[string]any{"name": "c", "image": "busybox:2"}}
			put(t, st, changed, clk.Now())
			clk.Set(tick.Add(time.Second))
			if _, err := sched.Pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := sched.ReviewedAhead(); n != 1 {
				t.Errorf("%d firings used as reviewed ahead, want 1 (the unchanged schedule's)", n)
			}
			if runs := runsOf(t, st, "kept"); len(runs) != 1 {
				t.Fatalf("kept: %d runs after its tick, want 1", len(runs))
			}
			runs := runsOf(t, st, "changed")
			if len(runs) != 1 || !strings.Contains(string(runs[0].Rec.Spec), "busybox:2") {
				t.Fatalf("changed: runs %d, want 1 with the template written after the review (busybox:2)", len(runs))
			}

			// Reviewed ahead, then the policy reloaded: alice may no longer
			// create runnables in team-a.
			next := tick.Add(time.Minute)
			clk.Set(next.Add(-3 * time.Second))
			sched.PrepareAhead(t.Context(), next)
			pol.Store(testPolicy(t, "bob"))
			clk.Set(next.Add(time.Second))
			if _, err := sched.Pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := sched.ReviewedAhead(); n != 1 {
				t.Errorf("%d firings used as reviewed ahead, want still 1: the policy changed after the review", n)
			}
			if runs := runsOf(t, st, "kept"); len(runs) != 1 {
				t.Fatalf("kept: %d runs after a tick its author may no longer run, want still 1", len(runs))
			}
			if msg := statusOf(t, st, "kept").Message; !strings.Contains(msg, "created no runnable") {
				t.Errorf("kept: status message %q, want the tick's refusal", msg)
			}
		})
	}
}
