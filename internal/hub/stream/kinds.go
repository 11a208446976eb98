package stream

import "time"

// ServedKinds is the value under a cluster's key in KindsBucket: every
// kind the cluster's kube-apiserver serves, in its preferred version, and
// whether it is namespaced, as the agent's discovery found them. The
// ingester records it in the database, where the API reads a kind's
// scope: a cluster-scoped kind is a permission the policy must grant.
type ServedKinds struct {
	Cluster string `json:"cluster"`
	// Time is when the agent discovered them, by its own clock.
	Time  time.Time    `json:"time"`
	Kinds []ServedKind `json:"kinds"`
}

// ServedKind is one kind of ServedKinds, named as a GroupKind with the
// version discovery preferred.
type ServedKind struct {
	Group      string `json:"group,omitempty"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}
