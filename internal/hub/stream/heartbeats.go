package stream

import (
	"time"

	corev1 "k8s.io/api/core/v1"

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
	// Capacity is what the cluster has free, from the agent's caches of
	// its Nodes and Pods; absent until those caches are synced, and from
	// agents that predate it.
	Capacity *Capacity `json:"capacity,omitempty"`
	// HubLease is what the agent last saw of the hub's Lease in its
	// cluster (purser-system/purser-hub), its second path to the hub
	// beside the stream: absent before its first read, and from agents
	// that predate it.
	HubLease *HubLeaseSeen `json:"hubLease,omitempty"`
}

// HubLeaseSeen is what an agent saw of the hub's renewals of its Lease in
// the agent's cluster. The agent's own lease holds while either the
// stream acknowledged a heartbeat or the hub renewed that Lease within
// LeaseSeconds; it fences only when both are older.
type HubLeaseSeen struct {
	// Renewing: a renewal was seen within the lease.
	Renewing bool `json:"renewing"`
	// SecondsSinceRenewal is how long ago, by the agent's monotonic
	// clock, it last saw the Lease change; absent when it never did in
	// this term.
	SecondsSinceRenewal *float64 `json:"secondsSinceRenewal,omitempty"`
	// Error is why the last read failed (the Lease missing, a refusal).
	Error string `json:"error,omitempty"`
}

// Capacity is a cluster's free capacity as its agent computes it: the
// aggregate, never one entry per pod. Resource names and quantities as
// in Kubernetes (cpu, memory, pods, ephemeral-storage, nvidia.com/gpu).
type Capacity struct {
	// Allocatable sums the allocatable of the nodes that can take pods:
	// Ready, not cordoned, and with no NoSchedule or NoExecute taint.
	Allocatable corev1.ResourceList `json:"allocatable"`
	// Free is Allocatable less what the cluster's non-terminal pods
	// request (by Kubernetes' pod rule, and one "pods" each): those bound
	// to the nodes counted, and those not bound to any node yet, which
	// will take their share somewhere. Never below zero.
	Free corev1.ResourceList `json:"free"`
	// NodeMax is, per resource, the most free on any one of those nodes:
	// a pod asking for more fits no node.
	NodeMax corev1.ResourceList `json:"nodeMax,omitempty"`
	// Nodes counts the nodes that can take pods, of NodesTotal.
	Nodes      int `json:"nodes"`
	NodesTotal int `json:"nodesTotal"`
	// Pods counts the non-terminal pods subtracted.
	Pods int `json:"pods"`
	// Runnables is what Free counts of the pods of purser's runnables
	// (their requests, and how many pods); nil from an agent that does
	// not say. When it is there, the submitter counts those runnables
	// once, from its own sums whatever their pods' state, instead of
	// guessing by time which of them the report has counted already.
	Runnables *RunnablePods `json:"runnables,omitempty"`
}

// RunnablePods is what a capacity report counts of purser's runnables.
type RunnablePods struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
	Pods     int                 `json:"pods"`
}
