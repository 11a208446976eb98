package stream

// Submission is the message on SubjectSubmissions. It is only a hint that
// a runnable needs looking at: the submitter re-reads the runnable from
// the database and acts on what it finds there.
type Submission struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Event     string `json:"event"`
}

// Submission events.
const (
	// SubmissionSubmit: the runnable was accepted (or approved) and waits
	// for a cluster.
	SubmissionSubmit = "submit"
	// SubmissionCancel: the runnable was cancelled and must leave its
	// cluster.
	SubmissionCancel = "cancel"
)

// ID is the message id that deduplicates re-publishing of the same event.
func (s Submission) ID() string { return s.UID + "/" + s.Event }
