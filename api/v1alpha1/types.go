package v1alpha1

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
func (p Phase) Terminal() bool { return slices.Contains(EndedPhases, p) }

// Health is purser's judgement of an object on a member cluster.
type Health string

// Health values.
const (
	HealthHealthy   Health = "Healthy"
	HealthUnhealthy Health = "Unhealthy"
	HealthUnknown   Health = "Unknown"
)

// ObjectUnobserved is the phase of an object on its cluster (an
// inventory item's phase) whose controller, an operator, has written no
// status yet. Its health is Unknown, since nothing is known of it; a
// runnable's application failover counts its toleration from it as from
// Unhealthy, because a controller that never acts is a fault of the
// cluster that another cluster fixes.
const ObjectUnobserved = "Unobserved"

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
	// Retry says which failures of an attempt are retried (retry.go).
	Retry *RetrySpec `json:"retry,omitempty"`
	// TTLSecondsAfterFinished removes the Runnable, and what its attempts
	// left on their clusters, that long after it ended (as a Job's field
	// of the same name); its history stays in the audit log. Unset: the
	// namespace's default from the policy file, else kept for good.
	TTLSecondsAfterFinished *int64 `json:"ttlSecondsAfterFinished,omitempty"`
	// Resources declares what the runnable asks for in all (resource name
	// -> Kubernetes quantity): for a kind whose pods purser cannot read
	// from the template, all it asks for; for one whose pods it reads,
	// what they do not show, since per resource the larger of the
	// declared and the computed counts (a declaration never lowers what
	// the pods request).
	Resources map[string]string `json:"resources,omitempty"`
	// DependsOn names deployables that must be Synced, at their current
	// generation, on a cluster before the runnable may go there.
	DependsOn []Dependency `json:"dependsOn,omitempty"`
	// Priority orders the runnables waiting for capacity: the name of a
	// priority class the policy allows the namespace (priorityClasses), or
	// an integer, which only the farm's admins may give; higher goes
	// first. Unset, the API writes the namespace's default class, if the
	// policy names one; otherwise it is 0.
	Priority *intstr.IntOrString `json:"priority,omitempty"`
}

// Dependency is one thing a runnable needs on its cluster.
type Dependency struct {
	// Deployable names a deployable of the runnable's namespace.
	Deployable string `json:"deployable"`
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
	// is moved, once its attempt has been seen Healthy.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
	// InitialTolerationSeconds is the same for an attempt that has not been
	// Healthy yet: its first start (a Flink job restoring a large state, an
	// image being pulled) may take far longer than a running job may stay
	// unhealthy, and an empty new copy must not be evicted for being empty.
	InitialTolerationSeconds *int64             `json:"initialTolerationSeconds,omitempty"`
	PurgeMode                string             `json:"purgeMode,omitempty"`
	GracePeriodSeconds       *int64             `json:"gracePeriodSeconds,omitempty"`
	StatePreservation        *StatePreservation `json:"statePreservation,omitempty"`
}

// ClusterFailover reacts to a lost cluster.
type ClusterFailover struct {
	PurgeMode string `json:"purgeMode,omitempty"`
}

// StatePreservation copies values out of the failed object's status, so that
// the next attempt can resume where the last one stopped.
type StatePreservation struct {
	Rules []StatePreservationRule `json:"rules,omitempty"`
	// RestorePoint asks for an exact restore point to be carried (the
	// location the Flink operator reports, or the newest completed
	// checkpoint of the job), offered to mutations as restorePath:
	// Required makes a failover wait until one is known, IfAvailable
	// starts the next attempt afresh without one; "" carries none.
	RestorePoint string `json:"restorePoint,omitempty"`
}

// Restore point policies of StatePreservation.RestorePoint.
const (
	RestorePointRequired    = "Required"
	RestorePointIfAvailable = "IfAvailable"
)

// Kinds of restore point.
const (
	RestoreSavepoint  = "Savepoint"
	RestoreCheckpoint = "Checkpoint"
)

// RestorePoint is an exact location a job can be restored from, and where
// it came from.
type RestorePoint struct {
	// Path is what the next attempt restores from (restorePath in
	// mutations), e.g. s3://bucket/checkpoints/<jobId>/chk-42.
	Path string `json:"path"`
	// Kind is Savepoint or Checkpoint.
	Kind string `json:"kind"`
	// Source says how it was found: the field of the operator's status, or
	// the checkpoint storage it was resolved from.
	Source string `json:"source,omitempty"`
	JobID  string `json:"jobId,omitempty"`
	// TakenAt is when it was completed; a restore point only replaces an
	// older one.
	TakenAt *time.Time `json:"takenAt,omitempty"`
	// Attempt is the attempt whose job wrote it.
	Attempt int `json:"attempt,omitempty"`
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
	// Unhealthy, or not yet taken up by its controller (health Unknown,
	// phase Unobserved on its cluster: an operator that never acts),
	// without a Healthy observation since: the clock of
	// spec.failover.application.tolerationSeconds, kept with the runnable
	// so that it survives restarts of the controller.
	UnhealthySince *time.Time `json:"unhealthySince,omitempty"`
	// HealthySince is when the current attempt's object was first seen
	// Healthy and running: from then on its attempt has proven itself, so
	// what it reports may be carried to the next attempt, and
	// tolerationSeconds (not initialTolerationSeconds) applies. Nil until
	// then, and again for each new attempt.
	HealthySince *time.Time `json:"healthySince,omitempty"`
	Message      string     `json:"message,omitempty"`
	// QueuePosition is a Queued runnable's place in the farm's queue (1
	// goes first): by priority, then the namespaces' fair share, then age,
	// as the submitter orders it. The API computes it when it answers; it
	// is not stored.
	QueuePosition int `json:"queuePosition,omitempty"`
	// Requests is what the runnable asks for in all (resource name ->
	// Kubernetes quantity): each pod by Kubernetes' own rule, times the
	// pods its kind runs, raised to spec.resources where that declares
	// more.
	Requests map[string]string `json:"requests,omitempty"`
	// Fenced: the current attempt's object was suspended by its cluster's
	// agent when the agent's lease expired; the controller resumes it once
	// the cluster is Ready again and the runnable was not moved.
	Fenced bool `json:"fenced,omitempty"`
	// Waiting names what a failover of the current attempt waits for
	// (Waiting* reasons); empty when nothing holds it. Message says it in
	// words.
	Waiting string `json:"waiting,omitempty"`
	// ConfirmedStopped is a person's word that the current attempt's copy
	// no longer runs, given when purser itself cannot confirm it
	// (POST .../failover?confirmStopped=true): the controller then moves
	// the runnable without waiting.
	ConfirmedStopped *Confirmation     `json:"confirmedStopped,omitempty"`
	Preserved        map[string]string `json:"preserved,omitempty"`
	// Suspension is the user's suspend or resume while the runnable is
	// Suspended (operate.go).
	Suspension *Suspension `json:"suspension,omitempty"`
	// Update is the last change of spec applied in place to the running
	// attempt, or still to apply (operate.go).
	Update *Update `json:"update,omitempty"`
	// Move is the runnable's planned move to another cluster, under way
	// or the last one (move.go).
	Move *Move `json:"move,omitempty"`
	// Retries is spec.retry's budget and last decision (retry.go).
	Retries *RetryStatus `json:"retries,omitempty"`
	// RestorePoint is the exact restore point the next attempt carries,
	// when statePreservation.restorePoint asks for one.
	RestorePoint *RestorePoint `json:"restorePoint,omitempty"`
	Attempts     []Attempt     `json:"attempts,omitempty"`
	// AttemptCount is len(Attempts), filled by the API in lists too,
	// which leave the attempts themselves out.
	AttemptCount int `json:"attemptCount,omitempty"`
	// Result is the last observed status of the object, kept after the
	// cluster deletes it. Same number rules as RunnableSpec.Template.
	Result      map[string]any `json:"result,omitempty"`
	SubmittedBy string         `json:"submittedBy,omitempty"`
	// ApprovedBy approved the spec at ApprovedGeneration, in a namespace
	// that needs approval; the live spec is never of a later generation
	// there, since every change of it waits in PendingChange first.
	ApprovedBy         string `json:"approvedBy,omitempty"`
	ApprovedGeneration int64  `json:"approvedGeneration,omitempty"`
	// EndedAt is when the runnable reached an ended phase; RemoveAfter,
	// when retention removes it.
	EndedAt     *time.Time `json:"endedAt,omitempty"`
	RemoveAfter *time.Time `json:"removeAfter,omitempty"`
	// PendingChange is the runnable as it waits for approval (phase
	// PendingApproval), or a change of its spec that waits for approval
	// beside the live one, in whatever phase; filled by the API.
	PendingChange *PendingChange[RunnableSpec] `json:"pendingChange,omitempty"`
	// Conditions are Ready, Reconciling, Stalled and PendingApproval as
	// the rest of the status stands (conditions.go); filled by the API,
	// not stored.
	Conditions []Condition `json:"conditions,omitempty"`
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
	Revive bool `json:"revive,omitempty"`
	// Generation is the generation the spec runs as once approved (the
	// live one's for a runnable that waits to run at all).
	Generation int64     `json:"generation,omitempty"`
	Author     string    `json:"author"`
	Time       time.Time `json:"time"`
}

// Confirmation records who vouched for a fact purser could not observe.
type Confirmation struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Attempt is the attempt it is about; a later attempt is not covered.
	Attempt int `json:"attempt"`
}

// Reasons a failover waits, in RunnableStatus.Waiting.
const (
	// WaitingFencing: the cluster is cut off; its agent suspends the copy
	// when its lease runs out, and the runnable moves after that.
	WaitingFencing = "AwaitingFencing"
	// WaitingUnconfirmed: nobody can confirm that the copy stopped (the
	// agent is alive but cannot stop it, or said it could not reach its
	// API server before it went silent); only the cluster's return or a
	// person's confirmation moves it.
	WaitingUnconfirmed = "CopyUnconfirmed"
	// WaitingHeartbeats: no agent's heartbeat reaches purser, so the
	// silence of this one proves nothing.
	WaitingHeartbeats = "HeartbeatsStale"
	// WaitingTarget: no other cluster is eligible.
	WaitingTarget = "NoEligibleCluster"
	// WaitingRestorePoint: statePreservation.restorePoint is Required and
	// no proven restore point is known.
	WaitingRestorePoint = "NoRestorePoint"
	// WaitingEvictionsStopped: so much of the farm is not Ready at once
	// that evictions are stopped (the cluster's Disrupted condition,
	// FarmDisruption), until fewer clusters are.
	WaitingEvictionsStopped = "EvictionsStopped"
	// WaitingClusterNotReady: the cluster is not Ready, and not yet long
	// enough to be tainted NoExecute; what the runnable's object does is
	// not known meanwhile, so its health reads Unknown.
	WaitingClusterNotReady = "ClusterNotReady"
)

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
	// CarriedIn is the preserved state the attempt started with, and
	// restorePath, the restore point it restored from.
	CarriedIn map[string]string `json:"carriedIn,omitempty"`
	// Reported is what the attempt's object reported when it was left
	// (each rule's value, and restorePath for the restore point it wrote),
	// whether or not it was carried on.
	Reported map[string]string `json:"reported,omitempty"`
	// Note says why something reported was not carried on.
	Note string `json:"note,omitempty"`
	// Generation is the generation of the runnable's spec the attempt's
	// object carries (metadata.generation of the runnable): the one it was
	// created with, or a later one an update in place applied.
	Generation int64 `json:"generation,omitempty"`
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
	// Rollout, when set, brings each new generation to the clusters wave
	// by wave (rollout.go); without it every cluster gets it at once.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Overrides patch the template per cluster.
	Overrides []Override `json:"overrides,omitempty"`
	// Mode Observe reports drift and never writes; default Apply.
	Mode DeployableMode `json:"mode,omitempty"`
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
	// ApprovedBy approved the live spec as ApprovedGeneration, where a
	// second person had to; empty when the live spec went live without.
	ApprovedBy         string `json:"approvedBy,omitempty"`
	ApprovedGeneration int64  `json:"approvedGeneration,omitempty"`
	// Rollout is where the rollout of the generation stands, for a
	// deployable with spec.rollout.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Conditions are Ready, Reconciling, Stalled and PendingApproval as
	// the rest of the status stands (conditions.go); filled by the API,
	// not stored.
	Conditions []Condition `json:"conditions,omitempty"`
}

// DeployableClusterStatus is the state of one cluster's copy.
type DeployableClusterStatus struct {
	Cluster          string     `json:"cluster"`
	State            SyncState  `json:"state,omitempty"`
	SyncedGeneration int64      `json:"syncedGeneration,omitempty"`
	LastSyncedAt     *time.Time `json:"lastSyncedAt,omitempty"`
	// Reason is a word for why the object is not synced where a script
	// needs one: AdmissionDenied when the syncer's admission of the object
	// as it would be written refused it (the message names the rule and
	// the override to blame).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
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
	// Inventory says what the cluster's agent tracks beyond the defaults.
	Inventory *ClusterInventory `json:"inventory,omitempty"`
}

// ClusterInventory is what a cluster's agent tracks on request.
type ClusterInventory struct {
	// Kinds are tracked in full beside the default kinds, each named as
	// in InventoryKinds: Pod, Event. They are many and change often, so
	// they are tracked only where asked for.
	Kinds []string `json:"kinds,omitempty"`
}

// InventoryKinds are the kinds a Cluster's spec.inventory.kinds may name.
var InventoryKinds = []string{"Pod", "Event"}

// InventoryKindsOf is the kinds the spec asks the agent to track, nil
// when it asks for none.
func (s ClusterSpec) InventoryKindsOf() []string {
	if s.Inventory == nil || len(s.Inventory.Kinds) == 0 {
		return nil
	}
	return s.Inventory.Kinds
}

// ConditionReady is the condition type that says the cluster is reachable
// and its agent is reporting; of a runnable or a deployable, that it is up
// (conditions.go).
const ConditionReady = "Ready"

// ConditionDisrupted is the condition type that says whether the
// cluster's zone (its DC), or the whole farm, has so many clusters not
// Ready at once that evictions are slowed or stopped.
const ConditionDisrupted = "Disrupted"

// ClusterStatus is what purser observed of the cluster.
type ClusterStatus struct {
	Conditions []Condition `json:"conditions,omitempty"`
	// Taints are added by purser from the conditions, beside spec.taints.
	Taints    []corev1.Taint   `json:"taints,omitempty"`
	Agent     *AgentStatus     `json:"agent,omitempty"`
	Inventory *InventoryStatus `json:"inventory,omitempty"`
	// State is ClusterState of the conditions, filled by the API on
	// every read (Ready, NotReady or Unknown); never stored.
	State string `json:"state,omitempty"`
	// Runnables counts the runnables whose current cluster this is, by
	// phase; filled by the API on every read.
	Runnables map[Phase]int `json:"runnables,omitempty"`
	// Capacity is what the cluster's schedulable nodes can allocate, from
	// the Node records of the inventory; absent while none is known.
	Capacity *ClusterCapacity `json:"capacity,omitempty"`
	// Resources is what placement counts with, as the cluster's agent last
	// reported it with its heartbeat; absent until it has.
	Resources *ClusterResources `json:"resources,omitempty"`
	// Views are what each DC's controller saw at its latest probe; the
	// Ready condition is judged by a quorum of them.
	Views []ClusterView `json:"views,omitempty"`
}

// ClusterCapacity sums the allocatable resources of a cluster's nodes
// that are not cordoned, as placement measures them.
type ClusterCapacity struct {
	MilliCPU    int64 `json:"milliCPU"`
	MemoryBytes int64 `json:"memoryBytes"`
	Pods        int64 `json:"pods"`
	Nodes       int   `json:"nodes"`
	// Unschedulable counts the cordoned nodes left out of the sums.
	Unschedulable int `json:"unschedulable,omitempty"`
}

// ClusterResources is a cluster's allocatable and free capacity as its
// agent computes it (resource name -> Kubernetes quantity): the nodes that
// can take pods, less what the non-terminal pods there request.
type ClusterResources struct {
	Allocatable map[string]string `json:"allocatable"`
	Free        map[string]string `json:"free"`
	// ReportedAt is the time of the heartbeat that carried them.
	ReportedAt time.Time `json:"reportedAt"`
}

// ClusterView is one DC's latest probe of the cluster's kube-apiserver.
type ClusterView struct {
	// DC is the controller's --dc ("" without one).
	DC string `json:"dc"`
	// Outcome is ok, not-ready or unreachable; Detail what failed.
	Outcome      string     `json:"outcome"`
	Detail       string     `json:"detail,omitempty"`
	ObservedAt   time.Time  `json:"observedAt"`
	FailingSince *time.Time `json:"failingSince,omitempty"`
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
	// KubeAPI is what the agent said of its kube-apiserver in its latest
	// heartbeat.
	KubeAPI *AgentKubeAPI `json:"kubeAPI,omitempty"`
	// CurrentUntil is the time of the latest heartbeat whose KubeAPI was
	// Current.
	CurrentUntil *time.Time `json:"currentUntil,omitempty"`
	// Freshness is JudgeFreshness of the above at the time of the read.
	Freshness *Freshness `json:"freshness,omitempty"`
}

// InventoryStatus summarises the cluster's rows in the inventory.
type InventoryStatus struct {
	Objects int64 `json:"objects"`
}
