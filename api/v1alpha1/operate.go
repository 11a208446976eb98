package v1alpha1

import "time"

// PhaseSuspended is the phase of a runnable whose running attempt a user
// suspended (POST .../suspend); its object stays on its cluster with the kind's own
// suspend field set. Failover leaves it alone (no toleration clock runs)
// and the ingester does not follow it; POST .../resume takes it back to
// Submitted.
const PhaseSuspended Phase = "Suspended"

// Suspension is a user's suspend or resume of the current attempt, kept
// in the status while the runnable is Suspended.
type Suspension struct {
	// Suspend is what was asked: true to suspend, false to resume.
	Suspend bool      `json:"suspend"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	// Attempt is the attempt whose object it acts on.
	Attempt int `json:"attempt"`
	// Applied: the kind's field on the cluster says what was asked.
	Applied bool `json:"applied,omitempty"`
	// Error is why the cluster refused the change, when it did.
	Error string `json:"error,omitempty"`
}
