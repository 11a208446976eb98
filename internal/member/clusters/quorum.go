package clusters

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-io/purser/internal/member/probe"
)

// Health judged from every data center. Each controller replica probes
// every cluster from its own DC and records what it saw (a View); the
// leader judges a cluster by the views of all DCs: a cluster counts as
// failing only when a quorum of the DCs that observe it fail to get a good
// answer. So a partition between one DC and the rest, even the leader's
// own DC, never makes the clusters beyond it look down: from the other
// side they answer.

// View is one DC's latest probe of one cluster.
type View struct {
	// Observer is the DC whose controller probed (its --dc).
	Observer string
	Probe    probe.Result
	// At is when the probe was made, FailingSince when the observer's
	// current run of failed probes began (zero when the probe succeeded).
	At, FailingSince time.Time
}

// QuorumPolicy says which views count.
type QuorumPolicy struct {
	// MaxAge is how old a view may be and still vote: a DC that stopped
	// recording (cut off, its controller down) has no say on the clusters'
	// present state.
	MaxAge time.Duration
	// Observers is how many DCs observe the farm: those that recorded any
	// view recently. The quorum is a majority of them.
	Observers int
}

// Judgement is the health of a cluster as a quorum of DCs sees it.
type Judgement struct {
	// Probe is the combined result: failed only when a quorum of the
	// observers failed.
	Probe probe.Result
	// FailingSince is when the quorum's failure began: the latest of the
	// earliest failure starts that make a quorum, i.e. the moment a
	// quorum of DCs had all begun to fail. Zero when Probe succeeded.
	FailingSince time.Time
	// Unjudged: fewer fresh views than a quorum; the result says OK and
	// changes nothing.
	Unjudged bool
}

// Quorum is the majority of n observers.
func Quorum(n int) int { return n/2 + 1 }

// JudgeViews combines the views of one cluster at now. The cluster fails
// as unreachable when a quorum of observers could not reach it, and as
// not ready when a quorum failed and at least one of them got an answer
// (the kube-apiserver is up, only not ready); anything less is a good
// result, whose detail names the DCs that disagree. With fewer fresh
// views than a quorum nothing can be concluded, and the result is good:
// a cluster is never judged down by a minority.
func JudgeViews(views []View, now time.Time, p QuorumPolicy) Judgement {
	observers := max(p.Observers, 1)
	quorum := Quorum(observers)
	var fresh, unreachable, notReady []View
	for _, v := range views {
		if p.MaxAge > 0 && now.Sub(v.At) > p.MaxAge {
			continue
		}
		fresh = append(fresh, v)
		switch v.Probe.Outcome {
		case probe.Unreachable:
			unreachable = append(unreachable, v)
		case probe.NotReady:
			notReady = append(notReady, v)
		}
	}
	failed := append(slices.Clone(unreachable), notReady...)
	switch {
	case len(fresh) < quorum:
		return Judgement{Unjudged: true, Probe: probe.Result{Outcome: probe.OK,
			Detail: fmt.Sprintf("only %d of %d DCs have a view younger than %s; a quorum is %d", len(fresh), observers, p.MaxAge, quorum)}}
	case len(unreachable) >= quorum:
		return Judgement{Probe: probe.Result{Outcome: probe.Unreachable, Detail: failedDetail(unreachable, observers)},
			FailingSince: quorumSince(unreachable, quorum)}
	case len(failed) >= quorum:
		return Judgement{Probe: probe.Result{Outcome: probe.NotReady, Detail: failedDetail(failed, observers)},
			FailingSince: quorumSince(failed, quorum)}
	case len(failed) > 0:
		return Judgement{Probe: probe.Result{Outcome: probe.OK,
			Detail: fmt.Sprintf("%s; the others reach it, so it counts as up", failedDetail(failed, observers))}}
	}
	return Judgement{Probe: probe.Result{Outcome: probe.OK}}
}

// quorumSince is when the quorum-th earliest of the failures began.
func quorumSince(failed []View, quorum int) time.Time {
	starts := make([]time.Time, 0, len(failed))
	for _, v := range failed {
		s := v.FailingSince
		if s.IsZero() {
			s = v.At
		}
		starts = append(starts, s)
	}
	slices.SortFunc(starts, time.Time.Compare)
	return starts[quorum-1]
}

// failedDetail says which DCs failed and what the first of them saw.
func failedDetail(failed []View, observers int) string {
	if observers == 1 {
		return failed[0].Probe.Detail // one DC: its own words, as without views
	}
	slices.SortFunc(failed, func(a, b View) int { return strings.Compare(a.Observer, b.Observer) })
	names := make([]string, len(failed))
	for i, v := range failed {
		names[i] = observerName(v.Observer)
	}
	return fmt.Sprintf("failed from %s (%d of %d DCs): %s", strings.Join(names, ", "), len(failed), observers, failed[0].Probe.Detail)
}

func observerName(dc string) string {
	if dc == "" {
		return "the controller"
	}
	return dc
}
