package syncer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A cluster registered late receives everything that matches it, and once
// rebuilt empty it is repopulated without anyone asking: its new identity
// gives it away within seconds; without that check, the resync (here
// 20 s) finds the watches' caches wrong and repopulates it within one
// period.
func TestNewAndWipedClustersArePopulated(t *testing.T) {
	for _, tc := range []struct {
		name            string
		noIdentityCheck bool
	}{{"identity", false}, {"resync-alone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const resync = 20 * time.Second
			f := newFixture(t, storetest.Engines()[0].NewDSN(t))
			rebuilt := env.Dedicated(t, false)
			f.start(syncerOpts{resync: resync, noIdentityCheck: tc.noIdentityCheck})

			pw := "pw-" + randomHex(12)
			cm := f.put("everywhere", configMapTemplate(map[string]any{"k": "v"}), v1alpha1.Placement{})
			sec := f.put("creds", map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"password": pw}}, v1alpha1.Placement{})
			f.waitSynced(cm, names(f.clusters...)...)
			f.register(rebuilt, map[string]string{"dc": "dc-4"})
			all := names(f.clusters...)
			f.waitSynced(cm, all...)
			f.waitSynced(sec, all...)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := rebuilt.Wipe(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			f.waitConfigMapData(rebuilt.Name(), "everywhere", "k", "v")
			f.waitSecretValue(rebuilt.Name(), "creds", "password", pw)
			t.Logf("wiped cluster repopulated %s after it came back (resync period %s)", time.Since(start).Round(time.Millisecond), resync)
			assertNoSecret(t, f, pw)
		})
	}
}

// Cluster-scoped kinds get no namespace; once everything is synced, a
// resync writes nothing, neither to the clusters nor to the database.
func TestIdleResyncWritesNothing(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	const resync = 2 * time.Second
	s, _ := f.start(syncerOpts{resync: resync, policy: platformAdmins(t)})
	all := names(f.clusters...)

	var recs = []struct{ name, kind string }{{"a", "ConfigMap"}, {"b", "ConfigMap"}, {"c", "Secret"}}
	ids := map[string]string{}
	for _, r := range recs {
		tmpl := configMapTemplate(map[string]any{"k": r.name})
		if r.kind == "Secret" {
			tmpl = map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"k": r.name}}
		}
		rec := f.put(r.name, tmpl, v1alpha1.Placement{})
		ids[r.name] = rec.UID
		f.waitSynced(rec, all...)
	}
	roleName := "purser-test-" + f.ns
	role := f.putAs(&store.Author{Name: "ops", Groups: []string{"platform"}}, "role", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": roleName},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}},
	}, v1alpha1.Placement{})
	f.waitSynced(role, all...)
	ctx := context.Background()
	for _, c := range all {
		cr, err := f.kube[c].RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("cluster-scoped deployable on %s: %v", c, err)
		}
		if cr.Labels[LabelDeployable] != role.UID {
			t.Errorf("ClusterRole on %s lacks purser's label: %v", c, cr.Labels)
		}
	}

	// resynced waits until every deployable has been synced once more on
	// every cluster, which a resync does, and returns the writes made
	// meanwhile.
	perResync := int64(len(all) * (len(recs) + 1))
	resynced := func() (kube, status int64) {
		t.Helper()
		k0, s0, n0 := s.kubeWrites.Load(), s.statusWrites.Load(), s.syncs.Load()
		sandboxtest.Eventually(t, wait, "a resync of every cluster", func(context.Context) error {
			if n := s.syncs.Load() - n0; n < perResync {
				return fmt.Errorf("%d of %d deployables synced again", n, perResync)
			}
			return nil
		})
		return s.kubeWrites.Load() - k0, s.statusWrites.Load() - s0
	}
	// Let the events of the last applies settle (the watch event of the
	// syncer's own last write may come after a resync, which then writes
	// once more): a whole resync without a write.
	sandboxtest.Eventually(t, wait, "the syncer quiet for a whole resync", func(context.Context) error {
		if k, st := resynced(); k != 0 || st != 0 {
			return fmt.Errorf("%d writes to clusters and %d statuses during the last resync", k, st)
		}
		return nil
	})
	rvs := func() map[string]string {
		out := map[string]string{}
		for _, c := range all {
			for _, r := range recs {
				var rv string
				if r.kind == "Secret" {
					x, err := f.kube[c].CoreV1().Secrets(f.ns).Get(ctx, r.name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					rv = x.ResourceVersion
				} else {
					x, err := f.configMap(ctx, c, r.name)
					if err != nil {
						t.Fatal(err)
					}
					rv = x.ResourceVersion
				}
				out[c+"/"+r.name] = rv
			}
		}
		return out
	}
	before := rvs()
	for range 3 {
		if k, st := resynced(); k != 0 || st != 0 {
			t.Errorf("an idle resync wrote %d times to clusters and %d statuses; want none", k, st)
		}
	}
	if after := rvs(); !maps.Equal(before, after) {
		t.Errorf("objects changed during idle resyncs:\nbefore %v\nafter  %v", before, after)
	}

	f.del("role")
	f.waitPurged(role)
	for _, c := range all {
		if _, err := f.kube[c].RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); err == nil {
			t.Errorf("ClusterRole still on %s after its deployable was deleted", c)
		}
	}
}

// ownership records which syncer works on which cluster, from the hooks
// called when a worker starts and after it has fully stopped, and notes
// any moment when two work on one cluster.
type ownership struct {
	mu      sync.Mutex
	owners  map[string]map[string]bool // cluster -> identities
	overlap []string
}

func (o *ownership) hook(identity string) func(string, bool) {
	return func(cluster string, working bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.owners[cluster] == nil {
			o.owners[cluster] = map[string]bool{}
		}
		if working {
			o.owners[cluster][identity] = true
			if len(o.owners[cluster]) > 1 {
				o.overlap = append(o.overlap, fmt.Sprintf("%s worked on by %v", cluster, slices.Sorted(maps.Keys(o.owners[cluster]))))
			}
		} else {
			delete(o.owners[cluster], identity)
		}
	}
}

// of returns the clusters each identity works on.
func (o *ownership) of() map[string][]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]string{}
	for c, ids := range o.owners {
		for id := range ids {
			out[id] = append(out[id], c)
		}
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// Two syncers share the clusters through leases, never both on one; when
// one stops, the other takes its clusters over and keeps them in sync.
// Then the survivor loses the stream (as a partitioned replica would): it
// stops working once its leases run out, and a new replica takes over
// after they expire.
func TestTwoSyncersShareClustersAndTakeOver(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	nats := streamtest.Start(t, "")
	const lease = 3 * time.Second
	own := &ownership{owners: map[string]map[string]bool{}}
	_, stopA := f.start(syncerOpts{stream: streamtest.Declared(t, nats.URL), identity: "a", lease: lease, hook: own.hook("a")})
	bStream := streamtest.Declared(t, nats.URL)
	f.start(syncerOpts{stream: bStream, identity: "b", lease: lease, hook: own.hook("b")})
	all := names(f.clusters...)

	sandboxtest.Eventually(t, wait, "clusters shared between a and b", func(context.Context) error {
		by := own.of()
		if len(by["a"]) == 0 || len(by["b"]) == 0 || len(by["a"])+len(by["b"]) != len(all) {
			return fmt.Errorf("%v", by)
		}
		return nil
	})
	t.Logf("shared: %v", own.of())
	rec := f.put("shared", configMapTemplate(map[string]any{"v": "1"}), v1alpha1.Placement{})
	f.waitSynced(rec, all...)

	stopA()
	sandboxtest.Eventually(t, wait, "b took every cluster over", func(context.Context) error {
		if by := own.of(); len(by["b"]) != len(all) {
			return fmt.Errorf("%v", by)
		}
		return nil
	})
	rec = f.put("shared", configMapTemplate(map[string]any{"v": "2"}), v1alpha1.Placement{})
	f.waitSynced(rec, all...)
	for _, c := range all {
		f.waitConfigMapData(c, "shared", "v", "2")
	}

	// b is cut off from the stream: it cannot renew and must stop on its
	// own; c takes over only after the leases expired.
	bStream.Close()
	f.start(syncerOpts{stream: streamtest.Declared(t, nats.URL), identity: "c", lease: lease, hook: own.hook("c")})
	sandboxtest.Eventually(t, wait, "c took every cluster over from the cut-off b", func(context.Context) error {
		if by := own.of(); len(by["c"]) != len(all) || len(by["b"]) != 0 {
			return fmt.Errorf("%v", by)
		}
		return nil
	})
	f.put("shared", configMapTemplate(map[string]any{"v": "3"}), v1alpha1.Placement{})
	for _, c := range all {
		f.waitConfigMapData(c, "shared", "v", "3")
	}

	own.mu.Lock()
	defer own.mu.Unlock()
	if len(own.overlap) > 0 {
		t.Errorf("two syncers worked on one cluster at once: %v", own.overlap)
	}
}

// A cluster whose API server is down is reported OutOfSync and catches up
// when it returns, while the other clusters get every change as fast as
// ever. A deployable never approved (generation 0) goes nowhere.
func TestClusterDownDoesNotHoldOthersUp(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	down := env.Dedicated(t, false)
	f.register(down, map[string]string{"dc": "dc-4"})
	f.start(syncerOpts{})
	all := names(f.clusters...)
	up := all[:3]
	ctx := context.Background()

	// Waiting for approval: stored with generation 0 and a pending change.
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Deployables().Create(ctx, &store.Deployable{Namespace: f.ns, Name: "unapproved", UID: randomHex(16),
			Spec: []byte("{}"), Pending: []byte(`{"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}}}`), PendingBy: "alice"})
	})
	if err != nil {
		t.Fatal(err)
	}

	rec := f.put("config", configMapTemplate(map[string]any{"v": "1"}), v1alpha1.Placement{})
	f.waitSynced(rec, all...)
	for _, c := range all {
		if _, err := f.configMap(ctx, c, "unapproved"); err == nil {
			t.Errorf("a deployable never approved reached %s", c)
		}
	}

	down.StopAPIServer()
	start := time.Now()
	rec = f.put("config", configMapTemplate(map[string]any{"v": "2"}), v1alpha1.Placement{})
	for _, c := range up {
		f.waitConfigMapData(c, "config", "v", "2")
	}
	t.Logf("update reached the %d healthy clusters in %s with one cluster down", len(up), time.Since(start).Round(time.Millisecond))
	f.waitSynced(rec, up...)
	sandboxtest.Eventually(t, wait, "the down cluster reported OutOfSync", func(ctx context.Context) error {
		sts, err := f.statuses(ctx, rec.UID)
		if err != nil {
			return err
		}
		if st := sts[down.Name()]; st == nil || st.State != "OutOfSync" || st.SyncedGeneration != 1 || st.Message == "" {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})

	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := down.StartAPIServer(sctx); err != nil {
		t.Fatal(err)
	}
	f.waitConfigMapData(down.Name(), "config", "v", "2")
	f.waitSynced(rec, all...)
}

// A cluster tainted NoSchedule loses the deployables that do not tolerate
// it, and gets them back when they do: a change of the cluster's row
// re-decides every placement on it.
func TestTaintedClusterLosesUntoleratedDeployables(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	f.start(syncerOpts{})
	all := names(f.clusters...)
	s3 := all[2]
	rec := f.put("cfg", configMapTemplate(map[string]any{"k": "v"}), v1alpha1.Placement{})
	f.waitSynced(rec, all...)

	ctx := context.Background()
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		c, err := tx.Clusters().Get(ctx, s3)
		if err != nil {
			return err
		}
		c.Spec = []byte(`{"spec":{"taints":[{"key":"maintenance","effect":"NoSchedule"}]}}`)
		return tx.Clusters().Update(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.waitConfigMapData(s3, "cfg", "k", "")
	f.waitConfigMapData(all[0], "cfg", "k", "v")

	rec = f.put("cfg", configMapTemplate(map[string]any{"k": "v"}), v1alpha1.Placement{
		ClusterTolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}},
	})
	f.waitConfigMapData(s3, "cfg", "k", "v")
	f.waitSynced(rec, all...)
}

// A deployable deleted while a cluster's API server is down, purged, and
// re-created under the same name (a new uid) lands on that cluster as soon
// as the old copy is gone, not at the next resync (here 10 minutes): the
// new uid meets the old copy as a conflict, which is not retried, and the
// deletion of the old copy as an orphan must bring it back.
//
// The chaos soak saw the purge happen while the cluster still held the
// copy; here the test purges the tombstone itself, with the first syncer
// stopped as a crashed replica would be. The second syncer starts while
// the cluster is down, with one worker, so that the new uid's apply is
// sure to meet the old copy before the orphan is removed.
func TestRecreatedDeployableReplacesOrphanPromptly(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	down := env.Dedicated(t, false)
	f.register(down, map[string]string{"dc": "dc-4"})
	c := down.Name()
	onDown := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{c}}}
	const resync = 10 * time.Minute
	_, stop1 := f.start(syncerOpts{resync: resync})

	old := f.put("recreated", configMapTemplate(map[string]any{"v": "old"}), onDown)
	f.waitSynced(old, c)
	f.waitConfigMapData(c, "recreated", "v", "old")

	down.StopAPIServer()
	stop1()
	f.del("recreated")
	ctx := context.Background()
	err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Deployables().Purge(ctx, old.UID) })
	if err != nil {
		t.Fatal(err)
	}
	f.waitPurged(old)
	cur := f.put("recreated", configMapTemplate(map[string]any{"v": "new"}), onDown)
	if cur.UID == old.UID {
		t.Fatalf("re-created deployable kept uid %s", old.UID)
	}

	f.start(syncerOpts{resync: resync, workers: 1})
	sandboxtest.Eventually(t, wait, "the down cluster reported not synced", func(ctx context.Context) error {
		sts, err := f.statuses(ctx, cur.UID)
		if err != nil {
			return err
		}
		if st := sts[c]; st == nil || st.State == "Synced" {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})

	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := down.StartAPIServer(sctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// wait (2 min) is well under the resync period: only the fix brings
	// the new uid back in time. The key's backoff (at most 30 s) is most
	// of what is measured.
	f.waitConfigMapData(c, "recreated", "v", "new")
	t.Logf("re-created deployable landed %s after the API server came back", time.Since(start).Round(time.Millisecond))
	got, err := f.configMap(ctx, c, "recreated")
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[LabelDeployable] != cur.UID {
		t.Errorf("label %s=%q, want the new uid %s", LabelDeployable, got.Labels[LabelDeployable], cur.UID)
	}
	f.waitSynced(cur, c)
}
