package failover_test

import (
	"context"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
)

// TestFailoverNeedsTheDependencies: a failover target must have the
// runnable's spec.dependsOn Synced too; while none has, the runnable stays
// and its message names what is missing where.
func TestFailoverNeedsTheDependencies(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}})
	ctx := context.Background()
	d := &store.Deployable{Namespace: f.ns, Name: "app-config", UID: "uid-app-config-" + f.ns, Generation: 1, Spec: []byte(`{}`), SpecHash: "h"}
	synced := func(cluster string) {
		t.Helper()
		// As the syncer records a sync.
		if err := f.store.Tx(ctx, func(tx *store.Tx) error {
			return tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: d.UID, Cluster: cluster,
				State: string(v1alpha1.StateSynced), SyncedGeneration: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Deployables().Create(ctx, d) }); err != nil {
		t.Fatal(err)
	}
	synced("a")
	manifest := strings.Replace(flinkRunnable, "%s", "a, b", 1) + "  dependsOn: [{deployable: app-config}]\n"
	f.submit(manifest)
	if r := running(f, "wordcount"); r.Status.Cluster != "a" {
		t.Fatalf("placed on %s, where app-config is not synced", r.Status.Cluster)
	}
	// The move needs a proven restore point (restorePoint Required): the
	// job checkpoints before it fails, as a job that has run a while has.
	jobID, ok := f.sims["a"].Running(f.ns, "wordcount")
	if !ok {
		t.Fatal("wordcount is not running on a")
	}
	waitCheckpoint(t, f, jobID)
	f.sims["a"].Fail(f.ns, "wordcount", flinksim.Reconciling)
	r := f.waitFor("wordcount", "refusing b for lack of app-config", func(r *v1alpha1.Runnable) bool {
		return strings.Contains(r.Status.Message, "b lacks deployable app-config not synced there yet")
	})
	if r.Status.Cluster != "a" || len(r.Status.Attempts) != 1 {
		t.Fatalf("moved without its dependency: %+v", r.Status)
	}
	synced("b")
	f.waitFor("wordcount", "moved to b once app-config is synced there", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "b" && len(r.Status.Attempts) == 2
	})
}
