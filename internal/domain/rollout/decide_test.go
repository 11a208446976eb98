package rollout

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

func dcWaves() []v1alpha1.Wave {
	var ws []v1alpha1.Wave
	for _, dc := range []string{"dc-1", "dc-2", "dc-3"} {
		ws = append(ws, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
	}
	return ws
}

func farm(names ...string) []Cluster {
	var cs []Cluster
	for _, n := range names {
		// c1-dc-1 is in dc-1
		cs = append(cs, Cluster{Name: n, Labels: map[string]string{"dc": n[strings.Index(n, "-")+1:]}})
	}
	return cs
}

// synced is a report of generation gen applied at at, with the agent
// reporting at agent.
func synced(gen int64, at, agent time.Time) Report {
	return Report{State: v1alpha1.StateSynced, SyncedGeneration: gen, StateGeneration: gen, SyncedAt: at, AgentReportAt: agent}
}

// run feeds each decision back as the prior of the next, at the given
// times, and returns the last.
type sim struct {
	t   *testing.T
	in  Input
	dec Decision
	all []string // every event so far
}

func newSim(t *testing.T, spec v1alpha1.Rollout, clusters []Cluster) *sim {
	return &sim{t: t, in: Input{Spec: spec, Generation: 2, Previous: 1, Clusters: clusters, Reports: map[string]Report{}, Now: t0,
		Control: Control{Generation: 2}}}
}

func (s *sim) at(d time.Duration) Decision {
	s.in.Now = t0.Add(d)
	s.dec = Decide(s.in)
	s.all = append(s.all, s.dec.Events...)
	st := s.dec.Status
	s.in.Prior = &st
	return s.dec
}

func (s *sim) report(cluster string, r Report) { s.in.Reports[cluster] = r }

func targeted(d Decision, gen int64) []string {
	var out []string
	for c, g := range d.Targets {
		if g == gen {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func expect(t *testing.T, d Decision, state v1alpha1.RolloutState, wave string, onNew ...string) {
	t.Helper()
	if d.Status.State != state || d.Status.Wave != wave {
		t.Fatalf("state %s wave %s, want %s wave %s (%s: %s)", d.Status.State, d.Status.Wave, state, wave, d.Status.Reason, d.Status.Message)
	}
	if got := targeted(d, 2); !slices.Equal(got, onNew) {
		t.Fatalf("clusters on generation 2: %v, want %v (%s)", got, onNew, d.Status.Message)
	}
}

func TestWavesAdvanceAfterMinSuccess(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves(), MinSuccessSeconds: 30}, farm("a-dc-1", "b-dc-2", "c-dc-3"))
	expect(t, s.at(0), v1alpha1.RolloutProgressing, "dc-1", "a-dc-1")
	if got := s.dec.Targets["b-dc-2"]; got != 1 {
		t.Fatalf("b-dc-2 should keep generation 1, gets %d", got)
	}
	// Applied at 5s, the agent reporting since: healthy, soaking.
	s.report("a-dc-1", synced(2, t0.Add(5*time.Second), t0.Add(6*time.Second)))
	d := s.at(7 * time.Second)
	expect(t, d, v1alpha1.RolloutProgressing, "dc-1", "a-dc-1")
	if d.Status.Reason != "WaveSoaking" || d.After != 30*time.Second {
		t.Fatalf("reason %s after %s, want WaveSoaking after 30s", d.Status.Reason, d.After)
	}
	expect(t, s.at(36*time.Second), v1alpha1.RolloutProgressing, "dc-1", "a-dc-1")
	expect(t, s.at(37*time.Second), v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2")
	s.report("b-dc-2", synced(2, t0.Add(38*time.Second), t0.Add(39*time.Second)))
	s.at(40 * time.Second)
	expect(t, s.at(71*time.Second), v1alpha1.RolloutProgressing, "dc-3", "a-dc-1", "b-dc-2", "c-dc-3")
	s.report("c-dc-3", synced(2, t0.Add(72*time.Second), t0.Add(72*time.Second)))
	s.at(73 * time.Second)
	expect(t, s.at(104*time.Second), v1alpha1.RolloutComplete, "dc-3", "a-dc-1", "b-dc-2", "c-dc-3")
	// Idle afterwards: no event, the very same status (so nothing is
	// written), however much later.
	before, _ := json.Marshal(s.dec.Status)
	for _, later := range []time.Duration{200 * time.Second, time.Hour} {
		d := s.at(later)
		after, _ := json.Marshal(d.Status)
		if len(d.Events) != 0 || !bytes.Equal(before, after) {
			t.Fatalf("idle decision moved: %v\n%s\n%s", d.Events, before, after)
		}
	}
	for _, want := range []string{"rollout of generation 2 started", "wave dc-1 done", "wave dc-2 started", "every wave holds generation 2"} {
		if !slices.ContainsFunc(s.all, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("events %q lack %q", s.all, want)
		}
	}
}

func TestStaleSignalsNeverCount(t *testing.T) {
	cases := []struct {
		name string
		rep  Report
	}{
		{"synced at the previous generation", synced(1, t0.Add(-time.Hour), t0.Add(time.Second))},
		{"agent report older than the apply", synced(2, t0.Add(5*time.Second), t0.Add(4*time.Second))},
		{"not applied yet", Report{State: v1alpha1.StateOutOfSync, SyncedGeneration: 1, StateGeneration: 2, AgentReportAt: t0.Add(time.Second)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, v1alpha1.Rollout{Waves: dcWaves()}, farm("a-dc-1", "b-dc-2"))
			s.at(0)
			s.report("a-dc-1", c.rep)
			d := s.at(time.Hour)
			expect(t, d, v1alpha1.RolloutProgressing, "dc-1", "a-dc-1")
			if h := d.Status.Clusters[0].Health; h != v1alpha1.WaveProgressing {
				t.Fatalf("health %s, want Progressing", h)
			}
		})
	}
}

func TestFailureHaltsOrRollsBack(t *testing.T) {
	problem := func(at time.Duration) Report {
		r := synced(2, t0.Add(5*time.Second), t0.Add(6*time.Second))
		r.Problems = []Problem{{Object: "Deployment/web/front", Reason: "Available=False", At: t0.Add(at)}}
		return r
	}
	cases := []struct {
		name        string
		spec        v1alpha1.Rollout
		rep         Report
		state       v1alpha1.RolloutState
		onNew       []string
		wantMessage string
	}{
		{"problem before landing ignored", v1alpha1.Rollout{Waves: dcWaves()}, problem(time.Second), v1alpha1.RolloutProgressing, []string{"a-dc-1", "b-dc-2"}, ""},
		{"halt", v1alpha1.Rollout{Waves: dcWaves()}, problem(8 * time.Second), v1alpha1.RolloutHalted, []string{"a-dc-1"}, "Deployment/web/front"},
		{"rollback", v1alpha1.Rollout{Waves: dcWaves(), OnFailure: v1alpha1.OnFailureRollback}, problem(8 * time.Second), v1alpha1.RolloutRolledBack, nil, "cluster a-dc-1"},
		{"error refusing the generation", v1alpha1.Rollout{Waves: dcWaves()},
			Report{State: v1alpha1.StateError, SyncedGeneration: 1, StateGeneration: 2, Message: "the cluster refused the object"},
			v1alpha1.RolloutHalted, []string{"a-dc-1"}, "refused"},
		{"an unreachable cluster's error waits for the deadline", v1alpha1.Rollout{Waves: dcWaves()},
			Report{State: v1alpha1.StateError, SyncedGeneration: 1, StateGeneration: 2, Message: "connection refused", Unreachable: true},
			v1alpha1.RolloutProgressing, []string{"a-dc-1"}, ""},
		{"an old generation's error is not this one's", v1alpha1.Rollout{Waves: dcWaves()},
			Report{State: v1alpha1.StateError, SyncedGeneration: 1, StateGeneration: 1, Message: "old"},
			v1alpha1.RolloutProgressing, []string{"a-dc-1"}, ""},
		{"within maxFailures", v1alpha1.Rollout{Waves: dcWaves(), MaxFailures: 1}, problem(8 * time.Second), v1alpha1.RolloutProgressing, []string{"a-dc-1"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, c.spec, farm("a-dc-1", "b-dc-2"))
			s.at(0)
			s.report("a-dc-1", c.rep)
			d := s.at(10 * time.Second)
			wave := "dc-1"
			if len(c.onNew) == 2 {
				wave = "dc-2"
			}
			expect(t, d, c.state, wave, c.onNew...)
			if !strings.Contains(d.Status.Message, c.wantMessage) {
				t.Fatalf("message %q lacks %q", d.Status.Message, c.wantMessage)
			}
			if c.state == v1alpha1.RolloutRolledBack && d.Targets["a-dc-1"] != 1 {
				t.Fatalf("a-dc-1 should be back on generation 1, gets %d", d.Targets["a-dc-1"])
			}
			// A stopped rollout stays stopped.
			s.report("a-dc-1", synced(2, t0.Add(5*time.Second), t0.Add(20*time.Second)))
			if c.state != v1alpha1.RolloutProgressing {
				expect(t, s.at(time.Hour), c.state, wave, c.onNew...)
			}
		})
	}
}

func TestProgressDeadline(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves(), ProgressDeadlineSeconds: 60}, farm("a-dc-1", "b-dc-2"))
	s.at(0)
	if d := s.at(59 * time.Second); d.Status.State != v1alpha1.RolloutProgressing || d.After != time.Second {
		t.Fatalf("state %s after %s before the deadline", d.Status.State, d.After)
	}
	d := s.at(60 * time.Second)
	expect(t, d, v1alpha1.RolloutHalted, "dc-1", "a-dc-1")
	if !strings.Contains(d.Status.Message, "progressDeadlineSeconds") {
		t.Fatalf("message %q", d.Status.Message)
	}
}

func TestMaxUnavailable(t *testing.T) {
	one := intstr.FromInt32(1)
	spec := v1alpha1.Rollout{Waves: []v1alpha1.Wave{{Name: "all", MaxUnavailable: &one}}}
	s := newSim(t, spec, farm("a-dc-1", "b-dc-1", "c-dc-1"))
	expect(t, s.at(0), v1alpha1.RolloutProgressing, "all", "a-dc-1")
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	expect(t, s.at(2*time.Second), v1alpha1.RolloutProgressing, "all", "a-dc-1", "b-dc-1")
	s.report("b-dc-1", synced(2, t0.Add(3*time.Second), t0.Add(3*time.Second)))
	expect(t, s.at(4*time.Second), v1alpha1.RolloutProgressing, "all", "a-dc-1", "b-dc-1", "c-dc-1")
}

func TestApprovalBetweenWaves(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves(), ApproveBetweenWaves: true, ProgressDeadlineSeconds: 60}, farm("a-dc-1", "b-dc-2"))
	s.at(0)
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	d := s.at(2 * time.Second)
	expect(t, d, v1alpha1.RolloutPaused, "dc-2", "a-dc-1")
	if d.Status.AwaitingApproval != "dc-2" || d.Status.Reason != "AwaitingApproval" {
		t.Fatalf("awaiting %q reason %s", d.Status.AwaitingApproval, d.Status.Reason)
	}
	// An approval of another generation does not count.
	s.in.Control = Control{Generation: 3, Approved: []string{"dc-2"}}
	expect(t, s.at(3*time.Second), v1alpha1.RolloutPaused, "dc-2", "a-dc-1")
	// Approved an hour later: the deadline counts from the approval.
	s.in.Control = Control{Generation: 2, Approved: []string{"dc-2"}}
	expect(t, s.at(time.Hour), v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2")
	expect(t, s.at(time.Hour+59*time.Second), v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2")
	expect(t, s.at(time.Hour+60*time.Second), v1alpha1.RolloutHalted, "dc-2", "a-dc-1", "b-dc-2")
}

func TestPauseResumeRollbackByHand(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves()}, farm("a-dc-1", "b-dc-2"))
	s.at(0)
	s.in.Control.Paused = true
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	expect(t, s.at(2*time.Second), v1alpha1.RolloutPaused, "dc-1", "a-dc-1")
	expect(t, s.at(time.Hour), v1alpha1.RolloutPaused, "dc-1", "a-dc-1")
	s.in.Control.Paused = false
	expect(t, s.at(time.Hour+time.Second), v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2")
	s.in.Control.Rollback = true
	d := s.at(time.Hour + 2*time.Second)
	expect(t, d, v1alpha1.RolloutRolledBack, "dc-2")
	if d.Targets["a-dc-1"] != 1 || d.Targets["b-dc-2"] != 1 {
		t.Fatalf("targets %v, want every cluster on 1", d.Targets)
	}
	// Resume retries from the first wave.
	s.in.Control.Rollback, s.in.Control.Resumes = false, 1
	expect(t, s.at(time.Hour+3*time.Second), v1alpha1.RolloutProgressing, "dc-1", "a-dc-1")
	// The same resume acts once.
	if d := s.at(time.Hour + 4*time.Second); slices.ContainsFunc(d.Events, func(e string) bool { return strings.HasPrefix(e, "resumed") }) {
		t.Fatalf("resume acted twice: %v", d.Events)
	}
}

func TestClustersJoinAndLeave(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves()}, farm("a-dc-1", "x-dc-1", "b-dc-2"))
	s.at(0)
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	// x-dc-1 leaves before it reported: the wave is done without it.
	s.in.Clusters = farm("a-dc-1", "b-dc-2")
	expect(t, s.at(2*time.Second), v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2")
	// y-dc-1 joins the wave already done: it gets the generation at once;
	// z-dc-3 joins a later wave and waits.
	s.in.Clusters = farm("a-dc-1", "b-dc-2", "y-dc-1", "z-dc-3")
	d := s.at(3 * time.Second)
	expect(t, d, v1alpha1.RolloutProgressing, "dc-2", "a-dc-1", "b-dc-2", "y-dc-1")
	if d.Targets["z-dc-3"] != 1 {
		t.Fatalf("z-dc-3 should keep 1, gets %d", d.Targets["z-dc-3"])
	}
	// A cluster no wave selects belongs to the last one.
	s.in.Clusters = append(s.in.Clusters, Cluster{Name: "lab"})
	s.at(4 * time.Second)
	if w := s.dec.Status.Clusters[slices.IndexFunc(s.dec.Status.Clusters, func(c v1alpha1.RolloutClusterStatus) bool { return c.Cluster == "lab" })].Wave; w != "dc-3" {
		t.Fatalf("lab is in wave %s, want dc-3", w)
	}
}

func TestCompleteTakesJoiners(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: []v1alpha1.Wave{{Name: "all"}}}, farm("a-dc-1"))
	s.at(0)
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	expect(t, s.at(2*time.Second), v1alpha1.RolloutComplete, "all", "a-dc-1")
	s.in.Clusters = farm("a-dc-1", "b-dc-1")
	expect(t, s.at(3*time.Second), v1alpha1.RolloutComplete, "all", "a-dc-1", "b-dc-1")
}

func TestNewGenerationStartsOver(t *testing.T) {
	s := newSim(t, v1alpha1.Rollout{Waves: dcWaves()}, farm("a-dc-1", "b-dc-2"))
	s.at(0)
	s.report("a-dc-1", synced(2, t0.Add(time.Second), t0.Add(time.Second)))
	s.at(2 * time.Second)
	if s.dec.Targets["b-dc-2"] != 2 {
		t.Fatalf("wave dc-2 should have been given generation 2: %v", s.dec.Targets)
	}
	s.in.Generation, s.in.Previous = 3, 1 // generation 2 never completed: 1 stays the previous
	d := s.at(3 * time.Second)
	// b-dc-2 was given 2 before 3 came: it keeps 2 until its wave gives
	// it 3, never the previous generation.
	if d.Status.Wave != "dc-1" || d.Targets["a-dc-1"] != 3 || d.Targets["b-dc-2"] != 2 {
		t.Fatalf("wave %s targets %v", d.Status.Wave, d.Targets)
	}
	if !slices.Equal(d.Kept, []int64{2, 3}) {
		t.Fatalf("kept %v, want [2 3]", d.Kept)
	}
	// Rolled back by hand, each cluster returns to what it held before 3
	// reached it: a-dc-1 to 2, b-dc-2 (never reached) stays on 2.
	s.in.Control = Control{Generation: 3, Rollback: true}
	d = s.at(4 * time.Second)
	if d.Status.State != v1alpha1.RolloutRolledBack || d.Targets["a-dc-1"] != 2 || d.Targets["b-dc-2"] != 2 {
		t.Fatalf("rolled back: %s targets %v", d.Status.State, d.Targets)
	}
	if !strings.Contains(d.Status.Message, "generation 2") {
		t.Fatalf("rollback message %q", d.Status.Message)
	}
}
