package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// RunnablePhases are the phases a Runnable can be in, in the order of its
// life: what a list may be filtered by.
var RunnablePhases = []Phase{
	PhasePendingApproval, PhaseQueued, PhaseScheduled, PhaseSubmitted, PhaseRunning, PhaseFailingOver,
	PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseRejected, PhaseCancelled,
}

// ParseRunnablePhase checks a phase a user typed; the error lists the
// valid ones, so that a typo does not read as "nothing in that phase".
func ParseRunnablePhase(s string) (Phase, error) {
	if slices.Contains(RunnablePhases, Phase(s)) {
		return Phase(s), nil
	}
	names := make([]string, len(RunnablePhases))
	for i, p := range RunnablePhases {
		names[i] = string(p)
	}
	return "", fmt.Errorf("%q is not a phase of a Runnable; the phases are %s", s, strings.Join(names, ", "))
}
