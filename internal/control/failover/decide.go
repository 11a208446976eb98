package failover

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/member/probe"
)

// Reasons an attempt is evicted, as they appear on the attempt and in the
// audit log.
const (
	ReasonApplicationUnhealthy = "ApplicationUnhealthy"
	ReasonClusterUnreachable   = "ClusterUnreachable"
	ReasonClusterNotReady      = "ClusterNotReady"
	ReasonNoExecuteTaint       = "NoExecuteTaint"
)

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
	// HubLeaseUntil is the latest time a renewal of the hub's Lease in
	// the cluster can have landed (recorded before each renewal was
	// sent, moved to the controller's clock); nil when none was ever
	// recorded. The agent does not fence while it sees renewals, so it is
	// counted like a heartbeat (fencedAt).
	HubLeaseUntil *time.Time
	// AgentReachesKubeAPI is what the agent's latest heartbeat said of its
	// own kube-apiserver; nil when it said nothing.
	AgentReachesKubeAPI *bool
	// NotReady is the cluster's Ready condition when it is judged not
	// Ready (nil when Ready, or not judged yet).
	NotReady *v1alpha1.Condition
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
	// NoExecuteGrace is how long a cluster stays not Ready before it is
	// tainted NoExecute (the cluster health policy's).
	NoExecuteGrace time.Duration
	// AgentReadPeriod bounds how long after a renewal of the hub's Lease
	// lands the agent can first see it (it reads the Lease once per
	// heartbeat interval, after its probe): added to HubLeaseUntil.
	AgentReadPeriod time.Duration
}

// AgentReadPeriod is Timing.AgentReadPeriod for agents of lease: their
// heartbeat interval is at most a third of it (the agent refuses a longer
// one), a beat that runs long (probe, read, stream write, each bounded by
// probe.DefaultTimeout or less) starts the next one late by as much, and
// the read follows the next beat's probe.
func AgentReadPeriod(lease time.Duration) time.Duration { return lease/3 + 3*probe.DefaultTimeout }

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
	// Waiting names what a failover that cannot happen yet waits for
	// (v1alpha1.Waiting*), with Evict false and a Message.
	Waiting string
	// HealthUnknown: what the runnable's object does cannot be known now
	// (its cluster is not Ready); its health reads Unknown until the
	// cluster is Ready again.
	HealthUnknown bool
	// Overridable: a person's confirmation that the copy stopped would
	// end the wait (the caller names the command in the message).
	Overridable bool
	// TrustsFencing: the verdict moves an AtMostOne runnable off a
	// cluster that does not answer on the strength of its agent's fencing
	// alone. The caller must then also wait for a create sent for the
	// attempt that may land late (HoldLateCreate).
	TrustsFencing bool
}

// Decide looks at one attempt of a runnable on cluster c at time now and
// says whether it must move. Cluster failover comes first: a NoExecute
// taint the runnable does not tolerate moves it, whatever its health.
// Application failover moves a runnable whose object has been Unhealthy
// for tolerationSeconds; Unknown health (a user error such as a missing
// image) never does, because another cluster would not help.
func Decide(spec *v1alpha1.RunnableSpec, st *v1alpha1.RunnableStatus, c Cluster, now time.Time, t Timing) Verdict {
	consistency := attempt.Consistency(spec)
	if taint := untoleratedNoExecute(spec.Placement.ClusterTolerations, c.Taints); taint != nil {
		v := Verdict{Purge: v1alpha1.DefaultClusterPurgeMode, Reason: taintReason(taint)}
		if f := spec.Failover; f != nil && f.Cluster != nil && f.Cluster.PurgeMode != "" {
			v.Purge = f.Cluster.PurgeMode
		}
		if !c.Reachable && consistency == v1alpha1.ConsistencyAtMostOne {
			if hold := holdUnconfirmed(spec, st, c, taint, now, t); hold != nil {
				return *hold
			}
		}
		v.Evict = true
		v.TrustsFencing = !c.Reachable && consistency == v1alpha1.ConsistencyAtMostOne && st.ConfirmedStopped == nil
		v.DeleteFirst = c.Reachable && v.Purge != v1alpha1.PurgeNever
		v.Message = fmt.Sprintf("cluster %s is tainted %s, which the runnable does not tolerate", c.Name, placement.TaintString(taint))
		if cs := st.ConfirmedStopped; cs != nil && !c.Reachable {
			v.Message += fmt.Sprintf("; %s confirmed at %s that its copy no longer runs", cs.By, cs.At.UTC().Format(time.RFC3339))
		}
		return v
	}

	if nr := c.NotReady; nr != nil {
		return notReady(spec, c, *nr, t)
	}
	app := appFailover(spec)
	// UnhealthySince with health Unknown is an object its controller has
	// not taken up yet (the ingester sets it for nothing else; an Unknown
	// cluster returned above): it waits as an Unhealthy one does.
	unobserved := st.Health == v1alpha1.HealthUnknown
	if app == nil || (st.Health != v1alpha1.HealthUnhealthy && !unobserved) || st.UnhealthySince == nil {
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
	if unobserved {
		v.Message = fmt.Sprintf("not taken up by its controller on %s (no status written) since %s, longer than %s %d",
			c.Name, st.UnhealthySince.UTC().Format(time.RFC3339), which, seconds)
	}
	// Gracefully places the next attempt before the old one is gone;
	// AtMostOne forbids that, so there the old copy goes first.
	v.DeleteFirst = c.Reachable && v.Purge != v1alpha1.PurgeNever &&
		(v.Purge == v1alpha1.PurgeDirectly || consistency == v1alpha1.ConsistencyAtMostOne)
	return v
}

// notReady is the verdict on a runnable whose cluster is judged not Ready
// but not tainted NoExecute yet (or tolerates it): nothing moves, what its
// object does cannot be known, and the message says what purser waits
// for. Its times come from the condition, so that it is written once per
// outage.
func notReady(spec *v1alpha1.RunnableSpec, c Cluster, nr v1alpha1.Condition, t Timing) Verdict {
	state := "not Ready"
	if nr.Reason != "" {
		state += " (" + nr.Reason + ")"
	}
	msg := fmt.Sprintf("cluster %s is %s since %s, so what the runnable does there is not known; ", c.Name, state,
		nr.LastTransitionTime.UTC().Format(time.RFC3339))
	taintAt := nr.LastTransitionTime.Add(t.NoExecuteGrace).UTC().Format(time.RFC3339)
	switch {
	case t.NoExecuteGrace <= 0:
		msg += "it moves if the cluster is tainted NoExecute"
	case attempt.Consistency(spec) == v1alpha1.ConsistencyAtMostOne:
		msg += fmt.Sprintf("if the cluster is still not Ready at %s it is tainted NoExecute, and with consistency AtMostOne the runnable then moves once its copy is certainly stopped (its agent suspends it when its lease of %s runs out on both its paths, the stream and the hub's Lease in the cluster)",
			taintAt, t.AgentLease)
	default:
		msg += fmt.Sprintf("if the cluster is still not Ready at %s it is tainted NoExecute and the runnable moves", taintAt)
	}
	return Verdict{Waiting: v1alpha1.WaitingClusterNotReady, HealthUnknown: true, Message: msg}
}

// holdUnconfirmed says why an AtMostOne runnable on an unreachable cluster
// must stay, or nil once it may go: when its agent has certainly stopped
// the copy, or a person confirmed that it no longer runs. Each message
// says what purser knows and what it waits for, with times that do not
// move while nothing changes, so that it is written once per situation.
func holdUnconfirmed(spec *v1alpha1.RunnableSpec, st *v1alpha1.RunnableStatus, c Cluster, taint *corev1.Taint, now time.Time, t Timing) *Verdict {
	if st.ConfirmedStopped != nil {
		return nil
	}
	tainted := fmt.Sprintf("cluster %s is tainted %s", c.Name, placement.TaintString(taint))
	hold := func(waiting, format string, args ...any) *Verdict {
		return &Verdict{Waiting: waiting, Overridable: true, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.HeartbeatsStale:
		return hold(v1alpha1.WaitingHeartbeats,
			"%s, but no agent's heartbeat has reached purser for longer than a lease (is the stream or the ingester down?), so the silence of %s's agent proves nothing; with consistency AtMostOne the runnable stays until heartbeats are current again",
			tainted, c.Name)
	case c.LastHeartbeat != nil && now.Sub(*c.LastHeartbeat) < t.AgentLease:
		// The agent renews its lease, so it does not fence: it may be
		// cut off from its own kube-apiserver, or only purser is.
		how := "while it still reaches that API server the copy keeps running"
		if c.AgentReachesKubeAPI != nil && !*c.AgentReachesKubeAPI {
			how = "it cannot reach that API server either, so it cannot stop the copy or confirm that it stopped"
		}
		return hold(v1alpha1.WaitingUnconfirmed,
			"%s: its API server does not answer purser, but its agent is alive and renews its lease; %s; with consistency AtMostOne the runnable stays on %s until its API server answers again",
			tainted, how, c.Name)
	case c.LastHeartbeat != nil && c.AgentReachesKubeAPI != nil && !*c.AgentReachesKubeAPI:
		return hold(v1alpha1.WaitingUnconfirmed,
			"%s: neither its API server nor its agent answers; the agent's last heartbeat, at %s, said it could not reach that API server, so it cannot have stopped the copy; with consistency AtMostOne the runnable stays on %s until the cluster answers again",
			tainted, c.LastHeartbeat.UTC().Format(time.RFC3339), c.Name)
	}
	fenced := fencedAt(c, taint, t)
	if !now.Before(fenced) {
		return nil
	}
	since := "has not been heard from"
	if c.LastHeartbeat != nil {
		since = "has been silent since " + c.LastHeartbeat.UTC().Format(time.RFC3339)
	}
	hub := ""
	if c.HubLeaseUntil != nil {
		hub = fmt.Sprintf(", and the last renewal of the hub's Lease in the cluster, which its agent also counts as the hub alive, can have landed until %s and been read %s later",
			c.HubLeaseUntil.UTC().Format(time.RFC3339), t.AgentReadPeriod)
	}
	return hold(v1alpha1.WaitingFencing,
		"%s: its API server does not answer and its agent %s%s; an agent cut off from purser suspends its copy when its lease of %s has run out on both paths, so with consistency AtMostOne the runnable moves at %s (the lease and a margin of %s after the later of the two)",
		tainted, since, hub, t.AgentLease, fenced.UTC().Format(time.RFC3339), t.FencingMargin)
}

// HoldLateCreate says why an AtMostOne runnable whose move trusts the
// fencing of its cluster's agent (v.TrustsFencing) must wait still, or nil
// once it may go. A create the submitter sent for attempt number before
// the cluster stopped answering can take effect until landedBy (nil: none
// was sent): retried across a partition, it may land after the agent
// fenced what it knew. The agent fences again every second while its lease
// is out, and so stops such a copy as soon as it appears; the runnable
// moves the margin after landedBy.
func HoldLateCreate(v Verdict, c Cluster, number int, landedBy *time.Time, now time.Time, t Timing) *Verdict {
	if !v.TrustsFencing || landedBy == nil {
		return nil
	}
	until := landedBy.Add(t.FencingMargin)
	if !now.Before(until) {
		return nil
	}
	return &Verdict{Waiting: v1alpha1.WaitingFencing, Overridable: true, Until: until, Message: fmt.Sprintf(
		"%s; a create of attempt %d was sent to %s that can take effect until %s, after its agent fenced what it knew; the agent stops such a copy as soon as it appears, so with consistency AtMostOne the runnable moves at %s",
		v.Message, number, c.Name, landedBy.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))}
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
// work: its lease has run out on both its paths, counted from the later
// of its last heartbeat and the last moment it can have seen the hub's
// Lease renewed (the latest a renewal recorded before it was sent can
// land, plus the agent's read period), plus the margin. With neither, the
// taint's time stands in for them.
func fencedAt(c Cluster, taint *corev1.Taint, t Timing) time.Time {
	var from time.Time
	if c.LastHeartbeat != nil {
		from = *c.LastHeartbeat
	}
	if c.HubLeaseUntil != nil {
		if seen := c.HubLeaseUntil.Add(t.AgentReadPeriod); seen.After(from) {
			from = seen
		}
	}
	if from.IsZero() && taint.TimeAdded != nil {
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
