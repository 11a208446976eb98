package v1alpha1

import (
	"fmt"
	"time"
)

// AgentFreshSeconds is how old the last heartbeat of a cluster's agent may
// be for the cluster's records to count as current: three of the agent's
// 10 s heartbeats missed, the same span as the agent's default lease. It is
// served with every judgement (Freshness.StaleAfterSeconds) so that no
// client keeps a number of its own.
const AgentFreshSeconds = 30

// Reasons of a Freshness, one per way of judging it.
const (
	// FreshAgentReporting (fresh): the agent heartbeats, and says its
	// caches have listed every watched kind and its kube-apiserver answers.
	FreshAgentReporting = "AgentReporting"
	// FreshNoAgent: no agent has ever reported from the cluster.
	FreshNoAgent = "NoAgent"
	// FreshAgentSilent: the agent's last heartbeat is older than
	// AgentFreshSeconds.
	FreshAgentSilent = "AgentSilent"
	// FreshKubeAPIUnreachable: the agent heartbeats but cannot reach its
	// own kube-apiserver, so its caches cannot be refreshed.
	FreshKubeAPIUnreachable = "KubeAPIUnreachable"
	// FreshCachesNotSynced: the agent heartbeats but its caches have not
	// finished their first list (it has just started).
	FreshCachesNotSynced = "CachesNotSynced"
)

// AgentKubeAPI is what an agent says, in each heartbeat, of its own link to
// its cluster's kube-apiserver. Agents older than this report leave it
// out; their heartbeats are then taken at face value.
type AgentKubeAPI struct {
	// Connected: the agent's latest probe of the kube-apiserver (GET
	// /readyz, at every heartbeat) was answered 200, so its informers'
	// watches can be open and current.
	Connected bool `json:"connected"`
	// Synced: every watch the agent has started has its first list.
	Synced bool `json:"synced"`
	// LastContact is when a probe was last answered 200, by the agent's
	// clock; absent if never since the agent started.
	LastContact *time.Time `json:"lastContact,omitempty"`
	// Error says why the latest probe failed, when Connected is false.
	Error string `json:"error,omitempty"`
}

// Current reports whether the agent's caches can be the cluster's truth:
// synced and connected. A nil report (an agent that predates it) counts as
// current, since its heartbeat is all there is to go on.
func (k *AgentKubeAPI) Current() bool {
	return k == nil || (k.Connected && k.Synced)
}

// Freshness is the one judgement of how current a cluster's records are,
// made by JudgeFreshness and served by the API wherever a cluster's agent
// is shown (status.agent.freshness of a Cluster, clusters[] of an
// inventory answer), so that the console, the CLI and scripts say the same.
type Freshness struct {
	Fresh bool `json:"fresh"`
	// Reason is one of the Fresh* constants.
	Reason string `json:"reason"`
	// Message says it in words, with the ages as of the judgement.
	Message string `json:"message"`
	// CurrentUntil is the last moment the records were known to be the
	// cluster's state: the last heartbeat in which the agent reported its
	// caches current. A record was last seen as it is at the later of its
	// own change (observedAt) and this.
	CurrentUntil *time.Time `json:"currentUntil,omitempty"`
	// StaleAfterSeconds is AgentFreshSeconds.
	StaleAfterSeconds int `json:"staleAfterSeconds"`
}

// JudgeFreshness judges a cluster's records from what its agent last
// reported, at now. It is a pure function: the server calls it on every
// read, with the times the ingester stored.
//
// Fresh means all of: a heartbeat within AgentFreshSeconds, and, where the
// agent says so, caches synced and connected to the kube-apiserver. Events
// and snapshots are not part of it: a quiet cluster sends no events, and a
// snapshot only confirms what the live watches already hold; their times
// are shown beside the judgement, never coloured by it.
func JudgeFreshness(a *AgentStatus, now time.Time) Freshness {
	f := Freshness{StaleAfterSeconds: AgentFreshSeconds}
	if a == nil || a.LastHeartbeat == nil {
		f.Reason, f.Message = FreshNoAgent, "no agent has reported from this cluster"
		return f
	}
	f.CurrentUntil = a.CurrentUntil
	beat := now.Sub(*a.LastHeartbeat)
	switch k := a.KubeAPI; {
	case beat > AgentFreshSeconds*time.Second:
		f.Reason = FreshAgentSilent
		f.Message = fmt.Sprintf("agent silent: last heartbeat %s ago (more than %ds)", Ago(beat), AgentFreshSeconds)
	case k != nil && !k.Connected:
		f.Reason = FreshKubeAPIUnreachable
		f.Message = fmt.Sprintf("the agent reports (heartbeat %s ago) but cannot reach its kube-apiserver", Ago(beat))
		if k.LastContact != nil {
			f.Message += fmt.Sprintf(", last answered %s ago", Ago(now.Sub(*k.LastContact)))
		} else {
			f.Message += " since it started"
		}
		if k.Error != "" {
			f.Message += ": " + k.Error
		}
	case k != nil && !k.Synced:
		f.Reason = FreshCachesNotSynced
		// What an agent does for a few seconds after it starts (or after its
		// watches were reset): said as what to expect, not as a fault.
		f.Message = fmt.Sprintf("the agent is listing its objects after a restart, heartbeat %s ago; records may lag for a few seconds", Ago(beat))
	default:
		f.Fresh, f.Reason = true, FreshAgentReporting
		f.Message = fmt.Sprintf("agent reporting: heartbeat %s ago, caches current", Ago(beat))
	}
	return f
}

// Ago prints a duration the way kubectl prints ages, in the largest unit
// that keeps it short: 45s, 3m, 5h, 2d. Negative durations (clocks a little
// apart) print as 0s.
func Ago(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 0:
		return "0s"
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 2*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
}

// Cluster states, as kubectl words a node's STATUS.
const (
	ClusterReady    = "Ready"
	ClusterNotReady = "NotReady"
	ClusterUnknown  = "Unknown"
)

// ReasonNotProbedYet is the reason of the Ready condition of a cluster the
// controller has not judged yet.
const ReasonNotProbedYet = "NotProbedYet"

// ClusterState is how a cluster's readiness is shown, one word for every
// client, as kubectl shows a node (kubernetes pkg/printers/internalversion,
// printNode): Ready when the Ready condition is True, NotReady when it is
// anything else, Unknown when there is none. Purser's one addition is that
// a condition still NotProbedYet is Unknown too: nothing has been judged.
// So a cluster whose kube-apiserver purser cannot reach (Ready Unknown,
// APIServerUnreachable) is NotReady, as a node whose kubelet stopped
// posting is.
func ClusterState(s ClusterStatus) string {
	for _, c := range s.Conditions {
		if c.Type != ConditionReady {
			continue
		}
		switch {
		case c.Status == "True":
			return ClusterReady
		case c.Reason == ReasonNotProbedYet:
			return ClusterUnknown
		}
		return ClusterNotReady
	}
	return ClusterUnknown
}
