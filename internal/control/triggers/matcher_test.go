package triggers_test

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/hub/store"
)

// TestMatcher: which ends are events of a trigger on ended runnables.
func TestMatcher(t *testing.T) {
	rec := func(phase v1alpha1.Phase, labels map[string]string) *store.Runnable {
		doc, _ := json.Marshal(store.Document[map[string]any]{Labels: labels})
		return &store.Runnable{Namespace: "team-a", Name: "r", UID: "u", Phase: string(phase), Spec: doc}
	}
	etl := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etl"}}
	own := map[string]string{"app": "etl", v1alpha1.LabelTrigger: "t", v1alpha1.LabelTriggerChain: "3"}
	for _, c := range []struct {
		name  string
		src   v1alpha1.RunnableEndedSource
		r     *store.Runnable
		fires bool
		chain int
	}{
		{"any end, any runnable", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseFailed, nil), true, 0},
		{"not ended", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseRunning, nil), false, 0},
		{"phase listed", v1alpha1.RunnableEndedSource{Phases: []v1alpha1.Phase{v1alpha1.PhaseSucceeded}}, rec(v1alpha1.PhaseSucceeded, nil), true, 0},
		{"phase not listed", v1alpha1.RunnableEndedSource{Phases: []v1alpha1.Phase{v1alpha1.PhaseSucceeded}}, rec(v1alpha1.PhaseCancelled, nil), false, 0},
		{"selector matches", v1alpha1.RunnableEndedSource{Selector: etl}, rec(v1alpha1.PhaseSucceeded, map[string]string{"app": "etl"}), true, 0},
		{"selector does not", v1alpha1.RunnableEndedSource{Selector: etl}, rec(v1alpha1.PhaseSucceeded, map[string]string{"app": "web"}), false, 0},
		{"own run", v1alpha1.RunnableEndedSource{Selector: etl}, rec(v1alpha1.PhaseSucceeded, own), false, 3},
		{"own run, included", v1alpha1.RunnableEndedSource{Selector: etl, IncludeOwnRuns: true}, rec(v1alpha1.PhaseSucceeded, own), true, 3},
		{"another trigger's run", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTrigger: "other", v1alpha1.LabelTriggerChain: "2"}), true, 2},
		{"chain at its bound", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTrigger: "other",
			v1alpha1.LabelTriggerChain: fmt.Sprint(v1alpha1.MaxTriggerChain)}), false, v1alpha1.MaxTriggerChain},
		// The label is any writer's: a count below zero (which would buy
		// hops past the bound) or no number starts a chain; past any int
		// is past the bound.
		{"chain minus one", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTriggerChain: "-1"}), true, 0},
		{"chain below zero", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTriggerChain: "-1000000"}), true, 0},
		{"chain at the least int", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTriggerChain: "-9223372036854775809"}), true, 0},
		{"chain no number", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTriggerChain: "x"}), true, 0},
		{"chain past any int", v1alpha1.RunnableEndedSource{}, rec(v1alpha1.PhaseSucceeded, map[string]string{v1alpha1.LabelTriggerChain: "99999999999999999999999"}), false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			match, err := triggers.Matcher("t", &c.src)
			if err != nil {
				t.Fatal(err)
			}
			fires, chain, err := match(c.r)
			if err != nil || fires != c.fires || (fires && chain != c.chain) {
				t.Fatalf("fires %v chain %d (%v), want %v chain %d", fires, chain, err, c.fires, c.chain)
			}
		})
	}
	// An end's identity: the runnable and its attempts, so that a rerun
	// that ends again is another event.
	r := rec(v1alpha1.PhaseSucceeded, nil)
	if triggers.EndEvent(r, 1, 0).ID == triggers.EndEvent(r, 2, 0).ID || triggers.EndEvent(r, 1, 0).ID != triggers.EndEvent(r, 1, 5).ID {
		t.Fatal("an end's identity is not its runnable and attempt")
	}
}
