package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GroupVersion is the apiVersion of every purser object.
const GroupVersion = "purser.io/v1alpha1"

// Kinds of purser objects.
const (
	KindRunnable   = "Runnable"
	KindDeployable = "Deployable"
	KindCluster    = "Cluster"
)

// TypeMeta says what an object is, as in Kubernetes.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the subset of Kubernetes object metadata that purser keeps.
// UID, Generation, ResourceVersion and CreationTimestamp belong to the
// server: whatever a client sends there is overwritten.
type ObjectMeta struct {
	Name         string `json:"name,omitempty"`
	GenerateName string `json:"generateName,omitempty"`
	// Namespace is also the namespace on the member cluster; Clusters have
	// none.
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp time.Time         `json:"creationTimestamp,omitzero"`
}

// Phase is where a Runnable is in its life, or whether a Deployable is live.
type Phase string

// Phases of a Runnable, and of a Deployable (Active, PendingApproval).
const (
	PhasePendingApproval Phase = "PendingApproval"
	PhaseQueued          Phase = "Queued"
	PhaseScheduled       Phase = "Scheduled"
	PhaseSubmitted       Phase = "Submitted"
	PhaseRunning         Phase = "Running"
	PhaseSucceeded       Phase = "Succeeded"
	PhaseFailed          Phase = "Failed"
	PhaseExpired         Phase = "Expired"
	PhaseRejected        Phase = "Rejected"
	PhaseCancelled       Phase = "Cancelled"
	PhaseFailingOver     Phase = "FailingOver"
	// PhaseActive is used by Deployables only: approved and being synced.
	PhaseActive Phase = "Active"
)

// Terminal reports whether no controller will move the object on from p, so
// that its record can be settled (cluster copy removed, attempts closed).
func (p Phase) Terminal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseRejected, PhaseCancelled:
		return true
	}
	return false
}

// Health is purser's judgement of an object on a member cluster.
type Health string

// Health values.
const (
	HealthHealthy   Health = "Healthy"
	HealthUnhealthy Health = "Unhealthy"
	HealthUnknown   Health = "Unknown"
)

// Runnable is one Kubernetes object to run once, on one cluster at a time,
// moved to another cluster when its cluster or the object itself fails.
type Runnable struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta     `json:"metadata"`
	Spec     RunnableSpec   `json:"spec"`
	Status   RunnableStatus `json:"status,omitzero"`
}

// RunnableSpec is what the user asks for.
type RunnableSpec struct {
	// Template is the Kubernetes object to create, of any kind, kept as
	// decoded JSON: whole numbers are int64 and other numbers float64, the
	// same content that unstructured.Unstructured.Object holds.
	Template  map[string]any `json:"template,omitempty"`
	Placement Placement      `json:"placement,omitzero"`
	// Deadline is when the Runnable stops being worth submitting; it is
	// never submitted after it.
	Deadline *time.Time `json:"deadline,omitempty"`
	Failover *Failover  `json:"failover,omitempty"`
}

// Placement says which clusters may receive an object.
type Placement struct {
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`
	// ClusterTolerations let the object go to clusters with matching taints.
	ClusterTolerations []corev1.Toleration `json:"clusterTolerations,omitempty"`
}

// ClusterAffinity narrows the candidate clusters. All set fields must match.
type ClusterAffinity struct {
	ClusterNames  []string              `json:"clusterNames,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	Exclude       []string              `json:"exclude,omitempty"`
}

// Purge modes: what happens to the copy on the cluster being left.
const (
	// PurgeDirectly removes the old copy before the next attempt starts.
	PurgeDirectly = "Directly"
	// PurgeGracefully removes the old copy after the next one is healthy or
	// GracePeriodSeconds have passed.
	PurgeGracefully = "Gracefully"
	// PurgeNever leaves the old copy for someone else to remove.
	PurgeNever = "Never"
)

// Consistency values: how many copies may be alive during a failover.
const (
	ConsistencyAtMostOne  = "AtMostOne"
	ConsistencyAtLeastOne = "AtLeastOne"
)

// Failover says when and how a Runnable moves to another cluster.
type Failover struct {
	// Application is failover because the object itself is unhealthy.
	Application *ApplicationFailover `json:"application,omitempty"`
	// Cluster is failover because its cluster is lost or tainted.
	Cluster     *ClusterFailover `json:"cluster,omitempty"`
	Consistency string           `json:"consistency,omitempty"`
	// Mutations rewrite the template of the next attempt from the state
	// preserved from the previous one.
	Mutations []Mutation `json:"mutations,omitempty"`
}

// ApplicationFailover reacts to an unhealthy object.
type ApplicationFailover struct {
	// TolerationSeconds is how long the object may stay unhealthy before it
	// is moved.
	TolerationSeconds  *int64             `json:"tolerationSeconds,omitempty"`
	PurgeMode          string             `json:"purgeMode,omitempty"`
	GracePeriodSeconds *int64             `json:"gracePeriodSeconds,omitempty"`
	StatePreservation  *StatePreservation `json:"statePreservation,omitempty"`
}

// ClusterFailover reacts to a lost cluster.
type ClusterFailover struct {
	PurgeMode string `json:"purgeMode,omitempty"`
}

// StatePreservation copies values out of the failed object's status, so that
// the next attempt can resume where the last one stopped.
type StatePreservation struct {
	Rules []StatePreservationRule `json:"rules,omitempty"`
}

// StatePreservationRule reads JSONPath from the object's .status and keeps
// the result in status.preserved under AliasLabelName.
type StatePreservationRule struct {
	AliasLabelName string `json:"aliasLabelName"`
	JSONPath       string `json:"jsonPath"`
}

// Mutation sets Path in the next attempt's template to the CEL expression
// Value when the CEL expression When is true. Both see `preserved`, a
// map(string, string) of the preserved state.
type Mutation struct {
	When string `json:"when"`
	// Path is a dotted path of map keys into the template, such as
	// spec.job.initialSavepointPath.
	Path  string `json:"path"`
	Value string `json:"value"`
}

// RunnableStatus is what purser observed and decided; clients never set it.
type RunnableStatus struct {
	Phase   Phase  `json:"phase,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	Health  Health `json:"health,omitempty"`
	// UnhealthySince is when the current attempt's object was first seen
	// Unhealthy without a Healthy observation since: the clock of
	// spec.failover.application.tolerationSeconds, kept with the runnable
	// so that it survives restarts of the controller.
	UnhealthySince *time.Time `json:"unhealthySince,omitempty"`
	Message        string     `json:"message,omitempty"`
	// Fenced: the current attempt's object was suspended by its cluster's
	// agent when the agent's lease expired; the controller resumes it once
	// the cluster is Ready again and the runnable was not moved.
	Fenced    bool              `json:"fenced,omitempty"`
	Preserved map[string]string `json:"preserved,omitempty"`
	Attempts  []Attempt         `json:"attempts,omitempty"`
	// Result is the last observed status of the object, kept after the
	// cluster deletes it. Same number rules as RunnableSpec.Template.
	Result      map[string]any `json:"result,omitempty"`
	SubmittedBy string         `json:"submittedBy,omitempty"`
	ApprovedBy  string         `json:"approvedBy,omitempty"`
	// PendingChange is the runnable as it waits for approval (phase
	// PendingApproval); filled by the API, never stored.
	PendingChange *PendingChange[RunnableSpec] `json:"pendingChange,omitempty"`
}

// PendingChange is a change that waits for a second person, as the API
// shows it to the approver: approve and reject name its ResourceVersion
// (?resourceVersion=) and are refused with 409 when the change moved since,
// so that a decision binds to what was reviewed.
type PendingChange[S any] struct {
	ResourceVersion string `json:"resourceVersion"`
	// Spec is what becomes live once approved, Secret values omitted; nil
	// when the change is a deletion.
	Spec *S `json:"spec,omitempty"`
	// Delete: the change removes the object from every cluster.
	Delete bool `json:"delete,omitempty"`
	// Revive: the change brings back an object deleted but not yet
	// removed from every cluster.
	Revive bool      `json:"revive,omitempty"`
	Author string    `json:"author"`
	Time   time.Time `json:"time"`
}

// Attempt is one placement of a Runnable on one cluster.
type Attempt struct {
	Number  int    `json:"number"`
	Cluster string `json:"cluster,omitempty"`
	// UID is the object's uid on the member cluster.
	UID       string     `json:"uid,omitempty"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	Result    string     `json:"result,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Message   string     `json:"message,omitempty"`
	// Cleanup says whether the object an ended attempt may have left on
	// its cluster is still to be removed (Pending) or gone (Done).
	Cleanup string `json:"cleanup,omitempty"`
}

// Deployable is one Kubernetes object kept identical on every matching
// cluster.
type Deployable struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     DeployableSpec   `json:"spec"`
	Status   DeployableStatus `json:"status,omitzero"`
}

// DeployableSpec is what the user asks for.
type DeployableSpec struct {
	// Template follows the rules of RunnableSpec.Template.
	Template  map[string]any `json:"template,omitempty"`
	Placement Placement      `json:"placement,omitzero"`
}

// SyncState is how a cluster's copy of a Deployable compares with its spec.
type SyncState string

// Sync states.
const (
	StateSynced    SyncState = "Synced"
	StateOutOfSync SyncState = "OutOfSync"
	StateError     SyncState = "Error"
)

// DeployableStatus is what the syncer observed.
type DeployableStatus struct {
	Generation int64                     `json:"generation,omitempty"`
	Clusters   []DeployableClusterStatus `json:"clusters,omitempty"`
	// Phase is PhaseActive or PhasePendingApproval.
	Phase Phase `json:"phase,omitempty"`
	// PendingChange is the change waiting for approval, beside the live
	// spec.
	PendingChange *PendingChange[DeployableSpec] `json:"pendingChange,omitempty"`
}

// DeployableClusterStatus is the state of one cluster's copy.
type DeployableClusterStatus struct {
	Cluster          string     `json:"cluster"`
	State            SyncState  `json:"state,omitempty"`
	SyncedGeneration int64      `json:"syncedGeneration,omitempty"`
	LastSyncedAt     *time.Time `json:"lastSyncedAt,omitempty"`
	Message          string     `json:"message,omitempty"`
}

// Cluster is a member Kubernetes cluster.
type Cluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     ClusterSpec   `json:"spec"`
	Status   ClusterStatus `json:"status,omitzero"`
}

// ClusterSpec is what the operator registers.
type ClusterSpec struct {
	// Kubeconfig is the kubeconfig text purser uses to reach the cluster.
	// It is stored encrypted and never returned, so an update may leave it
	// empty to keep the stored one.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Taints keep Runnables and Deployables away unless they tolerate them.
	Taints []corev1.Taint `json:"taints,omitempty"`
}

// ConditionReady is the condition type that says the cluster is reachable
// and its agent is reporting.
const ConditionReady = "Ready"

// ClusterStatus is what purser observed of the cluster.
type ClusterStatus struct {
	Conditions []Condition `json:"conditions,omitempty"`
	// Taints are added by purser from the conditions, beside spec.taints.
	Taints    []corev1.Taint   `json:"taints,omitempty"`
	Agent     *AgentStatus     `json:"agent,omitempty"`
	Inventory *InventoryStatus `json:"inventory,omitempty"`
}

// Condition is a metav1.Condition without observedGeneration, which purser
// has no use for.
type Condition struct {
	Type               string                 `json:"type"`
	Status             metav1.ConditionStatus `json:"status"`
	LastTransitionTime time.Time              `json:"lastTransitionTime,omitzero"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
}

// AgentStatus tells how fresh the cluster's agent reports are.
type AgentStatus struct {
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	LastSnapshot  *time.Time `json:"lastSnapshot,omitempty"`
	LastEvent     *time.Time `json:"lastEvent,omitempty"`
}

// InventoryStatus summarises the cluster's rows in the inventory.
type InventoryStatus struct {
	Objects int64 `json:"objects"`
}
