package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestRunAgainAfterATerm: the controller runs the scheduler for each term
// it leads, on the same Scheduler. A replica that lost the lead and took
// it back must fire ticks again: the tick due in its second term is run.
// (Its first queue is done once the first run ended; a run that reused it
// did nothing, and the three-DC test saw a tick missed for minutes.)
func TestRunAgainAfterATerm(t *testing.T) {
	st := open(t, storetest.Engines()[0].NewDSN(t))
	pol := testPolicy(t, "alice")
	clk := &clock{}
	t0 := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	clk.Set(t0)
	put(t, st, newSchedule("terms", "* * * * *"), t0)
	sch := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now})
	for term, tick := range []time.Time{t0.Add(30 * time.Second), t0.Add(90 * time.Second)} {
		clk.Set(tick.Add(time.Second))
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- sch.Run(ctx) }()
		sandboxtest.Eventually(t, 10*time.Second, fmt.Sprintf("the tick of term %d run", term+1), func(context.Context) error {
			for _, r := range runsOf(t, st, "terms") {
				if r.Tick.Equal(tick) {
					return nil
				}
			}
			return fmt.Errorf("no run of the tick %s in %v", tick.Format(time.TimeOnly), runsOf(t, st, "terms"))
		})
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
