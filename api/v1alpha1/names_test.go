package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

func TestGenerateName(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		name := GenerateName("report-")
		suffix, ok := strings.CutPrefix(name, "report-")
		if !ok || len(suffix) != 5 {
			t.Fatalf("%q is not the prefix and five characters", name)
		}
		if strings.Trim(suffix, generatedAlphabet) != "" {
			t.Fatalf("%q has characters outside %q", suffix, generatedAlphabet)
		}
		if msgs := content.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Fatalf("%q is not a valid name: %v", name, msgs)
		}
		seen[name] = true
	}
	// 27^5 possible suffixes: a hundred draws that mostly collide would mean
	// the randomness is broken, not unlucky.
	if len(seen) < 95 {
		t.Errorf("only %d distinct names in 100", len(seen))
	}
}

func TestSpecHash(t *testing.T) {
	spec := func(replicas any, extra ...string) RunnableSpec {
		tmpl := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": replicas}}
		for _, k := range extra {
			tmpl[k] = "x"
		}
		return RunnableSpec{Template: tmpl}
	}
	base := SpecHash(spec(int64(3), "a", "b", "c"))
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex sha256", base)
	}
	for range 20 { // map iteration order varies from run to run
		if got := SpecHash(spec(int64(3), "c", "b", "a")); got != base {
			t.Fatal("equal specs hash differently")
		}
	}
	if SpecHash(spec(float64(3), "a", "b", "c")) != base {
		t.Error("3 and 3.0 are the same JSON but hash differently")
	}
	if SpecHash(spec(int64(4), "a", "b", "c")) == base {
		t.Error("different specs hash alike")
	}
	if got := SpecHash(map[string]any{"bad": make(chan int)}); got != "" {
		t.Errorf("unencodable spec hashed to %q", got)
	}
}

func TestPhaseTerminal(t *testing.T) {
	terminal := map[Phase]bool{PhaseSucceeded: true, PhaseFailed: true, PhaseExpired: true, PhaseRejected: true, PhaseCancelled: true}
	for _, p := range []Phase{PhasePendingApproval, PhaseQueued, PhaseScheduled, PhaseSubmitted, PhaseRunning,
		PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseRejected, PhaseCancelled, PhaseFailingOver, PhaseActive} {
		if p.Terminal() != terminal[p] {
			t.Errorf("%s.Terminal() = %v", p, p.Terminal())
		}
	}
}
