package stream

import (
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Heartbeat is the value an agent puts under its cluster's key in
// HeartbeatsBucket.
type Heartbeat struct {
	Cluster string `json:"cluster"`
	// Identity names the agent replica that sent it: the leader, when
	// several run.
	Identity string `json:"identity,omitempty"`
	// Time is when the agent sent it, by its own clock.
	Time time.Time `json:"time"`
	// Started is when this replica's current term of work began.
	Started time.Time `json:"started"`
	// LeaseSeconds is the agent's lease duration: this long after its last
	// acknowledged heartbeat it fences its cluster, suspending or deleting
	// the objects labelled purser.io/consistency=AtMostOne. The control
	// plane must not place them elsewhere sooner.
	LeaseSeconds float64 `json:"leaseSeconds,omitempty"`
	// Fenced counts the objects this replica suspended or deleted when
	// its lease had expired.
	Fenced int64 `json:"fenced,omitempty"`
	// Objects counts cached objects per "apiVersion/kind" being watched.
	Objects map[string]int `json:"objects"`
	// Pending is the number of events waiting to be published.
	Pending int `json:"pending"`
	// Resyncs counts full resyncs after the queue overflowed.
	Resyncs      int64     `json:"resyncs"`
	LastSnapshot time.Time `json:"lastSnapshot,omitzero"`
	// KubeAPI says whether the caches are synced and the kube-apiserver
	// answered the probe sent just before this beat; absent from agents
	// that predate it.
	KubeAPI *v1alpha1.AgentKubeAPI `json:"kubeAPI,omitempty"`
}
