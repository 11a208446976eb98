package v1alpha1

// Labels and annotations purser puts on the objects it creates in member
// clusters. They are how purser recognises its own objects: an object
// without them is never overwritten or deleted, and an object with them is
// traced back to its runnable or deployable.
const (
	// LabelRunnable is the runnable's name, when it fits in a label value.
	LabelRunnable = "purser.io/runnable"
	// LabelRunnableNamespace is the runnable's namespace.
	LabelRunnableNamespace = "purser.io/runnable-namespace"
	// LabelRunnableUID is the runnable's uid: ownership.
	LabelRunnableUID = "purser.io/runnable-uid"
	// LabelAttempt is the number of the attempt that created the object.
	LabelAttempt = "purser.io/attempt"
	// AnnotationRunnable is namespace/name of the runnable, whatever its
	// length.
	AnnotationRunnable = "purser.io/runnable"
)

// LabelConsistency carries spec.failover.consistency onto the object, so
// that the agent in the member cluster knows, without asking the control
// plane, which objects it must suspend once its lease has expired
// (AtMostOne).
const LabelConsistency = "purser.io/consistency"

// Taints purser puts on a cluster from its Ready condition (status.taints).
// Work that does not tolerate them is not placed there (NoSchedule) or is
// moved away (NoExecute).
const (
	// TaintNotReady: the cluster answers but is not ready, or its agent's
	// lease expired.
	TaintNotReady = "purser.io/not-ready"
	// TaintUnreachable: purser cannot reach the cluster's kube-apiserver.
	TaintUnreachable = "purser.io/unreachable"
)

// AnnotationFenced is put by the agent on an object it suspended because
// its lease expired (the time, RFC 3339). The controller resumes such an
// object when the cluster is Ready again and the runnable was not moved
// meanwhile, and removes the annotation.
const AnnotationFenced = "purser.io/fenced"

// TaintCordon is the taint a user puts on a cluster for maintenance
// (`purser cordon` and `drain`, the console's buttons): NoSchedule keeps
// new work away, NoExecute also moves the work that runs there.
const TaintCordon = "purser.io/cordon"

// What purser writes on every object of a deployable on a member
// cluster: the label makes it purser's (only objects carrying it are ever
// updated or deleted); the annotations say where it comes from and which
// version it is.
const (
	LabelDeployable      = "purser.io/deployable" // the deployable's uid
	AnnotationDeployable = "purser.io/deployable" // namespace/name
	AnnotationGeneration = "purser.io/generation" // the deployable's generation
	AnnotationSpecHash   = "purser.io/spec-hash"  // a hash of the desired object, safe to show
	// FieldManager is the server-side apply field manager of purser's
	// writes (and dry runs) of deployables.
	FieldManager = "purser"
)
