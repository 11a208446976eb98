package submission

import (
	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/stream"
)

// CancelTransition is the one cancel of a runnable that has not ended:
// the API's DELETE, and a schedule's Replace of its active runs. It
// becomes Cancelled and the submitter removes it from its cluster; summary
// is the audit entry's.
func CancelTransition(actor, summary string) lifecycle.Transition {
	return lifecycle.Transition{
		To: v1alpha1.PhaseCancelled, By: lifecycle.ByAPI, Actor: actor,
		Message: "cancelled by " + actor, Enqueue: stream.SubmissionCancel,
		Audit: &audit.Entry{Action: "cancel", Summary: summary},
	}
}
