package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var (
	kustomizations   = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	externalArtifact = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "externalartifacts"}
)

// gitopsFolder is the folder Flux syncs to purser: purser's own kinds (a
// deployable, a runnable) and a native Job its namespace's placement
// policy makes a runnable of.
var gitopsFolder = map[string]string{
	"settings.yaml": configMapDeployable("team-a", "settings", "v1"),
	"report.yaml":   runnableYAML("team-a", "report", "echo report"),
	"nightly.yaml": `apiVersion: batch/v1
kind: Job
metadata: {name: nightly, namespace: team-a, labels: {app: nightly}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: [sh, -c, "echo nightly"]}
`,
}

const jobsPolicy = `apiVersion: purser.io/v1alpha1
kind: PlacementPolicy
metadata: {name: jobs, namespace: team-a}
spec:
  resourceSelectors:
  - {apiVersion: batch/v1, kind: Job}
  runnable:
    placement: {clusterAffinity: {clusterNames: [sandbox-1]}}
`

// TestFluxSyncsToPurser: Flux's kustomize-controller, built from its Go
// module at the pinned release and run as Flux runs it, syncs a folder to
// purser through alice's kubeconfig (spec.kubeConfig, as Flux applies to
// a remote cluster): its server-side applies create what the folder says,
// audited as alice's; its health checks read purser's status (a runnable
// still queued keeps the Kustomization not Ready, naming it; once the
// work runs or ends and the deployable is synced, it is Ready); a file
// removed from the folder is pruned through purser's delete. Flux's own
// objects live in a sandbox kube-apiserver; the folder is served as Flux's
// source-controller serves an artifact, as an ExternalArtifact. The
// submitter's, ingester's and syncer's records are written as they write
// them: this harness runs the API alone.
func TestFluxSyncsToPurser(t *testing.T) {
	ctx := context.Background()
	bctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	flux, err := sandbox.EnsureFlux(bctx, sandbox.BuildConfig{Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	mgmt := sandboxes.Clusters(t)[0]
	dyn, err := dynamic.NewForConfig(mgmt.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, storetest.Engines()[0])
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Clusters().Create(ctx, &store.Cluster{Name: "sandbox-1"}); err != nil {
			return err
		}
		return tx.Kinds().Replace(ctx, "sandbox-1", time.Now(), []store.ServedKind{
			{Group: "batch", Version: "v1", Kind: "Job", Namespaced: true}, {Version: "v1", Kind: "ConfigMap", Namespaced: true}})
	}); err != nil {
		t.Fatal(err)
	}
	h.yaml("alice", http.MethodPut, "/api/v1/placementpolicies/team-a/jobs", jobsPolicy).want(t, http.StatusCreated)

	// Flux's CRDs and namespace on its own kube-apiserver, and alice's
	// kubeconfig for purser as the Secret spec.kubeConfig names.
	mgmtKubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, sandboxes.Binaries(t).Kubectl(), append([]string{"--kubeconfig", mgmt.KubeconfigPath()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	mgmtKubectl("apply", "--server-side", "-f", flux.CRDs())
	t.Cleanup(func() {
		_ = exec.CommandContext(context.Background(), sandboxes.Binaries(t).Kubectl(), "--kubeconfig", mgmt.KubeconfigPath(), "delete", "--wait=false", "-f", flux.CRDs()).Run()
	})
	mgmtKubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	const fluxNS = "flux-gitops"
	if err := mgmt.EnsureNamespace(ctx, fluxNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.CommandContext(context.Background(), sandboxes.Binaries(t).Kubectl(), "--kubeconfig", mgmt.KubeconfigPath(), "delete", "namespace", fluxNS, "--wait=false").Run()
	})
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "purser-kubeconfig", "namespace": fluxNS},
		"stringData": map[string]any{"value": string(kubeconfigAt(t, h, "alice"))},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(fluxNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The folder, served as an artifact.
	src := newArtifactServer(t)
	ea := dyn.Resource(externalArtifact).Namespace(fluxNS)
	if _, err := ea.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
		"metadata": map[string]any{"name": "gitops", "namespace": fluxNS}, "spec": map[string]any{},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	publish := func(files map[string]string, revision string) {
		t.Helper()
		digest := src.publish(t, files)
		obj, err := ea.Get(ctx, "gitops", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Format(time.RFC3339)
		obj.Object["status"] = map[string]any{
			"artifact": map[string]any{"path": "gitops/" + revision + ".tar.gz", "url": src.srv.URL + "/gitops.tar.gz",
				"revision": "main@sha1:" + revision, "digest": digest, "lastUpdateTime": now},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded",
				"message": "stored artifact for revision " + revision, "lastTransitionTime": now}},
		}
		if _, err := ea.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	publish(gitopsFolder, "1111111111111111111111111111111111111111")

	ks := dyn.Resource(kustomizations).Namespace(fluxNS)
	if _, err := ks.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "team-a", "namespace": fluxNS},
		"spec": map[string]any{
			"interval": "1m", "retryInterval": "2s", "timeout": "10s", "path": "./", "prune": true, "wait": true,
			"sourceRef":  map[string]any{"kind": "ExternalArtifact", "name": "gitops"},
			"kubeConfig": map[string]any{"secretRef": map[string]any{"name": "purser-kubeconfig"}},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := startKustomizeController(t, flux, mgmt.KubeconfigPath(), fluxNS)

	ready := func(ctx context.Context) (status, reason, msg string, err error) {
		obj, err := ks.Get(ctx, "team-a", metav1.GetOptions{})
		if err != nil {
			return "", "", "", err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" {
				return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"]), nil
			}
		}
		return "", "", "", fmt.Errorf("no Ready condition yet")
	}
	waitFlux := func(what string, cond func(status, reason, msg string) bool) {
		t.Helper()
		var last string
		ok := false
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) && !logs.exited.Load() {
			s, r, m, err := ready(ctx)
			last = fmt.Sprintf("Ready=%s %s: %s (%v)", s, r, m, err)
			if err == nil && cond(s, r, m) {
				ok = true
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !ok {
			t.Fatalf("the Kustomization: %s; last seen %s\nkustomize-controller's log:\n%s", what, last, logs.tail())
		}
	}

	// Applied, and not healthy while the work waits: Flux names the
	// runnable purser still has in the queue.
	waitFlux("not Ready, naming the queued runnable", func(s, r, m string) bool {
		return s == "False" && r == "HealthCheckFailed" && strings.Contains(m, "Runnable/team-a/report")
	})
	for _, path := range []string{"/api/v1/deployables/team-a/settings", "/api/v1/runnables/team-a/report"} {
		r := h.get("alice", path).want(t, http.StatusOK)
		if r.str("metadata", "labels", "kustomize.toolkit.fluxcd.io/name") != "team-a" {
			t.Fatalf("%s lacks Flux's label: %s", path, r.raw)
		}
	}
	// The native Job is its runnable's template, Flux's labels with it.
	if r := h.get("alice", "/api/v1/runnables/team-a/nightly"); r.str("spec", "template", "metadata", "labels", "kustomize.toolkit.fluxcd.io/name") != "team-a" ||
		!strings.Contains(string(r.raw), `"purser.io/placement-policy":"PlacementPolicy team-a/jobs"`) {
		t.Fatalf("the native Job's runnable: %s", r.raw)
	}
	managed := h.get("alice", "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables/report").want(t, http.StatusOK)
	if !strings.Contains(string(managed.raw), `"manager":"kustomize-controller"`) {
		t.Fatalf("the runnable's managed fields do not name Flux's field manager: %s", managed.raw)
	}
	hist := history(t, h)
	for _, want := range []string{"alice create Deployable/team-a/settings", "alice create Runnable/team-a/report", "alice create Runnable/team-a/nightly"} {
		if !slices.Contains(hist, want) {
			t.Fatalf("%q is not in the history:\n%s", want, strings.Join(hist, "\n"))
		}
	}

	// The work ends and the configuration is synced, as the submitter,
	// the ingester and the syncer record it: Flux reads it from purser's
	// status (a Runnable's conditions; a native Job's copy, which Flux
	// counts healthy once it completes) and says Ready.
	h.advance(t, "team-a", "report", v1alpha1.PhaseSucceeded)
	h.advance(t, "team-a", "nightly", v1alpha1.PhaseRunning)
	liveJob(t, h, "nightly", false)
	syncedEverywhere(t, h, "team-a", "settings")
	waitFlux("not Ready while the native Job runs", func(s, r, m string) bool {
		return s == "False" && strings.Contains(m, "Job/team-a/nightly") && !strings.Contains(m, "Runnable/team-a/report") &&
			!strings.Contains(m, "Deployable/team-a/settings")
	})
	h.advance(t, "team-a", "nightly", v1alpha1.PhaseSucceeded)
	liveJob(t, h, "nightly", true)
	waitFlux("Ready once purser's status says so", func(s, _, _ string) bool { return s == "True" })

	// A file removed from the folder: Flux prunes it through purser's
	// delete, as alice.
	next := map[string]string{}
	for k, v := range gitopsFolder {
		if k != "settings.yaml" {
			next[k] = v
		}
	}
	publish(next, "2222222222222222222222222222222222222222")
	sandboxtest.Eventually(t, 2*time.Minute, "the pruned deployable in the history", func(context.Context) error {
		if !slices.Contains(history(t, h), "alice delete Deployable/team-a/settings") {
			return fmt.Errorf("not yet; kustomize-controller's log:\n%s", logs.tail())
		}
		return nil
	})
	h.get("alice", "/api/v1/runnables/team-a/report").want(t, http.StatusOK)
}

// liveJob records the native Job's live copy on sandbox-1 as the ingester
// would: started with one pod active, or complete.
func liveJob(t *testing.T, h *harness, name string, complete bool) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	st, rv, phase := fmt.Sprintf(`{"startTime":%q,"active":1}`, now), "7", "Running"
	if complete {
		st = fmt.Sprintf(`{"startTime":%q,"completionTime":%q,"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}`, now, now)
		rv, phase = "8", "Succeeded"
	}
	obj := fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":%q,"namespace":"team-a","uid":"live-%s","resourceVersion":%q},"status":%s}`,
		name, name, rv, st)
	if err := h.store.Tx(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(t.Context(), []store.InventoryRow{{Cluster: "sandbox-1", APIVersion: "batch/v1", Kind: "Job",
			Namespace: "team-a", Name: name, UID: "live-" + name, ResourceVersion: rv, Health: "Healthy", Phase: phase,
			ObservedAt: time.Now(), Object: []byte(obj)}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// syncedEverywhere records the deployable's copy on sandbox-1 as synced at
// its generation, as the syncer would.
func syncedEverywhere(t *testing.T, h *harness, ns, name string) {
	t.Helper()
	if err := h.store.Tx(t.Context(), func(tx *store.Tx) error {
		d, err := tx.Deployables().Get(t.Context(), ns, name)
		if err != nil {
			return err
		}
		now := time.Now()
		return tx.Deployables().PutStatus(t.Context(), &store.DeployableClusterStatus{DeployableUID: d.UID, Cluster: "sandbox-1",
			State: string(v1alpha1.StateSynced), SyncedGeneration: d.Generation, StateGeneration: d.Generation, LastSyncedAt: &now})
	}); err != nil {
		t.Fatal(err)
	}
}

// artifactServer serves a folder as Flux's source-controller serves an
// artifact: a gzipped tarball at a URL, named with its digest.
type artifactServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	data []byte
}

func newArtifactServer(t *testing.T) *artifactServer {
	a := &artifactServer{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, _ = w.Write(a.data)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// publish serves files as the artifact from now on; it returns the
// artifact's digest as Flux checks it.
func (a *artifactServer) publish(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	a.mu.Lock()
	a.data = buf.Bytes()
	a.mu.Unlock()
	return "sha256:" + hex.EncodeToString(sum[:])
}

// controllerLog keeps the controller's output for a failure's message.
type controllerLog struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	exited atomic.Bool
}

func (l *controllerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *controllerLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	if len(s) > 8000 {
		s = s[len(s)-8000:]
	}
	return s
}

// startKustomizeController runs the controller against the kube-apiserver
// of kubeconfig, watching namespace ns, until the test ends.
func startKustomizeController(t *testing.T, flux *sandbox.FluxBinaries, kubeconfig, ns string) *controllerLog {
	t.Helper()
	logs := &controllerLog{}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, flux.KustomizeController(),
		"--watch-all-namespaces=false", "--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0", "--feature-gates=ExternalArtifact=true",
		"--log-level=info", "--concurrent=2")
	// controller-runtime finds its cluster by $KUBECONFIG.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logs, "\n[the controller exited: %v]\n", err)
		logs.exited.Store(true)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return logs
}
