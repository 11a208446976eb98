package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

const nativeFlink = `apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: clicks
  labels: {app: clicks}
spec:
  image: flink:1.20
  flinkVersion: v1_20
  jobManager: {resource: {memory: 1024m, cpu: 0.5}}
  taskManager: {resource: {memory: 1024m, cpu: 0.5}}
  job: {jarURI: "local:///opt/flink/examples/streaming/StateMachineExample.jar", parallelism: 1, upgradeMode: savepoint}
`

const nativePolicy = `apiVersion: purser.io/v1alpha1
kind: PlacementPolicy
metadata: {name: flink}
spec:
  resourceSelectors:
  - apiVersion: flink.apache.org/v1beta1
    kind: FlinkDeployment
    labelSelector: {matchLabels: {app: clicks}}
  runnable:
    placement: {clusterAffinity: {clusterNames: [dc1]}}
    failover: {consistency: AtMostOne}
`

// TestKubeNativeWrite: a FlinkDeployment applied with the real kubectl to
// purser becomes the runnable its namespace's placement policy makes of
// it, written by the runnables' own handler as the writer (audited as
// hers), read back by name with the runnable's view; an object no policy
// selects is refused naming what is missing; changing it changes the
// runnable; deleting it cancels the runnable; a viewer can do none of it.
func TestKubeNativeWrite(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	ctx := context.Background()
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Clusters().Create(ctx, &store.Cluster{Name: "dc1"}); err != nil {
			return err
		}
		return tx.Kinds().Replace(ctx, "dc1", time.Now(), []store.ServedKind{
			{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment", Namespaced: true}, {Version: "v1", Kind: "ConfigMap", Namespaced: true}})
	}); err != nil {
		t.Fatal(err)
	}
	alice, bob := newKubectlAt(t, h, "alice"), newKubectlAt(t, h, "bob")

	alice.fails(nativeFlink, "no placement policy of namespace team-a, nor a cluster placement policy, selects a FlinkDeployment", "apply", "-n", "team-a", "-f", "-")
	if n := h.count("runnables"); n != 0 {
		t.Fatalf("%d runnables after a refusal", n)
	}
	if out := alice.ok(nativePolicy, "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "placementpolicy.purser.io/flink created") {
		t.Fatalf("the policy: %s", out)
	}
	alice.fails(strings.Replace(nativeFlink, "app: clicks", "app: views", 1),
		"PlacementPolicy team-a/flink select FlinkDeployment (flink.apache.org/v1beta1) objects, but by another name or labels", "apply", "-n", "team-a", "-f", "-")
	bob.fails(nativeFlink, "may not change runnables in namespace", "apply", "-n", "team-a", "-f", "-")

	if out := alice.ok(nativeFlink, "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "flinkdeployment.flink.apache.org/clicks created") {
		t.Fatalf("apply: %s", out)
	}
	r := h.get("alice", "/api/v1/runnables/team-a/clicks")
	spec, _ := r.body["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if r.code != http.StatusOK || tmpl["kind"] != "FlinkDeployment" || !strings.Contains(string(r.raw), `"clusterNames":["dc1"]`) ||
		!strings.Contains(string(r.raw), `"purser.io/placement-policy":"PlacementPolicy team-a/flink"`) {
		t.Fatalf("the runnable: %d %s", r.code, r.raw)
	}
	y := alice.ok("", "get", "flinkdeployment", "clicks", "-n", "team-a", "-o", "yaml")
	for _, want := range []string{"purser.io/runnable: team-a/clicks", "purser.io/phase: ", "parallelism: 1", "kubectl.kubernetes.io/last-applied-configuration"} {
		if !strings.Contains(y, want) {
			t.Fatalf("get -o yaml lacks %q:\n%s", want, y)
		}
	}

	// Applied again, changed: kubectl's merge patch changes the runnable.
	if out := alice.ok(strings.Replace(nativeFlink, "parallelism: 1", "parallelism: 2", 1), "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "configured") {
		t.Fatalf("apply again: %s", out)
	}
	if r := h.get("alice", "/api/v1/runnables/team-a/clicks"); !strings.Contains(string(r.raw), `"parallelism":2`) ||
		strings.Contains(string(r.raw), "purser.io/phase") || strings.Contains(string(r.raw), "purser.io/runnable") {
		t.Fatalf("the runnable after the second apply (the change in, purser's view of the object out of its template): %s", r.raw)
	}
	if r := h.do("alice", http.MethodPatch, "/k8s/apis/flink.apache.org/v1beta1/namespaces/team-a/flinkdeployments/other", "application/merge-patch+json",
		[]byte(`{"spec":{}}`)); r.code != http.StatusMethodNotAllowed || !strings.Contains(string(r.raw), "is held by no runnable or deployable of namespace team-a") {
		t.Fatalf("a patch of an object no runnable holds: %d %s", r.code, r.raw)
	}

	// Server-side apply by two field managers: a conflict, then forced.
	views := strings.Replace(nativeFlink, "name: clicks", "name: views", 1)
	if out := alice.ok(views, "apply", "--server-side", "--field-manager=team", "-n", "team-a", "-f", "-"); !strings.Contains(out, "serverside-applied") {
		t.Fatalf("apply --server-side: %s", out)
	}
	four := strings.Replace(views, "parallelism: 1", "parallelism: 4", 1)
	alice.fails(four, `conflict with "team"`, "apply", "--server-side", "--field-manager=ops", "-n", "team-a", "-f", "-")
	alice.ok(four, "apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-n", "team-a", "-f", "-")
	if r := h.get("alice", "/api/v1/runnables/team-a/views"); !strings.Contains(string(r.raw), `"parallelism":4`) {
		t.Fatalf("the runnable after the forced apply: %s", r.raw)
	}
	if y := alice.ok("", "get", "flinkdeployment", "views", "-n", "team-a", "-o", "yaml", "--show-managed-fields"); !strings.Contains(y, "manager: ops") || !strings.Contains(y, "operation: Apply") {
		t.Fatalf("managedFields after the forced apply:\n%s", y)
	}

	if out := alice.ok("", "delete", "flinkdeployment", "clicks", "-n", "team-a"); !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %s", out)
	}
	if r := h.get("alice", "/api/v1/runnables/team-a/clicks"); !strings.Contains(string(r.raw), `"phase":"Cancelled"`) {
		t.Fatalf("the runnable after the delete: %s", r.raw)
	}
	// The cancelled runnable keeps the name until deleted once more.
	alice.fails(nativeFlink, "its runnable team-a/clicks stays, Cancelled, until it is removed", "apply", "-n", "team-a", "-f", "-")
	alice.ok("", "delete", "flinkdeployment", "clicks", "-n", "team-a")
	if r := h.get("alice", "/api/v1/runnables/team-a/clicks"); r.code != http.StatusNotFound {
		t.Fatalf("the runnable after the second delete: %d %s", r.code, r.raw)
	}
	if out := alice.ok(nativeFlink, "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "created") {
		t.Fatalf("apply after the removal: %s", out)
	}
	// A dry run of a delete, in DeleteOptions as kubectl sends it, changes
	// nothing.
	alice.ok("", "delete", "flinkdeployment", "clicks", "-n", "team-a", "--dry-run=server")
	if r := h.get("alice", "/api/v1/runnables/team-a/clicks"); strings.Contains(string(r.raw), `"phase":"Cancelled"`) {
		t.Fatalf("the runnable after a dry-run delete: %s", r.raw)
	}

	// A policy that makes ConfigMaps deployables: applied twice with
	// kubectl (a strategic merge patch the second time, as kubectl sends
	// for a built-in kind), then deleted.
	cfgPolicy := `apiVersion: purser.io/v1alpha1
kind: PlacementPolicy
metadata: {name: config}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  deployable: {placement: {clusterAffinity: {clusterNames: [dc1]}}}
`
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {LOG_LEVEL: info}\n"
	alice.ok(cfgPolicy, "apply", "-n", "team-a", "-f", "-")
	if out := alice.ok(cm, "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "configmap/settings created") {
		t.Fatalf("apply of a ConfigMap: %s", out)
	}
	if r := h.get("alice", "/api/v1/deployables/team-a/settings"); r.code != http.StatusOK || !strings.Contains(string(r.raw), `"LOG_LEVEL":"info"`) {
		t.Fatalf("the deployable: %d %s", r.code, r.raw)
	}
	if out := alice.ok(strings.Replace(cm, "info", "debug", 1), "apply", "-n", "team-a", "-f", "-"); !strings.Contains(out, "configmap/settings configured") {
		t.Fatalf("apply of the changed ConfigMap: %s", out)
	}
	if r := h.get("alice", "/api/v1/deployables/team-a/settings"); !strings.Contains(string(r.raw), `"LOG_LEVEL":"debug"`) || strings.Contains(string(r.raw), "purser.io/deployable") {
		t.Fatalf("the deployable after the second apply: %s", r.raw)
	}
	if y := alice.ok("", "get", "configmap", "settings", "-n", "team-a", "-o", "yaml"); !strings.Contains(y, "purser.io/deployable: team-a/settings") {
		t.Fatalf("the ConfigMap read back:\n%s", y)
	}
	alice.ok("", "delete", "configmap", "settings", "-n", "team-a")
	if r := h.get("alice", "/api/v1/deployables/team-a/settings"); r.code == http.StatusOK && !strings.Contains(string(r.raw), "deletionTimestamp") && !strings.Contains(string(r.raw), "Deleting") {
		t.Fatalf("the deployable after the delete: %d %s", r.code, r.raw)
	}
	got := strings.Join(history(t, h), "\n")
	for _, want := range []string{"alice create PlacementPolicy/team-a/flink", "alice create Runnable/team-a/clicks", "alice update Runnable/team-a/clicks",
		"alice cancel Runnable/team-a/clicks", "alice delete Runnable/team-a/clicks", "alice create Deployable/team-a/settings",
		"alice update Deployable/team-a/settings", "alice delete Deployable/team-a/settings"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the history lacks %q:\n%s", want, got)
		}
	}
}
