package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// The phases of a Runnable, by where it stands. They are the one list of
// them: the lifecycle's table, list filters and Terminal read them here.
var (
	// WaitingPhases: accepted, not on a cluster yet.
	WaitingPhases = []Phase{PhasePendingApproval, PhaseQueued}
	// PlacedPhases: an attempt is on a cluster, or on its way there.
	PlacedPhases = []Phase{PhaseScheduled, PhaseSubmitted, PhaseRunning}
	// EndedPhases: no controller moves the runnable on from them.
	EndedPhases = []Phase{PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseRejected, PhaseCancelled}
	// RunnablePhases are every phase, in the order of a runnable's life:
	// what a list may be filtered by.
	RunnablePhases = slices.Concat(WaitingPhases, PlacedPhases, []Phase{PhaseSuspended, PhaseFailingOver}, EndedPhases)
)

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
