package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEventRunName: an event's run is named by the event alone, the same
// each time, a valid label at the longest trigger name, and different
// for different events (an attempt's end, a generation, a key).
func TestEventRunName(t *testing.T) {
	longest := strings.Repeat("t", MaxTriggerNameLength)
	events := []string{
		RunnableEndedEvent("uid-1", 1), RunnableEndedEvent("uid-1", 2), RunnableEndedEvent("uid-2", 1),
		DeployableRolledOutEvent("uid-1", 1), DeployableRolledOutEvent("uid-1", 2),
		WebhookEvent("trig-1", "k"), WebhookEvent("trig-2", "k"), WebhookEvent("trig-1", "k2"),
	}
	seen := map[string]string{}
	for _, ev := range events {
		name := EventRunName(longest, ev)
		if name != EventRunName(longest, ev) {
			t.Fatalf("%s: the name is not the same twice", ev)
		}
		if errs := content.IsDNS1123Label(name); len(errs) > 0 || len(name) > 63 {
			t.Errorf("%s: %q is not a valid Job name: %v", ev, name, errs)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%s and %s share the run %s", ev, other, name)
		}
		seen[name] = ev
	}
	if EventRunName("a", "x") == EventRunName("b", "x") {
		t.Error("two triggers' runs of one event share a name")
	}
}

func TestValidateTrigger(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}}
	mk := func(name string, src TriggerSource) *Trigger {
		tr := &Trigger{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindTrigger}, Metadata: ObjectMeta{Name: name, Namespace: "team-a"},
			Spec: TriggerSpec{Source: src, Template: RunnableSpec{Template: job}}}
		tr.SetDefaults()
		return tr
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etl"}}
	for _, c := range []struct {
		name  string
		tr    *Trigger
		field string // "" when valid
	}{
		{"webhook", mk("hook", TriggerSource{Webhook: &WebhookSource{}}), ""},
		{"ended", mk("after", TriggerSource{RunnableEnded: &RunnableEndedSource{Phases: []Phase{PhaseSucceeded}, Selector: sel}}), ""},
		{"rolled out", mk("after", TriggerSource{DeployableRolledOut: &DeployableRolledOutSource{Name: "web"}}), ""},
		{"no source", mk("x", TriggerSource{}), "spec.source"},
		{"two sources", mk("x", TriggerSource{Webhook: &WebhookSource{}, DeployableRolledOut: &DeployableRolledOutSource{Name: "web"}}), "spec.source"},
		{"phase", mk("x", TriggerSource{RunnableEnded: &RunnableEndedSource{Phases: []Phase{PhaseRunning}}}), "spec.source.runnableEnded.phases[0]"},
		{"own runs without selector", mk("x", TriggerSource{RunnableEnded: &RunnableEndedSource{IncludeOwnRuns: true}}), "spec.source.runnableEnded.includeOwnRuns"},
		{"deployable without name", mk("x", TriggerSource{DeployableRolledOut: &DeployableRolledOutSource{}}), "spec.source.deployableRolledOut"},
		{"name too long", mk(strings.Repeat("n", MaxTriggerNameLength+1), TriggerSource{Webhook: &WebhookSource{}}), "metadata.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := ValidateTrigger(c.tr, now)
			if c.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == c.field {
					return
				}
			}
			t.Fatalf("want a problem of %s, got %v", c.field, errs)
		})
	}
}
