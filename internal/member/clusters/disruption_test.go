package clusters

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

func TestDisruptionJudge(t *testing.T) {
	m := func(name, zone string, ready bool) Member { return Member{Name: name, Zone: zone, Ready: ready} }
	tests := []struct {
		name    string
		members []Member
		zones   map[string]string // zone -> reason
		halted  bool
	}{
		{
			name:    "all Ready",
			members: []Member{m("a", "dc-1", true), m("b", "dc-2", true), m("c", "dc-3", true)},
			zones:   map[string]string{"dc-1": ReasonNoDisruption, "dc-2": ReasonNoDisruption, "dc-3": ReasonNoDisruption},
		},
		{
			// A whole DC lost at once: its evictions are slowed, the
			// farm (a third) goes on.
			name:    "one DC of three lost",
			members: []Member{m("a", "dc-1", false), m("b", "dc-2", true), m("c", "dc-3", true)},
			zones:   map[string]string{"dc-1": ReasonFullDisruption, "dc-2": ReasonNoDisruption, "dc-3": ReasonNoDisruption},
		},
		{
			name: "more than the zone threshold of a DC",
			members: []Member{m("a1", "dc-1", false), m("a2", "dc-1", false), m("a3", "dc-1", true),
				m("b", "dc-2", true), m("c", "dc-3", true), m("d", "dc-3", true)},
			zones: map[string]string{"dc-1": ReasonPartialDisruption, "dc-2": ReasonNoDisruption, "dc-3": ReasonNoDisruption},
		},
		{
			name:    "half a DC is below the threshold",
			members: []Member{m("a1", "dc-1", false), m("a2", "dc-1", true), m("b", "dc-2", true)},
			zones:   map[string]string{"dc-1": ReasonNoDisruption, "dc-2": ReasonNoDisruption},
		},
		{
			// Two DCs of three: more than the farm threshold: stop.
			name:    "two DCs of three lost",
			members: []Member{m("a", "dc-1", false), m("b", "dc-2", false), m("c", "dc-3", true)},
			zones:   map[string]string{"dc-1": ReasonFullDisruption, "dc-2": ReasonFullDisruption, "dc-3": ReasonNoDisruption},
			halted:  true,
		},
		{
			// As Kubernetes' master disruption mode.
			name:    "every zone fully disrupted",
			members: []Member{m("a", "", false), m("b", "", false)},
			zones:   map[string]string{"": ReasonFullDisruption},
			halted:  true,
		},
		{
			name:    "one of two clusters without zones",
			members: []Member{m("a", "", false), m("b", "", true)},
			zones:   map[string]string{"": ReasonNoDisruption},
		},
		{name: "no clusters", zones: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DisruptionPolicy{}.Judge(tt.members)
			if d.Halted != tt.halted {
				t.Errorf("halted %v, want %v (%s)", d.Halted, tt.halted, d.Reason)
			}
			if len(d.Zones) != len(tt.zones) {
				t.Errorf("zones %v, want %v", d.Zones, tt.zones)
			}
			for zone, want := range tt.zones {
				if got := d.Zones[zone].Reason; got != want {
					t.Errorf("zone %q: %s, want %s", zone, got, want)
				}
			}
		})
	}
}

func TestDisruptionCondition(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := DisruptionPolicy{}
	lost := p.Judge([]Member{{Name: "a", Zone: "dc-1"}, {Name: "b", Zone: "dc-2", Ready: true}, {Name: "c", Zone: "dc-3", Ready: true}})
	c := lost.Condition("dc-1", nil, now)
	if c.Type != v1alpha1.ConditionDisrupted || c.Status != metav1.ConditionTrue || c.Reason != ReasonFullDisruption ||
		c.Message != "no cluster of DC dc-1 is Ready (1 of 1); evictions from it are slowed" {
		t.Errorf("lost DC: %+v", c)
	}
	if c := lost.Condition("dc-2", nil, now); c.Status != metav1.ConditionFalse || c.Reason != ReasonNoDisruption {
		t.Errorf("healthy DC: %+v", c)
	}
	// The time stays while the reason does.
	later := lost.Condition("dc-1", &c, now.Add(time.Minute))
	if !later.LastTransitionTime.Equal(now) {
		t.Errorf("same reason, time moved: %v", later.LastTransitionTime)
	}
	halted := p.Judge([]Member{{Name: "a", Zone: "dc-1"}, {Name: "b", Zone: "dc-2"}, {Name: "c", Zone: "dc-3", Ready: true}})
	h := halted.Condition("dc-3", &c, now.Add(time.Minute))
	if h.Reason != ReasonFarmDisruption || h.Status != metav1.ConditionTrue || !h.LastTransitionTime.Equal(now.Add(time.Minute)) ||
		h.Message != "2 of 3 clusters of the farm are not Ready, at least the threshold of 55%; evictions are stopped everywhere until fewer are" {
		t.Errorf("halted: %+v", h)
	}
}
