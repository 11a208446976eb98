package v1alpha1

// Defaults of Runnable failover, applied only where the user asked for that
// kind of failover at all: an absent section means "no failover of that
// kind", and defaulting it into existence would change behaviour.
const (
	// DefaultTolerationSeconds matches the 300 s that Kubernetes gives a pod
	// on a not-ready node: long enough to ride out a restart, short enough
	// that a broken job does not sit for an hour.
	DefaultTolerationSeconds int64 = 300
	// DefaultInitialTolerationSeconds gives an attempt's first start ten
	// minutes: a Flink job restoring a large state takes minutes before it
	// runs, and moving it during its restore only starts the restore over.
	// A tolerationSeconds above it raises it to the same. Unlike the other
	// defaults it is not written into the spec (InitialToleration applies
	// it), so that runnables stored before the field existed keep their
	// spec hash and an identical resubmission stays identical.
	DefaultInitialTolerationSeconds int64 = 600
	// DefaultGracePeriodSeconds bounds how long a graceful purge waits,
	// room for a stateful job (Flink) to take a savepoint.
	DefaultGracePeriodSeconds int64 = 600
	// DefaultApplicationPurgeMode lets an unhealthy object stop cleanly,
	// since it is still reachable.
	DefaultApplicationPurgeMode = PurgeGracefully
	// DefaultClusterPurgeMode removes what is left on a lost cluster at
	// once: there is nothing to wait for on a cluster that does not answer.
	DefaultClusterPurgeMode = PurgeDirectly
	// DefaultConsistency is the safe choice for work that must not run
	// twice.
	DefaultConsistency = ConsistencyAtMostOne
)

// SetDefaults fills the unset failover fields of r. It is idempotent, and
// the server calls it before validation and before hashing the spec, so
// that a spec written with or without its defaults is the same submission.
// Deployables and Clusters have nothing to default.
func (r *Runnable) SetDefaults() {
	f := r.Spec.Failover
	if f == nil {
		return
	}
	if f.Consistency == "" {
		f.Consistency = DefaultConsistency
	}
	if a := f.Application; a != nil {
		if a.PurgeMode == "" {
			a.PurgeMode = DefaultApplicationPurgeMode
		}
		if a.TolerationSeconds == nil {
			a.TolerationSeconds = new(DefaultTolerationSeconds)
		}

		if a.GracePeriodSeconds == nil {
			a.GracePeriodSeconds = new(DefaultGracePeriodSeconds)
		}
	}
	if c := f.Cluster; c != nil && c.PurgeMode == "" {
		c.PurgeMode = DefaultClusterPurgeMode
	}
}

// InitialToleration is the initialTolerationSeconds in force for a:
// the field, or DefaultInitialTolerationSeconds raised to
// tolerationSeconds when it is larger.
func (a *ApplicationFailover) InitialToleration() int64 {
	if a.InitialTolerationSeconds != nil {
		return *a.InitialTolerationSeconds
	}
	t := DefaultTolerationSeconds
	if a.TolerationSeconds != nil {
		t = *a.TolerationSeconds
	}
	return max(DefaultInitialTolerationSeconds, t)
}
