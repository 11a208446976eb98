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

// TestReviewedAheadKindNowClusterScoped: a schedule's template of a kind
// the clusters report as namespaced is reviewed ahead of its tick; then a
// cluster reports the kind cluster-scoped (a CRD made again so). The tick
// is decided by what the clusters report then: refused, as a runnable of
// a cluster-scoped kind is for a tenant, and its runnable not created.
func TestReviewedAheadKindNowClusterScoped(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			ctx := t.Context()
			report := func(at time.Time, namespaced bool) {
				t.Helper()
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					return tx.Kinds().Replace(ctx, "dc1", at, []store.ServedKind{{Group: "example.com", Version: "v1", Kind: "Widget", Namespaced: namespaced}})
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				return tx.Clusters().Create(ctx, &store.Cluster{Name: "dc1", Spec: []byte("{}")})
			}); err != nil {
				t.Fatal(err)
			}
			var clk clock
			tick := time.Date(2026, 12, 7, 10, 1, 0, 0, time.UTC)
			clk.Set(tick.Add(-30 * time.Second))
			report(clk.Now(), true)
			w := newSchedule("widgets", "* * * * *")
			w.Spec.Template.Template = map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{"size": "1"}}
			put(t, st, w, clk.Now())
			pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
				"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}, Kinds: policy.KindRules{Opaque: []string{"Widget.example.com"}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now})

			// Without the change, the review ahead is used and runs.
			clk.Set(tick.Add(-3 * time.Second))
			sched.PrepareAhead(ctx, tick)
			clk.Set(tick.Add(time.Second))
			if _, err := sched.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if runs := runsOf(t, st, "widgets"); len(runs) != 1 || sched.ReviewedAhead() != 1 {
				t.Fatalf("widgets: %d runs, %d reviewed ahead, want 1 and 1: %q", len(runs), sched.ReviewedAhead(), statusOf(t, st, "widgets").Message)
			}
			tick = tick.Add(time.Minute)
			clk.Set(tick.Add(-3 * time.Second))
			sched.PrepareAhead(ctx, tick)
			// A pass between the review and the change (a schedule
			// written wakes it) does not stand for the tick's.
			clk.Set(tick.Add(-2 * time.Second))
			if _, err := sched.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			report(clk.Now(), false)
			clk.Set(tick.Add(time.Second))
			if _, err := sched.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if runs := runsOf(t, st, "widgets"); len(runs) != 1 {
				t.Fatalf("widgets: %d runs, want still 1: none of a kind now cluster-scoped", len(runs))
			}
			if msg := statusOf(t, st, "widgets").Message; !strings.Contains(msg, "cluster-scoped") {
				t.Errorf("widgets: status message %q, want the tick's refusal", msg)
			}
		})
	}
}
