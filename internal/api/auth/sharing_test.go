package auth

import "testing"

func TestSharing(t *testing.T) {
	p, err := NewPolicy(PolicyFile{
		PriorityClasses: map[string]int32{"urgent": 1000},
		Namespaces: map[string]NamespacePolicy{
			"big": {FairShareWeight: 3},
			"*":   {FairShareWeight: 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.PriorityClass("urgent"); !ok || v != 1000 {
		t.Errorf("urgent: %d %v", v, ok)
	}
	if _, ok := p.PriorityClass("nope"); ok {
		t.Error("an undefined class resolves")
	}
	if p.FairShareWeight("big") != 3 || p.FairShareWeight("other") != 2 {
		t.Errorf("weights %v %v", p.FairShareWeight("big"), p.FairShareWeight("other"))
	}
	if _, err := NewPolicy(PolicyFile{Namespaces: map[string]NamespacePolicy{"a": {FairShareWeight: -1}}}); err == nil {
		t.Error("a negative weight is accepted")
	}
}
