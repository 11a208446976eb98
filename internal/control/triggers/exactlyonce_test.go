package triggers_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

var alice = policy.User{Name: "alice"}

func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}},
		"team-b": {Roles: map[policy.Role][]string{policy.RoleEditor: {"bob"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func job() map[string]any {
	return map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}}
}

func open(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func putTrigger(t *testing.T, st *store.Store, name string, src v1alpha1.TriggerSource, labels map[string]string) {
	t.Helper()
	tr := &v1alpha1.Trigger{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindTrigger},
		Metadata: v1alpha1.ObjectMeta{Name: name, Namespace: "team-a", Labels: labels},
		Spec:     v1alpha1.TriggerSpec{Source: src, Template: v1alpha1.RunnableSpec{Template: job()}},
	}
	tr.SetDefaults()
	if errs := v1alpha1.ValidateTrigger(tr, time.Now()); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := st.Tx(t.Context(), func(tx *store.Tx) error {
		_, _, _, err := triggers.Put(t.Context(), tx, tr, alice, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// ended stores a runnable of ns that ended in phase at endedAt, with
// labels, as the lifecycle leaves one.
func ended(t *testing.T, st *store.Store, ns, name string, phase v1alpha1.Phase, endedAt time.Time, labels map[string]string) *store.Runnable {
	t.Helper()
	doc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Labels: labels, Spec: v1alpha1.RunnableSpec{Template: job()}})
	at := endedAt.UTC()
	rec := &store.Runnable{Namespace: ns, Name: name, UID: uuid.NewString(), Generation: 1, Spec: doc, SpecHash: "h",
		Phase: string(phase), Submitter: "alice", EndedAt: &at}
	if err := st.Tx(t.Context(), func(tx *store.Tx) error { return tx.Runnables().Create(t.Context(), rec) }); err != nil {
		t.Fatal(err)
	}
	return rec
}

func runsOf(t *testing.T, st *store.Store, name string) []*store.Runnable {
	t.Helper()
	var runs []*store.Runnable
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		var err error
		runs, err = triggers.Runs(t.Context(), tx, "team-a", name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}

func creations(t *testing.T, st *store.Store, run string) int {
	t.Helper()
	var n int
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		es, err := tx.Audit().List(t.Context(), store.AuditFilter{Kind: v1alpha1.KindRunnable, Name: run, Action: "create"})
		n = len(es)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExactlyOnceAcrossLoops: two trigger loops, each on its own
// connection pool as two replicas would be, look at the same ended
// runnable from eight goroutines at once: one runnable, one audit entry
// of its creation, on each engine. Work that ended before the trigger,
// work of another namespace, work its selector does not match and the
// trigger's own runs fire nothing.
func TestExactlyOnceAcrossLoops(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			dsn := eng.NewDSN(t)
			stores := []*store.Store{open(t, dsn), open(t, dsn)}
			pol := testPolicy(t)
			before := ended(t, stores[0], "team-a", "old-etl", v1alpha1.PhaseSucceeded, time.Now().Add(-time.Hour), map[string]string{"app": "etl"})
			_ = before
			putTrigger(t, stores[0], "after-etl", v1alpha1.TriggerSource{RunnableEnded: &v1alpha1.RunnableEndedSource{
				Phases: []v1alpha1.Phase{v1alpha1.PhaseSucceeded}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etl"}},
			}}, map[string]string{"app": "etl"}) // its runs match its own selector: they must not fire it
			now := time.Now()
			// Those that fire nothing end first: the scan goes on past them.
			ended(t, stores[0], "team-a", "web", v1alpha1.PhaseSucceeded, now, map[string]string{"app": "web"})
			ended(t, stores[0], "team-a", "etl-failed", v1alpha1.PhaseFailed, now.Add(time.Millisecond), map[string]string{"app": "etl"})
			ended(t, stores[0], "team-b", "etl", v1alpha1.PhaseSucceeded, now.Add(time.Millisecond), map[string]string{"app": "etl"})
			etl := ended(t, stores[0], "team-a", "etl", v1alpha1.PhaseSucceeded, now.Add(2*time.Millisecond), map[string]string{"app": "etl"})
			var loops []*triggers.Loop
			for _, st := range stores {
				loops = append(loops, triggers.NewLoop(triggers.Config{Store: st, Policy: func() *policy.Policy { return pol }}))
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			gate := make(chan struct{})
			for g := range 8 {
				wg.Go(func() {
					<-gate
					_, err := loops[g%2].Pass(t.Context(), "team-a", "after-etl")
					errs <- err
				})
			}
			close(gate)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			runs := runsOf(t, stores[0], "after-etl")
			want := v1alpha1.EventRunName("after-etl", v1alpha1.RunnableEndedEvent(etl.UID, 0))
			if len(runs) != 1 || runs[0].Name != want {
				names := []string{}
				for _, r := range runs {
					names = append(names, r.Name)
				}
				t.Fatalf("runs %v, want exactly [%s]", names, want)
			}
			if n := creations(t, stores[0], want); n != 1 {
				t.Fatalf("%d audit entries of the run's creation, want 1", n)
			}
			// The run ends; the trigger does not fire on its own run, and
			// the same end read again (a restart) creates nothing.
			if err := stores[0].Tx(t.Context(), func(tx *store.Tx) error {
				r, err := tx.Runnables().Get(t.Context(), "team-a", want)
				if err != nil {
					return err
				}
				at := time.Now().UTC()
				r.Phase, r.EndedAt = string(v1alpha1.PhaseSucceeded), &at
				return tx.Runnables().Update(t.Context(), r)
			}); err != nil {
				t.Fatal(err)
			}
			fresh := triggers.NewLoop(triggers.Config{Store: stores[1], Policy: func() *policy.Policy { return pol }})
			if _, err := fresh.Pass(t.Context(), "team-a", "after-etl"); err != nil {
				t.Fatal(err)
			}
			if runs := runsOf(t, stores[0], "after-etl"); len(runs) != 1 {
				t.Fatalf("%d runs after the trigger's own run ended, want 1", len(runs))
			}
			var st v1alpha1.TriggerStatus
			if err := stores[0].Read(t.Context(), func(tx *store.Tx) error {
				rec, err := tx.Triggers().Get(t.Context(), "team-a", "after-etl")
				if err != nil {
					return err
				}
				return json.Unmarshal(rec.Status, &st)
			}); err != nil {
				t.Fatal(err)
			}
			if st.Fired != 1 || len(st.LastRuns) != 1 || st.LastRuns[0].Name != want || st.LastFired == nil {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestRolledOut: a trigger on a deployable's rollout fires once per
// generation rolled out on every one of its clusters, after its
// creation: not for the generation rolled out when it was created, not
// while a cluster lags, and not twice for one generation.
func TestRolledOut(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			ctx := t.Context()
			pol := testPolicy(t)
			dep := &store.Deployable{Namespace: "team-a", Name: "web", UID: uuid.NewString(), Generation: 1, Spec: []byte(`{"spec":{}}`), SpecHash: "h"}
			synced := func(gen int64, clusters ...string) {
				t.Helper()
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					for _, c := range clusters {
						if err := tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: dep.UID, Cluster: c,
							State: string(v1alpha1.StateSynced), SyncedGeneration: gen, StateGeneration: gen}); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			setGen := func(gen int64) {
				t.Helper()
				if err := st.Tx(ctx, func(tx *store.Tx) error {
					cur, err := tx.Deployables().Get(ctx, "team-a", "web")
					if err != nil {
						return err
					}
					cur.Generation = gen
					return tx.Deployables().Update(ctx, cur)
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				for _, c := range []string{"a", "b"} {
					if err := tx.Clusters().Create(ctx, &store.Cluster{Name: c, Spec: []byte("{}")}); err != nil {
						return err
					}
				}
				return tx.Deployables().Create(ctx, dep)
			}); err != nil {
				t.Fatal(err)
			}
			synced(1, "a", "b") // generation 1 is out before the trigger
			putTrigger(t, st, "after-web", v1alpha1.TriggerSource{DeployableRolledOut: &v1alpha1.DeployableRolledOutSource{Name: "web"}}, nil)
			l := triggers.NewLoop(triggers.Config{Store: st, Policy: func() *policy.Policy { return pol }})
			pass := func(want int) {
				t.Helper()
				for range 2 { // a second pass sees the same state: nothing more
					if _, err := l.Pass(ctx, "team-a", "after-web"); err != nil {
						t.Fatal(err)
					}
				}
				if got := len(runsOf(t, st, "after-web")); got != want {
					t.Fatalf("%d runs, want %d", got, want)
				}
			}
			pass(0)
			setGen(2)
			synced(2, "a") // b lags
			pass(0)
			synced(2, "b")
			pass(1)
			if _, err := runnableNamed(st, v1alpha1.EventRunName("after-web", v1alpha1.DeployableRolledOutEvent(dep.UID, 2))); err != nil {
				t.Fatalf("the run of generation 2: %v", err)
			}
			setGen(3)
			synced(3, "a", "b")
			pass(2)
		})
	}
}

func runnableNamed(st *store.Store, name string) (*store.Runnable, error) {
	return runnable(st, "team-a", name)
}
