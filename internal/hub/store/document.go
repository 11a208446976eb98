package store

import "time"

// Document is the JSON held in the spec column of runnables, deployables
// (and their pending change) and clusters: the object's spec with the
// user's metadata. Spec hashes cover Spec alone. Sealed parts (Secret
// values, kubeconfigs) are never in it; they have columns of their own.
type Document[S any] struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        S                 `json:"spec"`
	// Author is who wrote Spec, as the API authenticated them, for
	// runnables and deployables: the submitter and the syncer check the
	// policy for them again before they act on a member cluster. Nil for
	// objects stored before it was recorded, and for clusters.
	Author *Author `json:"author,omitempty"`
	// Pending is a change of a runnable's spec (and metadata) that waits
	// for a second person's approval beside the live Spec, which alone
	// runs meanwhile; nil when none waits. A deployable keeps its pending
	// change in columns of its own, beside its sealed values.
	Pending *Document[S] `json:"pending,omitempty"`
	// At is when the document was written: for a pending change, when it
	// was proposed.
	At *time.Time `json:"at,omitempty"`
	// Approval is who approved Spec, where a second person had to, and as
	// which generation: a deployable's (a runnable's approval is in its
	// status, which a rerun needing a new one clears). Nil when the spec
	// went live without one.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is a second person's approval of a spec.
type Approval struct {
	By         string    `json:"by"`
	Generation int64     `json:"generation"`
	At         time.Time `json:"at"`
}

// Author is a user as the API authenticated them.
type Author struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
}
