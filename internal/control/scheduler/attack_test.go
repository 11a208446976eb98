package scheduler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestPrefixesOfOtherSchedules: the runs of "a" and of "a-b" share the
// prefix "a-", and a tenant of another namespace may name her runnables
// as the runs of "a", with its label. Fired in one page, each schedule
// lists its own runs, each once, and nothing of the other namespace's.
func TestPrefixesOfOtherSchedules(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			var clk clock
			start := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
			clk.Set(start)
			put(t, st, newSchedule("a", "* * * * *"), start)
			put(t, st, newSchedule("a-b", "* * * * *"), start)
			pol := testPolicy(t, "alice")
			sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now})
			// Hers, in team-b: named as a's next runs, labelled as a's.
			for i := range 3 {
				at := start.Add(time.Duration(i+1) * time.Minute).Truncate(time.Minute)
				doc, _ := json.Marshal(map[string]any{"labels": map[string]string{v1alpha1.LabelSchedule: "a", v1alpha1.LabelScheduledTime: v1alpha1.ScheduledTimeLabel(at)},
					"spec": map[string]any{"template": job()}})
				if err := st.Tx(t.Context(), func(tx *store.Tx) error {
					return tx.Runnables().Create(t.Context(), &store.Runnable{Namespace: "team-b", Name: v1alpha1.TickRunName("a", at), UID: "forged-" + at.Format("1504"),
						Generation: 1, Spec: doc, SpecHash: "h", Phase: string(v1alpha1.PhaseRunning), Submitter: "mallory"})
				}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				clk.Set(start.Add(time.Duration(i+1)*time.Minute - 29*time.Second))
				if _, err := sched.Pass(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range []string{"a", "a-b"} {
				st := statusOf(t, st, name)
				var got []string
				for _, r := range st.Active {
					got = append(got, r.Name)
				}
				seen := map[string]bool{}
				for _, r := range st.Active {
					if seen[r.Name] || !strings.HasPrefix(r.Name, name+"-") || strings.TrimPrefix(r.Name, name+"-") == "" ||
						strings.Contains(strings.TrimPrefix(r.Name, name+"-"), "-") {
						t.Errorf("%s lists %v as its active runs: each of its own once", name, got)
						break
					}
					seen[r.Name] = true
				}
				if len(st.Active) != 3 || len(st.LastRuns) != 3 {
					t.Errorf("%s: %d active runs and %d last runs, want 3 and 3: %v", name, len(st.Active), len(st.LastRuns), got)
				}
			}
			// team-b's runnables are as they were.
			if err := st.Read(t.Context(), func(tx *store.Tx) error {
				recs, err := tx.Runnables().ListByNamePrefixes(t.Context(), "team-b", []string{"a-"}, 100)
				if len(recs) != 3 {
					t.Errorf("team-b holds %d of her runnables, want 3", len(recs))
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
