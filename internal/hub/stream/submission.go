package stream

import "fmt"

// Submission is the message on SubjectSubmissions. It is only a hint that
// a runnable needs looking at: the submitter re-reads the runnable from
// the database and acts on what it finds there.
type Submission struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Event     string `json:"event"`
	// Attempt is the attempt a failover ended; it tells one failover's
	// message from the next.
	Attempt int `json:"attempt,omitempty"`
	// Generation is the spec generation an update carries to the running
	// attempt; it tells one update of an attempt from the next.
	Generation int64 `json:"generation,omitempty"`
}

// Submission events.
const (
	// SubmissionSubmit: the runnable was accepted (or approved) and waits
	// for a cluster.
	SubmissionSubmit = "submit"
	// SubmissionCancel: the runnable was cancelled and must leave its
	// cluster.
	SubmissionCancel = "cancel"
	// SubmissionFailover: the runnable's attempt was evicted and it waits
	// for another cluster.
	SubmissionFailover = "failover"
	// SubmissionSuspend and SubmissionResume: a user suspended or resumed
	// the runnable, and its object's suspend field must follow.
	SubmissionSuspend = "suspend"
	SubmissionResume  = "resume"
	// SubmissionFailed: the runnable's attempt was seen failed, and
	// spec.retry (or its defaults) may give it another.
	SubmissionFailed = "failed"
	// SubmissionUpdate: a user changed the spec of a runnable that runs,
	// and its attempt's object must take it in place.
	SubmissionUpdate = "update"
)

// ID is the message id that deduplicates re-publishing of the same event.
func (s Submission) ID() string {
	if s.Generation > 0 {
		return fmt.Sprintf("%s/%s/%d/%d", s.UID, s.Event, s.Attempt, s.Generation)
	}
	if s.Attempt > 0 {
		return fmt.Sprintf("%s/%s/%d", s.UID, s.Event, s.Attempt)
	}
	return s.UID + "/" + s.Event
}
