package v1alpha1

import "time"

// Move is a planned move of a runnable to another cluster (POST
// .../move, purser move, purser drain), kept in the status from the
// request until it is done or has failed; the next move replaces it.
type Move struct {
	// From is the cluster the runnable ran on when the move was asked,
	// To the cluster it moves to (chosen by placement when the request
	// named none).
	From string    `json:"from"`
	To   string    `json:"to"`
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	// Attempt is the attempt being moved; the next one runs on To.
	Attempt int `json:"attempt"`
	// Step is how far the move got (Move* steps).
	Step string `json:"step"`
	// Savepoint is the location of the savepoint the operator reported
	// when it stopped the job (a FlinkDeployment); the copy on To
	// restores from exactly it. SavepointBefore is the upgrade savepoint
	// the source's status showed when the savepoint was asked, so that an
	// older one is never taken for it.
	Savepoint       string `json:"savepoint,omitempty"`
	SavepointBefore string `json:"savepointBefore,omitempty"`
	// SavepointAskedAt is when the job was asked to stop with a
	// savepoint; StoppedAt when the job stopped on From (the savepoint's
	// time as the operator reported it); RunningAt when the copy was
	// first seen running on To. Downtime is RunningAt - StoppedAt, in
	// seconds.
	SavepointAskedAt *time.Time `json:"savepointAskedAt,omitempty"`
	StoppedAt        *time.Time `json:"stoppedAt,omitempty"`
	RunningAt        *time.Time `json:"runningAt,omitempty"`
	DowntimeSeconds  *float64   `json:"downtimeSeconds,omitempty"`
	// OldCopyRemoved: the copy of Attempt is gone from From.
	OldCopyRemoved bool `json:"oldCopyRemoved,omitempty"`
	// Error says why the move failed (step MoveFailed).
	Error string `json:"error,omitempty"`
}

// Steps of a Move.
const (
	// MoveAsked: accepted; the controller starts it at its next pass.
	MoveAsked = "Asked"
	// MoveSavepointAsked: the job on From was asked to stop with a
	// savepoint (spec.job.state suspended, upgradeMode savepoint); purser
	// waits for the operator to report the savepoint's location.
	MoveSavepointAsked = "SavepointAsked"
	// MoveCopyStarting: the attempt on From ended (for a FlinkDeployment
	// once the job stopped with a savepoint; for other kinds once the old
	// copy is gone); the next attempt is being placed on To.
	MoveCopyStarting = "CopyStarting"
	// MoveDone: the copy runs on To; the old copy is removed.
	MoveDone = "Done"
	// MoveFailed: the move did not happen and the runnable runs on
	// where it was; Error says why.
	MoveFailed = "Failed"
)

// Active reports whether the move is still under way.
func (m *Move) Active() bool {
	return m != nil && m.Step != MoveDone && m.Step != MoveFailed
}

// MoveRequest is the body of POST /api/v1/runnables/{ns}/{name}/move.
type MoveRequest struct {
	// To is the target cluster; "" lets placement choose among the
	// eligible clusters other than the current one.
	To string `json:"to,omitempty"`
}

// ReasonPlannedMove ends an attempt that a planned move took away from
// its cluster.
const ReasonPlannedMove = "PlannedMove"
