package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// agents stands for the clusters' agents as the ingester records them: a
// heartbeat with synced caches every 100 ms, for the clusters not held
// back. Holding one back is how a test shows that a wave waits for a
// report newer than the generation's apply.
type agents struct {
	mu   sync.Mutex
	held map[string]bool
}

func (a *agents) hold(cluster string, held bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[cluster] = held
}

func (f *fixture) startAgents(clusters ...string) *agents {
	a := &agents{held: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			a.mu.Lock()
			var beat []string
			for _, c := range clusters {
				if !a.held[c] {
					beat = append(beat, c)
				}
			}
			a.mu.Unlock()
			_ = f.store.Tx(ctx, func(tx *store.Tx) error {
				for _, c := range beat {
					if err := tx.Agents().RecordHeartbeat(ctx, c, time.Now(), nil, true); err != nil {
						return err
					}
				}
				return nil
			})
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	return a
}

// putSpec writes a whole spec as the API does, keeping the generation it
// replaces when the new one rolls out (store.Deployables.KeepPrevious).
func (f *fixture) putSpec(name string, spec v1alpha1.DeployableSpec) *store.Deployable {
	f.t.Helper()
	var secret []byte
	hash := v1alpha1.SpecHash(spec)
	if spec.Template["kind"] == "Secret" {
		plain, values, err := seal.SplitSecret(spec.Template)
		if err != nil {
			f.t.Fatal(err)
		}
		spec.Template = plain
		if secret, err = f.sealer.Seal(values, seal.SecretBinding(f.ns, name)); err != nil {
			f.t.Fatal(err)
		}
		hash = v1alpha1.SpecHash(spec) + "-" + f.sealer.Fingerprint(values)[:16]
	}
	doc, err := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: spec})
	if err != nil {
		f.t.Fatal(err)
	}
	var rec *store.Deployable
	ctx := context.Background()
	err = f.store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Deployables().Get(ctx, f.ns, name)
		if errors.Is(err, store.ErrNotFound) {
			rec = &store.Deployable{Namespace: f.ns, Name: name, UID: randomHex(16), Generation: 1, Spec: doc, Secret: secret, SpecHash: hash}
			return tx.Deployables().Create(ctx, rec)
		}
		if err != nil {
			return err
		}
		if spec.Rollout != nil {
			var old store.Document[v1alpha1.DeployableSpec]
			if err := json.Unmarshal(rec.Spec, &old); err != nil {
				return err
			}
			if err := tx.Deployables().KeepPrevious(ctx, rec, old.Spec.Rollout != nil); err != nil {
				return err
			}
		}
		rec.Spec, rec.Secret, rec.SpecHash = doc, secret, hash
		rec.Generation++
		return tx.Deployables().Update(ctx, rec)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

func (f *fixture) rollout(ctx context.Context, uid string) (*v1alpha1.RolloutStatus, error) {
	var st *v1alpha1.RolloutStatus
	err := f.store.Read(ctx, func(tx *store.Tx) error {
		r, err := tx.Deployables().GetRollout(ctx, uid)
		if err != nil {
			return err
		}
		st = &v1alpha1.RolloutStatus{}
		return json.Unmarshal(r.Status, st)
	})
	return st, err
}

// waitRollout waits until the rollout of rec's generation satisfies ok.
func (f *fixture) waitRollout(rec *store.Deployable, what string, ok func(*v1alpha1.RolloutStatus) bool) *v1alpha1.RolloutStatus {
	f.t.Helper()
	var got *v1alpha1.RolloutStatus
	sandboxtest.Eventually(f.t, wait, what, func(ctx context.Context) error {
		st, err := f.rollout(ctx, rec.UID)
		if err != nil {
			return err
		}
		if st.Generation != rec.Generation || !ok(st) {
			return fmt.Errorf("rollout: %+v", st)
		}
		got = st
		return nil
	})
	return got
}

func clusterOf(st *v1alpha1.RolloutStatus, name string) v1alpha1.RolloutClusterStatus {
	for _, c := range st.Clusters {
		if c.Cluster == name {
			return c
		}
	}
	return v1alpha1.RolloutClusterStatus{}
}

// TestRolloutInWaves, on three clusters labelled dc=dc-1..dc-3, with a
// Secret: a change reaches one DC at a time, each wave starting only after
// the previous held for minSuccessSeconds, and only on health reported
// after the generation landed (an agent held back keeps its wave
// waiting); a change whose first wave does not turn healthy in time rolls
// that wave back to the previous generation automatically and never
// reaches the others; the history has every step, and no Secret value is
// stored in clear, in the previous generation or anywhere.
func TestRolloutInWaves(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng.NewDSN(t))
			s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
			agents := f.startAgents(s1, s2, s3)
			f.start(syncerOpts{})
			pw := []string{"", "pw1-" + randomHex(12), "pw2-" + randomHex(12), "pw3-" + randomHex(12)}
			secret := func(gen int) map[string]any {
				return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "stringData": map[string]any{"password": pw[gen]}}
			}
			var waves []v1alpha1.Wave
			for _, dc := range []string{"dc-1", "dc-2", "dc-3"} {
				waves = append(waves, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
			}
			const minSuccess = 3
			ro := &v1alpha1.Rollout{Waves: waves, MinSuccessSeconds: minSuccess, ProgressDeadlineSeconds: 8, OnFailure: v1alpha1.OnFailureRollback}

			// Generation 1, without a rollout, reaches every cluster.
			rec := f.putSpec("db", v1alpha1.DeployableSpec{Template: secret(1)})
			f.waitSynced(rec, s1, s2, s3)

			// Generation 2 rolls out; dc-1's agent is held back.
			agents.hold(s1, true)
			rec = f.putSpec("db", v1alpha1.DeployableSpec{Template: secret(2), Rollout: ro})
			f.waitSecretValue(s1, "db", "password", pw[2])
			f.waitRollout(rec, "dc-1 applied, waiting for its agent", func(st *v1alpha1.RolloutStatus) bool {
				return strings.Contains(clusterOf(st, s1).Message, "waiting for the agent")
			})
			for _, c := range []string{s2, s3} {
				f.waitSecretValue(c, "db", "password", pw[1]) // already so: the wave waits
			}
			agents.hold(s1, false)
			st := f.waitRollout(rec, "wave dc-2 started", func(st *v1alpha1.RolloutStatus) bool { return st.WaveIndex >= 1 })
			healthy := clusterOf(st, s1).Since
			if held := st.WaveStartedAt.Sub(*healthy); held < minSuccess*time.Second {
				t.Errorf("wave dc-2 started %s after dc-1 turned healthy, before minSuccessSeconds %d", held, minSuccess)
			} else {
				t.Logf("wave dc-2 started %s after dc-1 turned healthy (minSuccessSeconds %d)", held, minSuccess)
			}
			f.waitSecretValue(s2, "db", "password", pw[2])
			if got := clusterOf(st, s3); got.Generation != 1 {
				t.Errorf("dc-3 while dc-2 rolls: %+v", got)
			}
			f.waitRollout(rec, "generation 2 complete", func(st *v1alpha1.RolloutStatus) bool { return st.State == v1alpha1.RolloutComplete })
			f.waitSecretValue(s3, "db", "password", pw[3-1])
			f.waitSynced(rec, s1, s2, s3)

			// Generation 3: dc-1 never reports healthy at it (its agent
			// is held back): past progressDeadlineSeconds the rollout
			// fails and, by onFailure Rollback, dc-1 returns to 2.
			agents.hold(s1, true)
			rec = f.putSpec("db", v1alpha1.DeployableSpec{Template: secret(3), Rollout: ro})
			f.waitSecretValue(s1, "db", "password", pw[3])
			st = f.waitRollout(rec, "generation 3 rolled back", func(st *v1alpha1.RolloutStatus) bool { return st.State == v1alpha1.RolloutRolledBack })
			if st.PreviousGeneration != 2 || !strings.Contains(st.Message, s1) || !strings.Contains(st.Message, "progressDeadlineSeconds") {
				t.Errorf("rolled back status: %+v", st)
			}
			f.waitSecretValue(s1, "db", "password", pw[2])
			for _, c := range []string{s2, s3} {
				f.waitSecretValue(c, "db", "password", pw[2])
			}
			// The status rows follow the applies: every cluster Synced at 2.
			back := *rec
			back.Generation = 2
			f.waitSynced(&back, s1, s2, s3)

			// The history names every step.
			var entries []string
			if err := f.store.Read(context.Background(), func(tx *store.Tx) error {
				es, err := tx.Audit().List(context.Background(), store.AuditFilter{Namespace: f.ns, Name: "db"})
				for _, e := range es {
					entries = append(entries, e.Actor+": "+e.Summary)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			all := strings.Join(entries, "\n")
			for _, want := range []string{"rollout of generation 2 started (previous 1)", "wave dc-1 done at generation 2",
				"wave dc-2 started", "wave dc-3 done", "every wave holds generation 2",
				"rollout of generation 3 started (previous 2)", "rolled back to generation 2"} {
				if !strings.Contains(all, want) {
					t.Errorf("history lacks %q:\n%s", want, all)
				}
			}
			t.Logf("history:\n%s", all)
			assertNoSecret(t, f, pw[1], pw[2], pw[3])
		})
	}
}

// TestGateHaltsBeforeTheNextWave: a gate's CEL rule over the inventory
// (Deployments losing availability) halts the rollout at the first wave
// when an object turns unhealthy after the generation landed there; the
// same object found unhealthy before it landed did not count. The
// inventory rows are written as the ingester writes what agents report.
func TestGateHaltsBeforeTheNextWave(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	f.startAgents(s1, s2, s3)
	f.start(syncerOpts{})
	ctx := context.Background()
	deployment := func(rv string, available int, at time.Time) {
		t.Helper()
		obj := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":%q},"spec":{"replicas":2},"status":{"availableReplicas":%d}}`, f.ns, available)
		if err := f.store.Tx(ctx, func(tx *store.Tx) error {
			_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{{Cluster: s1, APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.ns, Name: "web",
				UID: "web-" + f.ns, ResourceVersion: rv, Health: "Unknown", ObservedAt: at, Object: []byte(obj)}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Unavailable an hour ago, before any of this: not this generation's doing.
	deployment("1", 0, time.Now().Add(-time.Hour))

	var waves []v1alpha1.Wave
	for _, dc := range []string{"dc-1", "dc-2", "dc-3"} {
		waves = append(waves, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
	}
	ro := &v1alpha1.Rollout{Waves: waves, MinSuccessSeconds: 3600, Gates: []v1alpha1.Gate{{Name: "web-available",
		APIVersion: "apps/v1", Kind: "Deployment", Unhealthy: "object.?status.?availableReplicas.orValue(0) < object.spec.replicas"}}}
	rec := f.putSpec("web-config", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"v": "1"})})
	f.waitSynced(rec, s1, s2, s3)
	rec = f.putSpec("web-config", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"v": "2"}), Rollout: ro})
	f.waitRollout(rec, "dc-1 healthy, soaking", func(st *v1alpha1.RolloutStatus) bool {
		return clusterOf(st, s1).Health == v1alpha1.WaveHealthy
	})
	f.waitConfigMapData(s1, "web-config", "v", "2")

	// Now it loses availability: the rollout halts at dc-1.
	deployment("2", 1, time.Now())
	st := f.waitRollout(rec, "halted", func(st *v1alpha1.RolloutStatus) bool { return st.State == v1alpha1.RolloutHalted })
	if !strings.Contains(st.Message, "Deployment/"+f.ns+"/web") || !strings.Contains(st.Message, "web-available") || st.Wave != "dc-1" {
		t.Fatalf("halted status does not say why: %+v", st)
	}
	for _, c := range []string{s2, s3} {
		if got := clusterOf(st, c).Generation; got != 1 {
			t.Errorf("%s should keep generation 1, holds %d", c, got)
		}
		f.waitConfigMapData(c, "web-config", "v", "1")
	}
	f.waitConfigMapData(s1, "web-config", "v", "2") // Halt keeps what was applied
}

// TestDependentRunnableHaltsTheWave: the rollout's built-in gate. A
// runnable that names the deployable in spec.dependsOn and turns Unhealthy
// on a wave's cluster after the new generation landed there halts the
// rollout and, by onFailure Rollback, returns the wave to the previous
// generation; the same runnable Unhealthy since before the generation
// landed did not count. The runnable rows are written as the controller
// records a runnable's health.
func TestDependentRunnableHaltsTheWave(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	f.startAgents(s1, s2, s3)
	f.start(syncerOpts{})
	ctx := context.Background()
	spec := `{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"reader"}},"dependsOn":[{"deployable":"app-config"}]}}`
	rn := &store.Runnable{Namespace: f.ns, Name: "reader", UID: "reader-" + f.ns, Generation: 1, Spec: []byte(spec), SpecHash: "h",
		Phase: string(v1alpha1.PhaseRunning), Cluster: s1}
	health := func(h v1alpha1.Health, since time.Time) {
		t.Helper()
		if err := f.store.Tx(ctx, func(tx *store.Tx) error {
			st, err := json.Marshal(v1alpha1.RunnableStatus{Phase: v1alpha1.PhaseRunning, Cluster: s1, Health: h, UnhealthySince: &since,
				Message: "job reader: pods failing"})
			if err != nil {
				return err
			}
			if rn.ID == 0 {
				rn.Status = st
				return tx.Runnables().Create(ctx, rn)
			}
			cur, err := tx.Runnables().Get(ctx, rn.Namespace, rn.Name)
			if err != nil {
				return err
			}
			cur.Status = st
			return tx.Runnables().Update(ctx, cur)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Unhealthy an hour ago, before any of this: not this generation's doing.
	health(v1alpha1.HealthUnhealthy, time.Now().Add(-time.Hour))

	var waves []v1alpha1.Wave
	for _, dc := range []string{"dc-1", "dc-2", "dc-3"} {
		waves = append(waves, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
	}
	ro := &v1alpha1.Rollout{Waves: waves, MinSuccessSeconds: 3600, OnFailure: v1alpha1.OnFailureRollback}
	rec := f.putSpec("app-config", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"v": "1"})})
	f.waitSynced(rec, s1, s2, s3)
	rec = f.putSpec("app-config", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"v": "2"}), Rollout: ro})
	f.waitRollout(rec, "dc-1 healthy, soaking", func(st *v1alpha1.RolloutStatus) bool {
		return clusterOf(st, s1).Health == v1alpha1.WaveHealthy
	})
	f.waitConfigMapData(s1, "app-config", "v", "2")

	// It turns Unhealthy again now, after generation 2 landed on dc-1.
	health(v1alpha1.HealthUnhealthy, time.Now())
	st := f.waitRollout(rec, "rolled back", func(st *v1alpha1.RolloutStatus) bool { return st.State == v1alpha1.RolloutRolledBack })
	if !strings.Contains(st.Message, "Runnable/"+f.ns+"/reader") || !strings.Contains(st.Message, "dependsOn") {
		t.Fatalf("rolled back status does not name the runnable: %+v", st)
	}
	t.Logf("rolled back: %s", st.Message)
	for _, c := range []string{s1, s2, s3} {
		f.waitConfigMapData(c, "app-config", "v", "1")
	}
}

// TestSupersededGenerationStays is a quick fix pushed mid-rollout, on
// clusters labelled dc=dc-1..dc-3 with waves "first" (dc-1) and "rest"
// (dc-2, dc-3): generation 1 (the deployable's first: no previous
// generation) reaches every cluster; while the second wave still soaks,
// generation 2 is pushed. dc-1 gets it at once; dc-2 and dc-3 keep
// generation 1, never losing the ConfigMap for a moment, until the
// second wave of generation 2 gives it to them.
func TestSupersededGenerationStays(t *testing.T) {
	eng := storetest.Engines()[0]
	f := newFixture(t, eng.NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	f.startAgents(s1, s2, s3)
	f.start(syncerOpts{})
	const minSuccess = 6
	ro := &v1alpha1.Rollout{MinSuccessSeconds: minSuccess, Waves: []v1alpha1.Wave{
		{Name: "first", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc-1"}}},
		{Name: "rest", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "dc", Operator: metav1.LabelSelectorOpIn, Values: []string{"dc-2", "dc-3"}}}}},
	}}
	color := func(c string) v1alpha1.DeployableSpec {
		return v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"color": c}), Rollout: ro}
	}

	rec := f.putSpec("cfg", color("blue"))
	f.waitConfigMapData(s1, "cfg", "color", "blue")
	f.waitRollout(rec, "the second wave started", func(st *v1alpha1.RolloutStatus) bool { return st.WaveIndex == 1 })
	f.waitConfigMapData(s2, "cfg", "color", "blue")
	f.waitConfigMapData(s3, "cfg", "color", "blue")
	if st, err := f.rollout(context.Background(), rec.UID); err != nil || st.State == v1alpha1.RolloutComplete {
		t.Fatalf("generation 1 should still soak in its second wave: %+v %v", st, err)
	}

	// Watch dc-2 and dc-3 from before the push until they hold green:
	// every read must find the ConfigMap, blue or green.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	type seen struct {
		reads, blue int
		lost        string
	}
	results := make(chan seen, 2)
	for _, c := range []string{s2, s3} {
		go func() {
			var s seen
			defer func() { results <- s }()
			for ctx.Err() == nil {
				cm, err := f.configMap(ctx, c, "cfg")
				switch {
				case err != nil && ctx.Err() != nil:
					return
				case err != nil:
					s.lost = fmt.Sprintf("%s: %v after %d reads", c, err, s.reads)
					return
				}
				s.reads++
				switch cm.Data["color"] {
				case "green":
					return
				case "blue":
					s.blue++
				default:
					s.lost = fmt.Sprintf("%s: data %v", c, cm.Data)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}

	rec = f.putSpec("cfg", color("green"))
	f.waitConfigMapData(s1, "cfg", "color", "green")
	st := f.waitRollout(rec, "generation 2 in its first wave", func(st *v1alpha1.RolloutStatus) bool {
		return st.WaveIndex == 0 && clusterOf(st, s1).Generation == 2
	})
	for _, c := range []string{s2, s3} {
		if cs := clusterOf(st, c); cs.Generation != 1 || cs.FallbackGeneration != 1 {
			t.Errorf("%s while the first wave of generation 2 rolls: %+v", c, cs)
		}
	}
	f.waitConfigMapData(s2, "cfg", "color", "green")
	f.waitConfigMapData(s3, "cfg", "color", "green")
	for range 2 {
		s := <-results
		if s.lost != "" {
			t.Errorf("lost the ConfigMap: %s", s.lost)
		}
		if s.blue == 0 {
			t.Errorf("no read saw blue before green: the test watched nothing (%d reads)", s.reads)
		}
		t.Logf("%d reads, %d of them blue, before green", s.reads, s.blue)
	}
	f.waitRollout(rec, "generation 2 complete", func(st *v1alpha1.RolloutStatus) bool { return st.State == v1alpha1.RolloutComplete })
}
