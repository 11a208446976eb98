package rollout

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
)

// modelSeed and modelSteps let `make soak` run the model with a random
// seed and more steps; `make test` runs a fixed seed.
var (
	modelSeed  = flag.Uint64("rollout.model.seed", 1, "seed of TestRolloutModel (0: random)")
	modelSteps = flag.Int("rollout.model.steps", 400, "steps of each run of TestRolloutModel")
	modelRuns  = flag.Int("rollout.model.runs", 8, "runs of TestRolloutModel, each from its own seed")
)

// model is a deployable rolled out in waves over a changing farm, driven
// the way the store, the syncer and people drive it: the store's rule for
// the generations it keeps (store.Deployables.KeepPrevious and the
// syncer's drop of generations no decision names), the syncer's rule for
// what each cluster holds (Target, applied at any moment, also between a
// change and the first decision about it), and Decide. Its apply log is
// what each cluster holds.
type model struct {
	t    *testing.T
	rng  *rand.Rand
	now  time.Time
	spec v1alpha1.Rollout
	pool []Cluster

	gen      int64 // the deployable's generation; 0: not created yet
	rolls    bool  // the live generation rolls out in waves
	previous int64
	kept     []int64 // generations kept beside gen and previous
	prior    *v1alpha1.RolloutStatus
	control  Control
	matching map[string]bool
	reports  map[string]Report
	holds    map[string]int64 // the apply log: what each cluster holds
	// rolledBackTo is, per cluster, every generation a rollback
	// decision returned it to: the only ones it may go back to.
	rolledBackTo map[string][]int64
	log          []string
}

func newModel(t *testing.T, seed uint64) *model {
	ws := dcWaves()
	ws[2].MaxUnavailable = &intstr.IntOrString{Type: intstr.Int, IntVal: 1}
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0,
		spec:     v1alpha1.Rollout{Waves: ws, MinSuccessSeconds: 20, ProgressDeadlineSeconds: 60, MaxFailures: 0},
		pool:     farm("a-dc-1", "b-dc-1", "c-dc-2", "d-dc-3", "e-dc-3", "f-dc-4"),
		matching: map[string]bool{}, reports: map[string]Report{}, holds: map[string]int64{}, rolledBackTo: map[string][]int64{}}
	for _, c := range m.pool[:5] {
		m.matching[c.Name] = true
	}
	if m.rng.IntN(2) == 0 {
		m.spec.OnFailure = v1alpha1.OnFailureRollback
	}
	return m
}

// put is a change of the spec through the API: a new generation, with
// the generation it replaces kept as the store keeps it.
func (m *model) put() {
	rolls := m.rng.IntN(6) > 0
	if m.gen > 0 && rolls {
		done := !m.rolls || (m.prior != nil && m.prior.Generation == m.gen && m.prior.State == v1alpha1.RolloutComplete)
		given := m.prior != nil && m.prior.Generation == m.gen && slices.ContainsFunc(m.prior.Clusters,
			func(c v1alpha1.RolloutClusterStatus) bool { return c.Generation == m.gen })
		if done {
			m.previous = m.gen
		} else if given && !slices.Contains(m.kept, m.gen) {
			m.kept = append(m.kept, m.gen)
		}
	}
	m.gen++
	m.rolls = rolls
	m.control = Control{Generation: m.gen}
	m.step("put generation %d (rolls out: %v)", m.gen, rolls)
}

// decide is one pass of the syncer's rollout loop.
func (m *model) decide() {
	if !m.rolls || m.gen == 0 {
		return
	}
	in := Input{Spec: m.spec, Generation: m.gen, Previous: m.previous, Reports: map[string]Report{}, Prior: m.prior,
		Control: m.control, Now: m.now}
	for _, c := range m.pool {
		if m.matching[c.Name] {
			in.Clusters = append(in.Clusters, c)
			in.Reports[c.Name] = m.reports[c.Name]
		}
	}
	d := Decide(in)
	m.checkDecision(in, d)
	st := d.Status
	m.prior = &st
	if st.State == v1alpha1.RolloutRolledBack {
		for _, cs := range st.Clusters {
			m.rolledBackTo[cs.Cluster] = append(m.rolledBackTo[cs.Cluster], cs.Generation)
		}
	}
	m.kept = slices.DeleteFunc(m.kept, func(g int64) bool { return !slices.Contains(d.Kept, g) })
	if len(d.Events) > 0 {
		m.step("decide: %s", strings.Join(d.Events, "; "))
	}
}

// apply is one sync of one cluster by the syncer: it takes what the
// latest decision gives it, and the cluster reports it applied.
func (m *model) apply(c string) {
	if m.gen == 0 {
		return
	}
	before := m.holds[c]
	switch {
	case !m.matching[c]:
		m.holds[c] = 0
	case !m.rolls:
		m.holds[c] = m.gen
	default:
		g := Target(m.prior, m.previous, c)
		if g != 0 && g != m.gen && g != m.previous && !slices.Contains(m.kept, g) {
			m.t.Fatalf("cluster %s should hold generation %d, whose spec is not kept (gen %d, previous %d, kept %v)\n%s",
				c, g, m.gen, m.previous, m.kept, m.history())
		}
		m.holds[c] = g
	}
	if m.holds[c] > 0 {
		m.reports[c] = Report{State: v1alpha1.StateSynced, SyncedGeneration: m.holds[c], StateGeneration: m.holds[c], SyncedAt: m.now,
			AgentReportAt: m.reports[c].AgentReportAt}
	}
	if m.holds[c] != before {
		m.step("apply %s: %d -> %d", c, before, m.holds[c])
	}
}

// checkDecision holds every decision to the rules: no cluster is given
// the generation before its wave, every generation named is kept, and a
// rollback returns each cluster to what it held before.
func (m *model) checkDecision(in Input, d Decision) {
	sel := waveSelectors(m.spec.Waves)
	for _, cs := range d.Status.Clusters {
		var c Cluster
		for _, p := range m.pool {
			if p.Name == cs.Cluster {
				c = p
			}
		}
		w := waveOf(m.spec.Waves, sel, c)
		if cs.Generation == in.Generation && w > d.Status.WaveIndex && d.Status.State != v1alpha1.RolloutComplete {
			m.t.Fatalf("cluster %s of wave %d given generation %d while the rollout is at wave %d\n%s", cs.Cluster, w, in.Generation, d.Status.WaveIndex, m.history())
		}
		if cs.Generation != 0 && !slices.Contains(d.Kept, cs.Generation) {
			m.t.Fatalf("cluster %s is given generation %d that the decision does not keep (%v)\n%s", cs.Cluster, cs.Generation, d.Kept, m.history())
		}
		if d.Status.State == v1alpha1.RolloutRolledBack && cs.Generation != cs.FallbackGeneration {
			m.t.Fatalf("rolled back, cluster %s gets %d, not its fallback %d\n%s", cs.Cluster, cs.Generation, cs.FallbackGeneration, m.history())
		}
		if cs.Generation != in.Generation && cs.Generation != cs.FallbackGeneration {
			m.t.Fatalf("cluster %s not given %d holds %d, not its fallback %d\n%s", cs.Cluster, in.Generation, cs.Generation, cs.FallbackGeneration, m.history())
		}
	}
}

func (m *model) step(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%6.0fs ", m.now.Sub(t0).Seconds())+fmt.Sprintf(format, args...))
}

func (m *model) history() string {
	from := max(0, len(m.log)-40)
	return strings.Join(m.log[from:], "\n")
}

// TestRolloutModel drives random sequences of changes (at any moment:
// mid-wave, mid-soak, before the first decision about the last one),
// pauses, resumes, rollbacks, refusals that halt or roll back, agents'
// reports, clusters joining and leaving, and syncs in any order, and
// checks after every step that no cluster that held the object while it
// stayed placed lost it or went back to an older generation (only a
// rollback does, to what the cluster held before the rolled-back
// generation reached it: nothing, where it held nothing), and that every
// decision keeps to the waves. `make soak` runs it with a random seed and more steps.
func TestRolloutModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	for run := range *modelRuns {
		s := seed + uint64(run)
		t.Run(fmt.Sprint("seed-", s), func(t *testing.T) {
			m := newModel(t, s)
			m.put()
			for range *modelSteps {
				before := map[string]int64{}
				placed := map[string]bool{}
				for c, g := range m.holds {
					before[c] = g
				}
				for c, ok := range m.matching {
					placed[c] = ok
				}
				m.randomStep()
				for c, had := range before {
					now := m.holds[c]
					if had == 0 || !placed[c] || !m.matching[c] || now >= had {
						continue
					}
					// Only a rollback takes a cluster back, to what it
					// held before (checkDecision); to nothing only where
					// it held nothing. Its apply may come after later
					// changes.
					rolledBack := slices.Contains(m.rolledBackTo[c], now)
					switch {
					case now == 0 && !rolledBack:
						t.Fatalf("cluster %s lost generation %d while placed\n%s", c, had, m.history())
					case !rolledBack:
						t.Fatalf("cluster %s went back from generation %d to %d without a rollback\n%s", c, had, now, m.history())
					}
				}
			}
			t.Logf("seed %d: %d steps, generation %d, previous %d, kept %v, holds %v", s, *modelSteps, m.gen, m.previous, m.kept, m.holds)
		})
	}
}

func (m *model) randomStep() {
	c := m.pool[m.rng.IntN(len(m.pool))].Name
	switch r := m.rng.IntN(100); {
	case r < 8:
		m.put()
	case r < 35:
		m.decide()
	case r < 60:
		m.apply(c)
	case r < 72:
		m.now = m.now.Add(time.Duration(1+m.rng.IntN(30)) * time.Second)
	case r < 80:
		for n := range m.reports {
			rep := m.reports[n]
			rep.AgentReportAt = m.now
			m.reports[n] = rep
		}
	case r < 82:
		if m.holds[c] > 0 || m.rng.IntN(2) == 0 {
			m.reports[c] = Report{State: v1alpha1.StateError, SyncedGeneration: m.holds[c], StateGeneration: m.gen, Message: "refused", SyncedAt: m.now}
			m.step("%s refuses generation %d", c, m.gen)
		}
	case r < 85:
		m.control.Paused = !m.control.Paused
		m.step("paused: %v", m.control.Paused)
	case r < 87:
		m.control.Resumes++
		m.step("resume")
	case r < 89:
		m.control.Rollback = true
		m.step("rollback by hand")
	case r < 91:
		if m.prior != nil && m.prior.AwaitingApproval != "" {
			m.control.Approved = append(m.control.Approved, m.prior.AwaitingApproval)
		}
	case r < 95:
		m.matching[c] = !m.matching[c]
		m.step("%s matching: %v", c, m.matching[c])
		if !m.matching[c] {
			m.apply(c) // leaving the placement removes it: the syncer's rule
		}
	default:
		m.spec.ApproveBetweenWaves = !m.spec.ApproveBetweenWaves
	}
}
