package clusters

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/probe"
)

// Reasons of a cluster's Ready condition, one per way of being judged.
const (
	// ReasonReady (True): the kube-apiserver answers /readyz (or /healthz)
	// with 200, and the agent, if one ever reported, is within its lease.
	ReasonReady = "ClusterReady"
	// ReasonNotProbedYet (Unknown): the controller has not yet seen enough
	// probes in a row to judge the cluster.
	ReasonNotProbedYet = v1alpha1.ReasonNotProbedYet
	// ReasonAPIServerUnreachable (Unknown): no answer from the
	// kube-apiserver (refused, timed out, TLS failure, unusable kubeconfig).
	ReasonAPIServerUnreachable = "APIServerUnreachable"
	// ReasonAPIServerNotReady (False): the kube-apiserver answers, but not
	// with 200.
	ReasonAPIServerNotReady = "APIServerNotReady"
	// ReasonAgentLeaseExpired (False): the kube-apiserver is ready but the
	// cluster's agent, which has reported before, has not sent a heartbeat
	// within the agent lease. A cluster whose agent never reported is
	// judged by its kube-apiserver alone: purser may reach clusters that
	// run no agent, and a freshly registered cluster has none yet.
	ReasonAgentLeaseExpired = "AgentLeaseExpired"
)

// Defaults of Policy.
const (
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 2
	DefaultNoExecuteGrace   = 40 * time.Second
	// DefaultAgentLease is three of the agent's heartbeat periods (10s).
	DefaultAgentLease = 30 * time.Second
)

// Policy is how observations turn into a Ready condition and taints. Its
// zero value means the defaults.
type Policy struct {
	// FailureThreshold is how many failed observations in a row turn a
	// cluster from Ready to not Ready, or from one kind of not Ready to
	// another; default 3.
	FailureThreshold int
	// SuccessThreshold is how many good observations in a row make a
	// cluster Ready again; default 2.
	SuccessThreshold int
	// NoExecuteGrace is how long a cluster stays not Ready before its
	// NoSchedule taint gets a NoExecute twin, which evicts the work that
	// does not tolerate it; default 40s.
	NoExecuteGrace time.Duration
	// AgentLease is how old an agent's last heartbeat may be; default 30s.
	AgentLease time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.FailureThreshold < 1 {
		p.FailureThreshold = DefaultFailureThreshold
	}
	if p.SuccessThreshold < 1 {
		p.SuccessThreshold = DefaultSuccessThreshold
	}
	if p.NoExecuteGrace <= 0 {
		p.NoExecuteGrace = DefaultNoExecuteGrace
	}
	if p.AgentLease <= 0 {
		p.AgentLease = DefaultAgentLease
	}
	return p
}

// Observation is what the controller knows of a cluster at one moment.
type Observation struct {
	Time  time.Time
	Probe probe.Result
	// FailingSince is when the failure of a failed Probe began, if known
	// earlier than Time (the quorum of DCs' views, JudgeViews).
	FailingSince time.Time
	// LastHeartbeat is when the cluster's agent last reported; nil when no
	// agent ever did.
	LastHeartbeat *time.Time
}

// State is the health of one cluster between observations: the published
// condition and taints, and the counters behind the hysteresis.
type State struct {
	// Ready is the published Ready condition; a zero Type means the
	// cluster was never judged.
	Ready v1alpha1.Condition
	// Taints are the purser taints in force (keys TaintNotReady and
	// TaintUnreachable); admins' taints live in spec.taints.
	Taints []corev1.Taint
	// Successes and Failures count the latest good or failed observations
	// in a row; one of them is always 0.
	Successes, Failures int
	// Failing is the reason of the latest failed observation, and Streak
	// how many in a row failed for that same reason.
	Failing string
	Streak  int
	// FailingSince is when the current run of failed observations began:
	// the earliest evidence of the outage, from which a transition out of
	// Ready is dated.
	FailingSince time.Time
	// Disrupted is the published Disrupted condition (Disruption); a
	// zero Type means none yet.
	Disrupted v1alpha1.Condition
}

// Seed is the state the controller resumes from after a restart: the
// stored condition and purser taints, so that a NotReady cluster stays
// NotReady and its NoExecute grace keeps counting from the stored
// lastTransitionTime. The counters start from zero, so that the next
// change needs its full threshold again.
func Seed(status v1alpha1.ClusterStatus) State {
	var s State
	if c := ReadyCondition(status); c != nil {
		s.Ready = *c
		s.Ready.LastTransitionTime = s.Ready.LastTransitionTime.UTC()
	}
	if c := condition(status, v1alpha1.ConditionDisrupted); c != nil {
		s.Disrupted = *c
		s.Disrupted.LastTransitionTime = s.Disrupted.LastTransitionTime.UTC()
	}
	for _, t := range status.Taints {
		if isPurserTaint(t.Key) {
			s.Taints = append(s.Taints, t)
		}
	}
	return s
}

// Step judges one observation and returns the next state. It is the
// whole of cluster health's decision, and does no I/O.
//
// The Ready condition changes only after thresholds of observations in a
// row: from True after FailureThreshold failures, to True after
// SuccessThreshold successes, and from one kind of failure to another
// after FailureThreshold failures of the new kind. So an endpoint flapping
// faster than that never changes it, and never starts evictions. Its
// message is written when the condition changes and then kept, so that
// varying error texts do not make a write on every probe.
//
// Leaving True is dated from the start of the outage, not from the
// observation that reached the threshold: the first failed observation
// of the run, or the earlier start its Observation knows of (when a
// quorum of DCs began to fail, when the agent's lease ran out). So the
// thresholds delay the verdict but not the NoExecute grace, as
// Kubernetes' node lifecycle controller counts a node's grace from its
// last heartbeat, not from when it noticed (tryUpdateNodeHealth in
// kubernetes/pkg/controller/nodelifecycle).
//
// lastTransitionTime moves only when Ready enters or leaves True. A move
// between False and Unknown (a kube-apiserver that alternates between
// refusing connections and answering not ready, as one that crash-loops
// does) changes reason and message but not the time: it marks the start
// of the outage, from which NoExecuteGrace is counted.
//
// Taints follow the condition: none while Ready is True; otherwise a
// NoSchedule taint, keyed TaintUnreachable for APIServerUnreachable and
// TaintNotReady for every other reason, and once the outage has lasted
// NoExecuteGrace a NoExecute taint of the same key (for TaintNotReady,
// once that key has, too: see taints). A cluster not judged yet gets no
// NoExecute taint. A taint that stays keeps its TimeAdded.
func (p Policy) Step(prev State, o Observation) State {
	p = p.withDefaults()
	now := o.Time.UTC()
	s := prev
	if s.Ready.Type == "" {
		s.Ready = p.notProbedYet(now)
	}
	reason, detail, since := p.judge(o, now)
	if reason == "" {
		s.Successes++
		s.Failures, s.Failing, s.Streak, s.FailingSince = 0, "", 0, time.Time{}
		switch {
		case s.Ready.Status == metav1.ConditionTrue:
			// The message may change (the agent reports for the first
			// time); the reason and time do not.
			s.Ready.Reason, s.Ready.Message = ReasonReady, readyMessage(o)
		case s.Successes >= p.SuccessThreshold:
			s.Ready = v1alpha1.Condition{
				Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: now,
				Reason: ReasonReady, Message: readyMessage(o),
			}
		}
	} else {
		s.Successes = 0
		s.Failures++
		if s.FailingSince.IsZero() || since.Before(s.FailingSince) {
			s.FailingSince = since
		}
		if reason == s.Failing {
			s.Streak++
		} else {
			s.Failing, s.Streak = reason, 1
		}
		switch {
		case s.Ready.Status == metav1.ConditionTrue:
			if s.Failures >= p.FailureThreshold {
				// Never before the Ready it leaves began.
				from := s.FailingSince
				if from.Before(s.Ready.LastTransitionTime) {
					from = s.Ready.LastTransitionTime
				}
				s.Ready = failedCondition(reason, s.Failures, detail, from)
			}
		case s.Ready.Reason == ReasonNotProbedYet:
			if s.Failures >= p.FailureThreshold {
				s.Ready = failedCondition(reason, s.Failures, detail, s.Ready.LastTransitionTime)
			}
		case s.Ready.Reason != reason:
			if s.Streak >= p.FailureThreshold {
				s.Ready = failedCondition(reason, s.Streak, detail, s.Ready.LastTransitionTime)
			}
		}
	}
	s.Taints = p.taints(s.Ready, now, prev.Taints)
	return s
}

// notProbedYet is the Ready condition of a cluster not judged yet.
func (p Policy) notProbedYet(now time.Time) v1alpha1.Condition {
	p = p.withDefaults()
	return v1alpha1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, LastTransitionTime: now.UTC(),
		Reason: ReasonNotProbedYet,
		Message: fmt.Sprintf("not judged yet: Ready is decided after %d successful or %d failed probes in a row",
			p.SuccessThreshold, p.FailureThreshold),
	}
}

// judge returns the reason an observation counts as failed, what failed
// and since when; an empty reason means it is good. An unreachable
// kube-apiserver outweighs a not ready one, which outweighs a silent
// agent.
func (p Policy) judge(o Observation, now time.Time) (reason, detail string, since time.Time) {
	since = now
	if !o.FailingSince.IsZero() && o.FailingSince.Before(now) {
		since = o.FailingSince.UTC()
	}
	switch o.Probe.Outcome {
	case probe.Unreachable:
		return ReasonAPIServerUnreachable, o.Probe.Detail, since
	case probe.NotReady:
		return ReasonAPIServerNotReady, o.Probe.Detail, since
	}
	if hb := o.LastHeartbeat; hb != nil {
		if age := now.Sub(*hb); age > p.AgentLease {
			return ReasonAgentLeaseExpired, fmt.Sprintf("last heartbeat at %s, %s before this probe (lease %s)",
				hb.UTC().Format(time.RFC3339), age.Round(time.Second), p.AgentLease), hb.Add(p.AgentLease).UTC()
		}
	}
	return "", "", time.Time{}
}

func readyMessage(o Observation) string {
	if o.LastHeartbeat == nil {
		return "kube-apiserver ready; no agent has reported yet"
	}
	return "kube-apiserver ready and agent reporting"
}

// failedCondition is the Ready condition for reason after n failed
// probes, the last of which found detail.
func failedCondition(reason string, n int, detail string, since time.Time) v1alpha1.Condition {
	c := v1alpha1.Condition{Type: v1alpha1.ConditionReady, LastTransitionTime: since, Reason: reason}
	switch reason {
	case ReasonAPIServerUnreachable:
		c.Status = metav1.ConditionUnknown
		c.Message = fmt.Sprintf("kube-apiserver unreachable for %s: %s", probes(n), detail)
	case ReasonAPIServerNotReady:
		c.Status = metav1.ConditionFalse
		c.Message = fmt.Sprintf("kube-apiserver not ready for %s: %s", probes(n), detail)
	default: // ReasonAgentLeaseExpired
		c.Status = metav1.ConditionFalse
		c.Message = "agent lease expired: " + detail
	}
	return c
}

func probes(n int) string {
	if n == 1 {
		return "1 probe"
	}
	return fmt.Sprintf("%d probes", n)
}

// taints are the purser taints that go with ready at now; those also in
// prev keep their TimeAdded.
func (p Policy) taints(ready v1alpha1.Condition, now time.Time, prev []corev1.Taint) []corev1.Taint {
	if ready.Status == metav1.ConditionTrue {
		return nil
	}
	key := v1alpha1.TaintNotReady
	if ready.Reason == ReasonAPIServerUnreachable {
		key = v1alpha1.TaintUnreachable
	}
	// The grace counts from the start of the outage; a cluster that turns
	// from unreachable to not ready, though, answers again (a restarted
	// kube-apiserver runs its post-start hooks before /readyz is 200), so
	// the not-ready key counts from when it was added, as Kubernetes'
	// swap of a node's unreachable taint for a new not-ready one gives
	// pods a fresh tolerationSeconds. Work that waited out the outage is
	// not evicted in the moments its cluster comes back; a crash loop
	// still meets the unreachable key's grace, counted from the start.
	since := ready.LastTransitionTime
	if key == v1alpha1.TaintNotReady {
		added := now
		for _, t := range prev {
			if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule && t.TimeAdded != nil {
				added = t.TimeAdded.Time
			}
		}
		if added.After(since) {
			since = added
		}
	}
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule}
	if ready.Reason != ReasonNotProbedYet && now.Sub(since) >= p.NoExecuteGrace {
		effects = append(effects, corev1.TaintEffectNoExecute)
	}
	out := make([]corev1.Taint, 0, len(effects))
	for _, effect := range effects {
		// Seconds, as metav1.Time keeps them in JSON, so that the taint
		// in memory equals the stored one.
		added := metav1.NewTime(now.Truncate(time.Second))
		for _, t := range prev {
			if t.Key == key && t.Effect == effect && t.TimeAdded != nil {
				added = *t.TimeAdded
			}
		}
		out = append(out, corev1.Taint{Key: key, Effect: effect, TimeAdded: &added})
	}
	return out
}

func isPurserTaint(key string) bool {
	return key == v1alpha1.TaintNotReady || key == v1alpha1.TaintUnreachable
}

// ReadyCondition returns status's Ready condition, or nil.
func ReadyCondition(status v1alpha1.ClusterStatus) *v1alpha1.Condition {
	return condition(status, v1alpha1.ConditionReady)
}

// DisruptedCondition returns status's Disrupted condition, or nil.
func DisruptedCondition(status v1alpha1.ClusterStatus) *v1alpha1.Condition {
	return condition(status, v1alpha1.ConditionDisrupted)
}

func condition(status v1alpha1.ClusterStatus, typ string) *v1alpha1.Condition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == typ {
			return &status.Conditions[i]
		}
	}
	return nil
}

// EffectiveTaints are the taints that placement and eviction must honour
// on a cluster: the admins' spec.taints followed by the status.taints
// purser derived from its Ready condition.
func EffectiveTaints(c *store.Cluster) ([]corev1.Taint, error) {
	var doc store.Document[v1alpha1.ClusterSpec]
	if err := json.Unmarshal(c.Spec, &doc); err != nil {
		return nil, fmt.Errorf("cluster %s: stored spec: %w", c.Name, err)
	}
	var status v1alpha1.ClusterStatus
	if len(c.Status) > 0 {
		if err := json.Unmarshal(c.Status, &status); err != nil {
			return nil, fmt.Errorf("cluster %s: stored status: %w", c.Name, err)
		}
	}
	out := make([]corev1.Taint, 0, len(doc.Spec.Taints)+len(status.Taints))
	out = append(out, doc.Spec.Taints...)
	return append(out, status.Taints...), nil
}
