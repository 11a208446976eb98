package store

// Document is the JSON held in the spec column of runnables, deployables
// (and their pending change) and clusters: the object's spec with the
// user's metadata. Spec hashes cover Spec alone. Sealed parts (Secret
// values, kubeconfigs) are never in it; they have columns of their own.
type Document[S any] struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        S                 `json:"spec"`
}
