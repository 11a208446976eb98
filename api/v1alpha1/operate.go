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

// Update is a user's change of the spec of a runnable that runs (PUT of a
// Submitted, Running or Suspended runnable whose kind takes a change in
// place): the submitter applies the new template to the current attempt's
// object by server-side apply. Applied once the attempt's generation
// (status.attempts[].generation) reaches Generation.
type Update struct {
	// Generation is the spec's generation the change made.
	Generation int64     `json:"generation"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	// Attempt is the attempt whose object takes it.
	Attempt int `json:"attempt"`
	// Error is why the cluster refused it, when it did; it is not tried
	// again until the spec changes again.
	Error string `json:"error,omitempty"`
}
