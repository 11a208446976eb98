// Package rollout decides how a new generation of a deployable reaches its
// clusters wave by wave. It is a pure function of the spec's waves, the
// clusters the placement matches, what each cluster reported, the control
// a person set (pause, resume, rollback, approvals) and the clock; the
// syncer (internal/control/syncer) reads those, calls Decide, stores the
// status it returns and applies, on each cluster, the generation it names.
//
// The semantics follow OCM's Placement rollout helpers
// (open-cluster-management-io/api, cluster/v1alpha1/helpers.go:
// RolloutHandler and determineRolloutStatus): a cluster given the new
// generation is Progressing until it succeeds, and counts as failed
// (OCM's TimeOut) once progressDeadline passed without success; a group
// moves on only after minSuccessTime; more than maxFailures failures stop
// the rollout. Approvals between waves follow KubeFleet's staged update
// runs (an approval gates the next stage). Two rules are purser's own:
// health counts only for the rollout's generation and only when observed
// after that generation landed (Report), and a failed rollout may roll
// the clusters already done back to the previous generation by itself.
package rollout

import (
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Cluster is a cluster that the deployable's placement matches.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Report is what is known of the deployable on one cluster.
type Report struct {
	// State and SyncedGeneration are the syncer's status row; SyncedAt is
	// when that generation was seen applied (the row's lastSyncedAt).
	State            v1alpha1.SyncState
	SyncedGeneration int64
	// StateGeneration is the generation State is about (the one last
	// attempted): an Error about an older generation is not this one's.
	StateGeneration int64
	SyncedAt        time.Time
	Message         string
	// AgentReportAt is the time of the latest report of the cluster's
	// agent. Gates judge objects from the agent's reports, so a cluster
	// whose agent has not reported since the generation landed is not
	// healthy yet: what is known of it may describe the old generation.
	AgentReportAt time.Time
	// NoAgent: the cluster has no agent, so no gate can judge it; the
	// syncer's own observation (Synced at the generation) is all there is.
	NoAgent bool
	// Unreachable: purser judges the cluster NotReady. An Error there is
	// the cluster's absence, not a refusal of the generation: it is left
	// to progressDeadlineSeconds, as a cluster that left would be.
	Unreachable bool
	// Problems are objects that gates found unhealthy, with when each was
	// observed; one observed before the generation landed does not count.
	Problems []Problem
}

// Problem is one object a gate judged unhealthy.
type Problem struct {
	Object string // kind/namespace/name
	Reason string
	At     time.Time
}

// Control is what people set on the rollout of one generation.
type Control = v1alpha1.RolloutControl

// Input is everything Decide looks at.
type Input struct {
	Spec       v1alpha1.Rollout
	Generation int64 // the deployable's generation, the one rolled out
	// Previous is the newest generation that reached every cluster
	// placed at the time (0: none): the fallback of a cluster that no
	// earlier decision named (one that joined).
	Previous int64
	Clusters []Cluster
	Reports  map[string]Report
	// Prior is the status Decide returned last, nil for none.
	Prior   *v1alpha1.RolloutStatus
	Control Control
	Now     time.Time
}

// Decision is what Decide returns.
type Decision struct {
	Status v1alpha1.RolloutStatus
	// Targets is the generation each matching cluster should hold now
	// (0: none); a matching cluster missing from it keeps the previous.
	Targets map[string]int64
	// Kept is every generation a cluster holds or falls back to under
	// this decision, the rolled-out one included: the generations whose
	// specs must be kept.
	Kept []int64
	// Events are the transitions to audit, oldest first; none when
	// nothing but the clock moved.
	Events []string
	// After is when to decide again at the latest, for a clock-driven
	// step (minSuccessSeconds or a deadline); 0 means no deadline.
	After time.Duration
}

// Decide decides the rollout's next step. It is deterministic: the same
// input gives the same decision, so replicas that decide concurrently
// agree, and the store's optimistic write keeps one.
//
// Clusters that join or leave mid-rollout: a cluster is placed in its wave
// each time (the first wave that names or selects it, else the last). One
// that joins a wave already done gets the new generation at once, and its
// failure counts like any other; one that joins the current or a later
// wave waits for it. One that leaves is dropped from the counts: a wave
// whose clusters all left is done. Neither fails the rollout by itself.
//
// A cluster not given the generation keeps its fallback: the newest
// generation an earlier decision gave it, whether or not that generation
// completed elsewhere, so that a generation pushed mid-rollout never
// takes away what the clusters of later waves hold. A rollback returns
// each cluster to its own fallback.
func Decide(in Input) Decision {
	now := in.Now.UTC()
	st := v1alpha1.RolloutStatus{Generation: in.Generation, PreviousGeneration: in.Previous}
	var events []string
	resumes := 0
	fresh := in.Prior == nil || in.Prior.Generation != in.Generation
	if !fresh {
		st = *in.Prior
		st.PreviousGeneration = in.Previous
		st.Clusters = nil
		resumes = in.Prior.ObservedResumes
	}
	ctl := in.Control
	if ctl.Generation != in.Generation {
		ctl = Control{Generation: in.Generation}
	}
	if fresh {
		st.State, st.WaveIndex, st.Reason = v1alpha1.RolloutProgressing, 0, "WaveProgressing"
		st.StartedAt, st.WaveStartedAt = &now, &now
		st.Failures = 0
		resumes = ctl.Resumes
		events = append(events, fmt.Sprintf("rollout of generation %d started (previous %d)", in.Generation, in.Previous))
	}
	waves := in.Spec.Waves
	if len(waves) == 0 {
		waves = []v1alpha1.Wave{{Name: "all"}}
	}
	prior := map[string]v1alpha1.RolloutClusterStatus{}
	if !fresh {
		for _, c := range in.Prior.Clusters {
			prior[c.Cluster] = c
		}
	}
	fallbacks := fallbackGenerations(in, fresh)

	// A resume of a stopped rollout retries it; a rollback asked for by
	// hand wins over everything else.
	// Clusters a resumed halt had given the generation keep it: judged
	// afresh from the resume on, never taken back to their fallback.
	var regiven map[string]bool
	if ctl.Resumes > resumes {
		resumes = ctl.Resumes
		if st.State == v1alpha1.RolloutHalted {
			regiven = map[string]bool{}
			for name, p := range prior {
				regiven[name] = p.Generation == in.Generation
			}
		}
		if st.State == v1alpha1.RolloutHalted || st.State == v1alpha1.RolloutRolledBack {
			if st.State == v1alpha1.RolloutRolledBack {
				st.WaveIndex = 0
			}
			st.State, st.Reason, st.Message, st.Failures = v1alpha1.RolloutProgressing, "Resumed", "", 0
			st.WaveStartedAt = &now
			prior = map[string]v1alpha1.RolloutClusterStatus{}
			events = append(events, fmt.Sprintf("resumed at wave %s", waves[min(st.WaveIndex, len(waves)-1)].Name))
		}
	}
	if ctl.Rollback && st.State != v1alpha1.RolloutRolledBack {
		st.State, st.Reason, st.Message = v1alpha1.RolloutRolledBack, "RollbackRequested", "rolled back by hand to "+fallbackNames(in, fallbacks)
		events = append(events, st.Message)
	}
	if st.WaveIndex >= len(waves) {
		st.WaveIndex = len(waves) - 1
	}

	// Each cluster's wave and its health at the generation.
	members := make([]*member, 0, len(in.Clusters))
	byWave := make([][]*member, len(waves))
	selectors := waveSelectors(waves)
	for _, c := range in.Clusters {
		m := &member{name: c.Name, wave: waveOf(waves, selectors, c), rep: in.Reports[c.Name], fallback: fallbacks[c.Name]}
		p, seen := prior[c.Name]
		m.given = (seen && p.Generation == in.Generation) || m.wave < st.WaveIndex ||
			(st.State == v1alpha1.RolloutComplete && m.wave <= st.WaveIndex)
		switch {
		case regiven[c.Name]:
			m.given, m.health, m.msg, m.since = true, v1alpha1.WaveProgressing, "resumed: judged again from the next decision", &now
		case m.given:
			m.health, m.msg = judge(in.Generation, m.rep)
			m.since = p.Since
			if !seen || p.Health != m.health || p.Generation != in.Generation || m.since == nil {
				m.since = &now
			}
		}
		members = append(members, m)
		byWave[m.wave] = append(byWave[m.wave], m)
	}

	stopped := st.State == v1alpha1.RolloutHalted || st.State == v1alpha1.RolloutRolledBack
	var after time.Duration
	if !stopped {
		// Failures of the clusters given the generation, and of a wave
		// past its deadline.
		failures, first := 0, ""
		deadline := time.Duration(in.Spec.ProgressDeadlineSeconds) * time.Second
		for _, m := range members {
			if m.given && m.health == v1alpha1.WaveProgressing && deadline > 0 && m.wave == st.WaveIndex &&
				st.WaveStartedAt != nil && now.Sub(*st.WaveStartedAt) >= deadline {
				m.health, m.msg = v1alpha1.WaveFailed, fmt.Sprintf("not healthy within progressDeadlineSeconds (%d): %s", in.Spec.ProgressDeadlineSeconds, m.msg)
				m.since = &now
			}
			if m.given && m.health == v1alpha1.WaveFailed {
				failures++
				if first == "" {
					first = fmt.Sprintf("cluster %s: %s", m.name, m.msg)
				}
			}
		}
		if failures != st.Failures && failures > 0 {
			events = append(events, fmt.Sprintf("%d cluster(s) failed at generation %d: %s", failures, in.Generation, first))
		}
		st.Failures = failures
		if failures > int(in.Spec.MaxFailures) {
			stopped = true
			if in.Spec.OnFailure == v1alpha1.OnFailureRollback {
				st.State, st.Reason = v1alpha1.RolloutRolledBack, "ClusterFailed"
				st.Message = fmt.Sprintf("%d failure(s), more than maxFailures %d; rolled back to %s: %s", failures, in.Spec.MaxFailures, fallbackNames(in, fallbacks), first)
			} else {
				st.State, st.Reason = v1alpha1.RolloutHalted, "ClusterFailed"
				st.Message = fmt.Sprintf("%d failure(s), more than maxFailures %d; halted at wave %s: %s", failures, in.Spec.MaxFailures, waves[st.WaveIndex].Name, first)
			}
			events = append(events, st.Message)
		}
	}

	minSuccess := time.Duration(in.Spec.MinSuccessSeconds) * time.Second
	for !stopped && st.State != v1alpha1.RolloutComplete {
		w := st.WaveIndex
		paused := ctl.Paused
		if paused {
			if st.State != v1alpha1.RolloutPaused || st.Reason != "PausedByUser" {
				events = append(events, "paused by hand at wave "+waves[w].Name)
			}
			st.State, st.Reason, st.Message, st.AwaitingApproval = v1alpha1.RolloutPaused, "PausedByUser", "paused by hand", ""
			break
		}
		if st.State == v1alpha1.RolloutPaused {
			if st.Reason == "PausedByUser" {
				events = append(events, "resumed at wave "+waves[w].Name)
				st.WaveStartedAt = &now // the deadline counts from the resume
			}
			st.State, st.Reason, st.Message = v1alpha1.RolloutProgressing, "WaveProgressing", ""
		}
		if w > 0 && in.Spec.ApproveBetweenWaves && !slices.Contains(ctl.Approved, waves[w].Name) {
			if st.AwaitingApproval != waves[w].Name {
				events = append(events, fmt.Sprintf("wave %s waits for approval of generation %d", waves[w].Name, in.Generation))
			}
			st.State, st.Reason, st.AwaitingApproval = v1alpha1.RolloutPaused, "AwaitingApproval", waves[w].Name
			st.Message = fmt.Sprintf("wave %s waits for an approver: POST .../approve?generation=%d", waves[w].Name, in.Generation)
			break
		}
		if st.AwaitingApproval != "" {
			events = append(events, fmt.Sprintf("wave %s approved", st.AwaitingApproval))
			st.AwaitingApproval = ""
			st.WaveStartedAt = &now // the deadline counts from the approval
		}
		// Give the generation to as many clusters of the wave as
		// maxUnavailable allows: those not yet healthy hold the slots.
		limit := len(byWave[w])
		if mu := waves[w].MaxUnavailable; mu != nil {
			if n, err := intstr.GetScaledValueFromIntOrPercent(mu, len(byWave[w]), true); err == nil && n > 0 {
				limit = n
			}
		}
		busy := 0
		for _, m := range byWave[w] {
			if m.given && m.health != v1alpha1.WaveHealthy {
				busy++
			}
		}
		for _, m := range byWave[w] {
			if !m.given && busy < limit {
				m.given, busy = true, busy+1
				m.health, m.msg = judge(in.Generation, m.rep)
				if m.health == v1alpha1.WaveHealthy {
					// Healthy at once can only be a generation applied
					// before this rollout reached it (joined, resumed): it
					// still has to hold for minSuccessSeconds.
					m.health = v1alpha1.WaveProgressing
				}
				m.since = &now
			}
		}
		// Done when every cluster of the wave is healthy and the last
		// of them for minSuccessSeconds.
		done := true
		var last time.Time
		for _, m := range byWave[w] {
			if !m.given || m.health != v1alpha1.WaveHealthy {
				done = false
				break
			}
			if m.since != nil && m.since.After(last) {
				last = *m.since
			}
		}
		if !done {
			st.Reason = "WaveProgressing"
			st.Message = fmt.Sprintf("wave %s: %d of %d cluster(s) healthy at generation %d", waves[w].Name, countHealthy(byWave[w]), len(byWave[w]), in.Generation)
			if d := time.Duration(in.Spec.ProgressDeadlineSeconds) * time.Second; d > 0 && st.WaveStartedAt != nil {
				after = max(st.WaveStartedAt.Add(d).Sub(now), time.Second)
			}
			break
		}
		if held := now.Sub(last); held < minSuccess {
			st.Reason = "WaveSoaking"
			st.Message = fmt.Sprintf("wave %s healthy; the next starts after minSuccessSeconds (%d)", waves[w].Name, in.Spec.MinSuccessSeconds)
			after = minSuccess - held
			break
		}
		events = append(events, fmt.Sprintf("wave %s done at generation %d", waves[w].Name, in.Generation))
		if w == len(waves)-1 {
			st.State, st.Reason, st.Message = v1alpha1.RolloutComplete, "Complete", fmt.Sprintf("every wave holds generation %d", in.Generation)
			events = append(events, st.Message)
			break
		}
		st.WaveIndex = w + 1
		st.WaveStartedAt = &now
		events = append(events, fmt.Sprintf("wave %s started", waves[w+1].Name))
	}
	st.Wave = waves[st.WaveIndex].Name

	targets := make(map[string]int64, len(members))
	kept := []int64{in.Generation}
	rolledBack := st.State == v1alpha1.RolloutRolledBack
	sort.Slice(members, func(i, j int) bool { return members[i].name < members[j].name })
	for _, m := range members {
		cs := v1alpha1.RolloutClusterStatus{Cluster: m.name, Wave: waves[m.wave].Name, Generation: m.fallback,
			FallbackGeneration: m.fallback, GenerationApplied: appliedGeneration(m.rep), Health: v1alpha1.WavePrevious, Message: m.msg}
		if m.fallback > 0 && !slices.Contains(kept, m.fallback) {
			kept = append(kept, m.fallback)
		}
		if m.given && !rolledBack {
			cs.Generation, cs.Health, cs.Since = in.Generation, m.health, m.since
		} else if p, ok := prior[m.name]; ok && p.Health == v1alpha1.WavePrevious && p.Since != nil {
			cs.Since, cs.Message = p.Since, ""
		} else {
			cs.Since, cs.Message = &now, ""
		}
		targets[m.name] = cs.Generation
		st.Clusters = append(st.Clusters, cs)
	}
	st.ObservedResumes = resumes
	st.Control = nil
	slices.Sort(kept)
	return Decision{Status: st, Targets: targets, Kept: kept, Events: events, After: after}
}

// fallbackGenerations is, for each matching cluster, what it keeps while
// not given the generation. A new generation's rollout starts from what
// the latest decision gave each cluster (the generation it was given, or
// its fallback); a rollout under way keeps the fallbacks it started
// with. A cluster no decision named (it joined) falls back to Previous,
// and none falls back below it: Previous reached every cluster placed
// when it completed, and a status written before fallbacks were recorded
// names none.
func fallbackGenerations(in Input, fresh bool) map[string]int64 {
	out := make(map[string]int64, len(in.Clusters))
	for _, c := range in.Clusters {
		out[c.Name] = in.Previous
	}
	if in.Prior == nil || in.Prior.Generation < in.Previous {
		return out // a decision older than Previous was superseded everywhere
	}
	for _, p := range in.Prior.Clusters {
		had, ok := out[p.Cluster]
		if !ok {
			continue // no longer matching
		}
		g := p.FallbackGeneration
		if fresh {
			g = p.Generation
		}
		out[p.Cluster] = max(had, g)
	}
	return out
}

// fallbackNames says what a rollback returns the matching clusters to.
func fallbackNames(in Input, fallbacks map[string]int64) string {
	gens := make([]int64, 0, len(in.Clusters))
	for _, c := range in.Clusters {
		gens = append(gens, fallbacks[c.Name])
	}
	if len(gens) == 0 {
		gens = append(gens, in.Previous)
	}
	return v1alpha1.DescribeFallbacks(gens)
}

// judge says how a cluster given the generation stands, from what it
// reported. Only health observed after the generation landed counts.
func judge(gen int64, r Report) (v1alpha1.ClusterHealth, string) {
	landed := r.State == v1alpha1.StateSynced && r.SyncedGeneration == gen
	if r.State == v1alpha1.StateError && r.StateGeneration == gen && r.Unreachable {
		return v1alpha1.WaveProgressing, "the cluster is unreachable: " + r.Message
	}
	if r.State == v1alpha1.StateError && r.StateGeneration == gen {
		return v1alpha1.WaveFailed, "the cluster refused generation " + fmt.Sprint(gen) + ": " + r.Message
	}
	if !landed {
		return v1alpha1.WaveProgressing, fmt.Sprintf("waiting for generation %d to be applied", gen)
	}
	for _, p := range r.Problems {
		if !p.At.Before(r.SyncedAt) {
			return v1alpha1.WaveFailed, fmt.Sprintf("%s unhealthy after generation %d landed: %s", p.Object, gen, p.Reason)
		}
	}
	if !r.NoAgent && r.AgentReportAt.Before(r.SyncedAt) {
		return v1alpha1.WaveProgressing, fmt.Sprintf("generation %d applied; waiting for the agent to report since", gen)
	}
	return v1alpha1.WaveHealthy, ""
}

func appliedGeneration(r Report) int64 {
	if r.State == "" {
		return 0
	}
	return r.SyncedGeneration
}

// member is one matching cluster as Decide sees it.
type member struct {
	name  string
	wave  int
	given bool // holds, or was given, the new generation
	// fallback is what it keeps while not given the generation.
	fallback int64
	health   v1alpha1.ClusterHealth
	since    *time.Time
	msg      string
	rep      Report
}

func countHealthy(ms []*member) int {
	n := 0
	for _, m := range ms {
		if m.given && m.health == v1alpha1.WaveHealthy {
			n++
		}
	}
	return n
}

// waveSelectors parses each wave's selector once per decision; nil for a
// wave without one (or one that does not parse: validation refuses it).
func waveSelectors(waves []v1alpha1.Wave) []labels.Selector {
	out := make([]labels.Selector, len(waves))
	for i, w := range waves {
		if w.ClusterSelector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(w.ClusterSelector); err == nil {
				out[i] = sel
			}
		}
	}
	return out
}

// waveOf is the first wave that names or selects c, else the last.
func waveOf(waves []v1alpha1.Wave, selectors []labels.Selector, c Cluster) int {
	for i, w := range waves {
		if slices.Contains(w.Clusters, c.Name) {
			return i
		}
		if selectors[i] != nil && selectors[i].Matches(labels.Set(c.Labels)) {
			return i
		}
		if w.ClusterSelector == nil && len(w.Clusters) == 0 {
			return i // a wave that selects nothing in particular takes all
		}
	}
	return len(waves) - 1
}

// Target is the generation a decision gives one cluster (0: none). The
// decision may be about an older generation than the deployable's: until
// one about the new generation names the cluster, it holds what the
// latest decision gave it. A cluster no decision names (it just joined)
// holds previous, and so does every cluster when the latest decision is
// about a generation older than previous: one that reached every cluster
// (without a rollout, or by completing its own) superseded it.
func Target(st *v1alpha1.RolloutStatus, previous int64, cluster string) int64 {
	if st != nil && st.Generation >= previous {
		for _, c := range st.Clusters {
			if c.Cluster == cluster {
				return c.Generation
			}
		}
	}
	return previous
}
