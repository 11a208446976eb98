package stream

import (
	"fmt"
	"time"
)

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

// AgentSettings is the value under a cluster's key in AgentSettingsBucket:
// what the hub asks of the cluster's agent, from the Cluster's spec. The
// agent watches its key and follows each change.
type AgentSettings struct {
	Cluster string `json:"cluster"`
	// Kinds are the kinds tracked on request (the Cluster's
	// spec.inventory.kinds: Pod, Event), beside the agent's own.
	Kinds []string `json:"kinds,omitempty"`
	// Generation is the Cluster's resourceVersion the settings are from.
	Generation int64 `json:"generation"`
}

// AgentSettingsSubject is the subject a message for cluster's key in
// AgentSettingsBucket is published on: a JetStream key-value bucket is the
// stream KV_<bucket>, whose subject $KV.<bucket>.<key> holds the key's
// values, so that a plain publish (the API's outbox) puts the value.
func AgentSettingsSubject(cluster string) string {
	return fmt.Sprintf("$KV.%s.%s", AgentSettingsBucket, cluster)
}
