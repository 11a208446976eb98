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
