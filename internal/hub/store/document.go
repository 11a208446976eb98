package store

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
}

// Author is a user as the API authenticated them.
type Author struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
}
