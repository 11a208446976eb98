package failover

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/placement"
)

// Reasons an attempt is evicted, as they appear on the attempt and in the
// audit log.
const (
	ReasonApplicationUnhealthy = "ApplicationUnhealthy"
	ReasonClusterUnreachable   = "ClusterUnreachable"
	ReasonClusterNotReady      = "ClusterNotReady"
	ReasonNoExecuteTaint       = "NoExecuteTaint"
)

// ResultEvicted ends an attempt that the controller moved away.
const ResultEvicted = "Evicted"

// Cluster is what the decision needs to know of the cluster an attempt
// runs on.
type Cluster struct {
	Name string
	// Taints are spec.taints and the taints purser added (status.taints).
	Taints []corev1.Taint
	// Reachable: the kube-apiserver answers, so the old copy can be
	// deleted before the next one starts.
	Reachable bool
	// LastHeartbeat is the last heartbeat of the cluster's agent; nil if
	// none was ever seen.
	LastHeartbeat *time.Time
	// HeartbeatsStale: no agent of the farm has been heard from for a
	// lease, although agents did report: the heartbeats reach the database
	// through the stream and the ingester, and one of those is down, so
	// the silence of this cluster's agent proves nothing.
	HeartbeatsStale bool
}

// Timing is the part of the controller's configuration the decision uses.
type Timing struct {
	// AgentLease is how long an agent that cannot renew its heartbeat
	// keeps running; after it, the agent suspends its AtMostOne work.
	AgentLease time.Duration
	// FencingMargin is added to AgentLease before an AtMostOne runnable
	// is placed elsewhere: it covers clock drift and the agent's own
	// reaction time.
	FencingMargin time.Duration
}

// Verdict is what to do with one running attempt.
type Verdict struct {
	// Evict: end the attempt now and place the runnable again.
	Evict  bool
	Reason string
	// Message says why, for the runnable's status, the attempt and the
	// audit log; with Evict false and a message, the runnable is waiting
	// for a failover that cannot happen yet.
	Message string
	// DeleteFirst: the old copy must be gone before the next attempt is
	// placed (AtMostOne, or purge mode Directly, on a reachable cluster).
	DeleteFirst bool
	// Purge is the purge mode for the old copy.
	Purge string
	// Grace bounds how long a graceful purge waits for the next attempt
	// to be healthy.
	Grace time.Duration
	// Until, when set on a verdict that does not evict, is when the same
	// status would evict: the end of the toleration. The controller wakes
	// then instead of at its next pass.
	Until time.Time
}

// Decide looks at one attempt of a runnable on cluster c at time now and
// says whether it must move. Cluster failover comes first: a NoExecute
// taint the runnable does not tolerate moves it, whatever its health.
// Application failover moves a runnable whose object has been Unhealthy
// for tolerationSeconds; Unknown health (a user error such as a missing
// image) never does, because another cluster would not help.
func Decide(spec *v1alpha1.RunnableSpec, st *v1alpha1.RunnableStatus, c Cluster, now time.Time, t Timing) Verdict {
	consistency := Consistency(spec)
	if taint := untoleratedNoExecute(spec.Placement.ClusterTolerations, c.Taints); taint != nil {
		v := Verdict{Purge: v1alpha1.DefaultClusterPurgeMode, Reason: taintReason(taint)}
		if f := spec.Failover; f != nil && f.Cluster != nil && f.Cluster.PurgeMode != "" {
			v.Purge = f.Cluster.PurgeMode
		}
		if !c.Reachable && consistency == v1alpha1.ConsistencyAtMostOne {
			if c.HeartbeatsStale {
				return Verdict{Message: fmt.Sprintf(
					"cluster %s is tainted %s, but no agent's heartbeat has reached purser for longer than a lease (is the stream or the ingester down?); with consistency AtMostOne the runnable stays until heartbeats are current again",
					c.Name, placement.TaintString(taint))}
			}
			if fenced := fencedAt(c, taint, t); now.Before(fenced) {
				return Verdict{Message: fmt.Sprintf(
					"cluster %s is tainted %s; waiting until %s, when its agent will have suspended this runnable's copy (consistency AtMostOne), before placing it elsewhere",
					c.Name, placement.TaintString(taint), fenced.UTC().Format(time.RFC3339))}
			}
		}
		v.Evict = true
		v.DeleteFirst = c.Reachable && v.Purge != v1alpha1.PurgeNever
		v.Message = fmt.Sprintf("cluster %s is tainted %s, which the runnable does not tolerate", c.Name, placement.TaintString(taint))
		return v
	}

	app := appFailover(spec)
	if app == nil || st.Health != v1alpha1.HealthUnhealthy || st.UnhealthySince == nil {
		return Verdict{}
	}
	// An attempt that has not run Healthy yet is starting: its first start
	// gets initialTolerationSeconds, so a new copy is never evicted for
	// being empty while it deploys or restores.
	seconds, which := *app.TolerationSeconds, "tolerationSeconds"
	if st.HealthySince == nil {
		seconds, which = app.InitialToleration(), "initialTolerationSeconds (it has not run Healthy yet)"
	}
	if deadline := st.UnhealthySince.Add(time.Duration(seconds) * time.Second); now.Before(deadline) {
		return Verdict{Until: deadline}
	}
	// The message leaves out the runnable's status message: while the
	// runnable waits for a target, that is this very message, which would
	// then nest itself, and grow and be written again, on every pass.
	v := Verdict{
		Evict:  true,
		Reason: ReasonApplicationUnhealthy,
		Purge:  app.PurgeMode,
		Grace:  time.Duration(*app.GracePeriodSeconds) * time.Second,
		Message: fmt.Sprintf("unhealthy on %s since %s, longer than %s %d",
			c.Name, st.UnhealthySince.UTC().Format(time.RFC3339), which, seconds),
	}
	// Gracefully places the next attempt before the old one is gone;
	// AtMostOne forbids that, so there the old copy goes first.
	v.DeleteFirst = c.Reachable && v.Purge != v1alpha1.PurgeNever &&
		(v.Purge == v1alpha1.PurgeDirectly || consistency == v1alpha1.ConsistencyAtMostOne)
	return v
}

// appFailover is the runnable's application failover with its defaults
// filled in, or nil.
func appFailover(spec *v1alpha1.RunnableSpec) *v1alpha1.ApplicationFailover {
	if spec.Failover == nil || spec.Failover.Application == nil {
		return nil
	}
	a := *spec.Failover.Application
	if a.TolerationSeconds == nil {
		a.TolerationSeconds = new(v1alpha1.DefaultTolerationSeconds)
	}
	if a.GracePeriodSeconds == nil {
		a.GracePeriodSeconds = new(v1alpha1.DefaultGracePeriodSeconds)
	}
	if a.PurgeMode == "" {
		a.PurgeMode = v1alpha1.DefaultApplicationPurgeMode
	}
	return &a
}

// untoleratedNoExecute returns the first NoExecute taint no toleration
// matches.
func untoleratedNoExecute(tolerations []corev1.Toleration, taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		if t := &taints[i]; t.Effect == corev1.TaintEffectNoExecute && !placement.Tolerated(tolerations, t) {
			return t
		}
	}
	return nil
}

// fencedAt is when the agent of c has certainly suspended its AtMostOne
// work: its lease has run out, counted from its last heartbeat, plus the
// margin. Without any heartbeat the taint's time stands in for it.
func fencedAt(c Cluster, taint *corev1.Taint, t Timing) time.Time {
	var from time.Time
	switch {
	case c.LastHeartbeat != nil:
		from = *c.LastHeartbeat
	case taint.TimeAdded != nil:
		from = taint.TimeAdded.Time
	}
	return from.Add(t.AgentLease + t.FencingMargin)
}

func taintReason(t *corev1.Taint) string {
	switch t.Key {
	case v1alpha1.TaintUnreachable:
		return ReasonClusterUnreachable
	case v1alpha1.TaintNotReady:
		return ReasonClusterNotReady
	}
	return ReasonNoExecuteTaint
}
