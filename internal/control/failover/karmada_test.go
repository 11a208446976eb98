package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestBenchmarkKarmada runs the same failovers through purser and through
// Karmada (v1.18.2, built from its Go module) on the same sandbox
// clusters, in one run, and logs for each the time each system took and
// whether it was right:
//
//   - application: a FlinkDeployment turns RECONCILING (tolerationSeconds
//     10, its job id preserved to a label); the time from the fault to the
//     copy running on the other cluster, and whether the copy carries the
//     job id of the job that ran;
//   - cluster: the kube-apiserver of the cluster that runs a long Job is
//     stopped; the time until the Job runs on the other cluster, with each
//     system's default periods and with its short ones;
//   - second: Karmada issue #6232; the copy made by a first failover never
//     runs, and a second failover makes a third copy, which should carry
//     the job id of the last job that ran, not that of the copy that never
//     ran.
//
// Both systems run at once, each in its own namespace, so that the load of
// the machine weighs on both alike; the Flink simulator of the farm is the
// operator of both systems' FlinkDeployments. Karmada's side is started
// with its components' own defaults except where the scenario says.
//
// It builds Karmada on its first run (several minutes), so it runs only
// when asked: PURSER_BENCH=1 go test -run TestBenchmarkKarmada -v ./internal/control/failover/
func TestBenchmarkKarmada(t *testing.T) {
	if os.Getenv("PURSER_BENCH") != "1" {
		t.Skip("a benchmark beside Karmada, which it builds: set PURSER_BENCH=1")
	}
	t.Logf("load average at start: %s", loadAverage())
	built := time.Now()
	kb, err := sandbox.EnsureKarmada(t.Context(), sandbox.BuildConfig{Progress: t.Output()})
	if err != nil {
		t.Fatalf("build Karmada %s: %v", sandbox.KarmadaVersion, err)
	}
	t.Logf("Karmada %s binaries ready in %s (a cold build says so above)", sandbox.KarmadaVersion, time.Since(built).Round(time.Second))

	cs := env.Clusters(t)
	kd := startKarmada(t, kb)
	kd.join(t, "a", cs[0])
	kd.join(t, "b", cs[1])

	t.Run("application", func(t *testing.T) { karmadaApplication(t, kd, cs) })
	for _, tuned := range []bool{false, true} {
		name := map[bool]string{false: "defaults", true: "tuned"}[tuned]
		t.Run("cluster-"+name, func(t *testing.T) { karmadaCluster(t, kd, cs[0], tuned) })
	}
	t.Run("second", func(t *testing.T) { karmadaSecond(t, kd, cs) })
	t.Logf("load average at end: %s", loadAverage())
}

// karmadaGates are the feature gates of every Karmada component here:
// cluster failover is off by default (Failover), and preserving state to
// a label is alpha (StatefulFailoverInjection). GracefulEviction is on by
// default; it is named so that the configuration reads whole.
const karmadaGates = "Failover=true,GracefulEviction=true,StatefulFailoverInjection=true"

// Karmada's controller manager with its default periods, failover enabled
// as its documentation says: taint-based eviction on, and (below) a
// ClusterTaintPolicy that adds the NoExecute taint a not-Ready cluster
// gets. Without them a lost cluster's work never moves.
var karmadaDefaultFlags = []string{"--enable-no-execute-taint-eviction=true"}

// karmadaTunedFlags are Karmada's periods cut to about purser's tuned
// ones: a health check a second (default 10 s), a cluster failing for
// 2 s judged not Ready (default 30 s), the monitor's pass a second and
// its grace 4 s (defaults 5 s and 40 s). Karmada documents no lower bound;
// these keep the grace at four status updates, as Kubernetes advises for
// its node monitor.
var karmadaTunedFlags = append([]string{
	"--cluster-status-update-frequency=1s", "--cluster-failure-threshold=2s",
	"--cluster-monitor-period=1s", "--cluster-monitor-grace-period=4s",
}, karmadaDefaultFlags...)

// karmadaNS is the namespace of Karmada's objects, on Karmada and (by its
// namespace propagation) on every member.
const karmadaNS = "karmada-bench"

// karmadaDriver drives one Karmada control plane and reads its members.
type karmadaDriver struct {
	t       *testing.T
	k       *sandbox.Karmada
	dyn     dynamic.Interface
	members map[string]dynamic.Interface // by Karmada's cluster name
}

func startKarmada(t *testing.T, kb *sandbox.KarmadaBinaries) *karmadaDriver {
	dir, err := os.MkdirTemp("", "purser-karmada-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	k, err := sandbox.StartKarmada(ctx, sandbox.KarmadaConfig{
		Dir: filepath.Join(dir, "karmada"), Binaries: env.Binaries(t), Karmada: kb,
		FeatureGates: karmadaGates, ControllerFlags: karmadaDefaultFlags,
		WebhookFlags: []string{"--allow-no-execute-taint-policy=true"},
	})
	if err != nil {
		t.Fatalf("start Karmada (files in %s): %v", dir, err)
	}
	t.Cleanup(func() {
		k.Stop()
		if t.Failed() {
			t.Logf("Karmada's logs kept in %s", filepath.Join(k.Dir(), "logs"))
			return
		}
		_ = os.RemoveAll(dir)
	})
	d := &karmadaDriver{t: t, k: k, members: map[string]dynamic.Interface{}}
	if d.dyn, err = dynamic.NewForConfig(k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if err := flinksim.InstallCRD(ctx, k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	d.apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: `+karmadaNS+`}
`)
	// Since v1.14 Karmada's cluster controller adds only NoSchedule
	// taints; a NoExecute taint, which evicts, comes from a policy.
	d.apply(t, `
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: not-ready-no-execute}
spec:
  addOnConditions:
  - {conditionType: Ready, operator: NotIn, statusValues: ["True"]}
  removeOnConditions:
  - {conditionType: Ready, operator: In, statusValues: ["True"]}
  taints:
  - {key: cluster.karmada.io/not-ready, effect: NoExecute}
`)
	return d
}

// join registers a member under name and keeps a client of it.
func (d *karmadaDriver) join(t *testing.T, name string, c *sandbox.Cluster) {
	t.Helper()
	if err := d.k.Join(t.Context(), name, c); err != nil {
		t.Fatal(err)
	}
	d.member(name, c)
}

func (d *karmadaDriver) member(name string, c *sandbox.Cluster) dynamic.Interface {
	if m := d.members[name]; m != nil {
		return m
	}
	m, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		d.t.Fatal(err)
	}
	d.members[name] = m
	return m
}

// waitAPI waits until Karmada's cluster reports that it serves the
// resource of gv: Karmada's scheduler finds no cluster for a kind no
// cluster has reported (it reads each cluster's status.apiEnablements,
// refreshed at every status update), and does not try again when one
// reports it later.
func (d *karmadaDriver) waitAPI(t *testing.T, cluster, gv, resource string) {
	t.Helper()
	sandboxtest.Eventually(t, wait, "Karmada's cluster "+cluster+" reporting "+resource, func(ctx context.Context) error {
		c, err := d.dyn.Resource(sandbox.KarmadaClusters).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apis, _, _ := unstructured.NestedSlice(c.Object, "status", "apiEnablements")
		for _, api := range apis {
			m, _ := api.(map[string]any)
			if m["groupVersion"] != gv {
				continue
			}
			rs, _ := m["resources"].([]any)
			for _, r := range rs {
				if rm, _ := r.(map[string]any); rm["name"] == resource {
					return nil
				}
			}
		}
		return fmt.Errorf("not among its %d API groups yet", len(apis))
	})
}

// karmadaResources maps the kinds the benchmark creates on Karmada.
var karmadaResources = map[string]schema.GroupVersionResource{
	"Namespace":          {Version: "v1", Resource: "namespaces"},
	"PropagationPolicy":  sandbox.KarmadaPolicies,
	"ClusterTaintPolicy": sandbox.KarmadaTaintPolicies,
	"FlinkDeployment":    flinksim.Resource,
	"Job":                jobsGVR,
}

// apply creates one object from YAML on Karmada.
func (d *karmadaDriver) apply(t *testing.T, manifest string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	res, ok := karmadaResources[u.GetKind()]
	if !ok {
		t.Fatalf("no resource for kind %s", u.GetKind())
	}
	var ri dynamic.ResourceInterface = d.dyn.Resource(res)
	if u.GetNamespace() != "" {
		ri = d.dyn.Resource(res).Namespace(u.GetNamespace())
	}
	sandboxtest.Eventually(t, time.Minute, "create "+u.GetKind()+" "+u.GetName()+" on Karmada", func(ctx context.Context) error {
		_, err := ri.Create(ctx, u, metav1.CreateOptions{})
		return err
	})
}

// boundTo is the clusters Karmada's scheduler put the binding of
// kind/name on.
func (d *karmadaDriver) boundTo(ctx context.Context, kind, name string) ([]string, error) {
	rb, err := d.dyn.Resource(sandbox.KarmadaBindings).Namespace(karmadaNS).Get(ctx, name+"-"+strings.ToLower(kind), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	targets, _, _ := unstructured.NestedSlice(rb.Object, "spec", "clusters")
	var out []string
	for _, tc := range targets {
		m, _ := tc.(map[string]any)
		out = append(out, fmt.Sprint(m["name"]))
	}
	return out, nil
}

// taint adds (or, with add false, removes) a NoSchedule taint of the
// benchmark's on a Karmada cluster: the way to make the first placement
// pick the other cluster.
func (d *karmadaDriver) taint(t *testing.T, cluster string, add bool) {
	t.Helper()
	res := d.dyn.Resource(sandbox.KarmadaClusters)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := res.Get(t.Context(), cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, _, _ := unstructured.NestedSlice(c.Object, "spec", "taints")
		var kept []any
		for _, tt := range taints {
			if m, _ := tt.(map[string]any); m["key"] != "bench" {
				kept = append(kept, tt)
			}
		}
		if add {
			kept = append(kept, map[string]any{"key": "bench", "effect": "NoSchedule"})
		}
		if err := unstructured.SetNestedSlice(c.Object, kept, "spec", "taints"); err != nil {
			return err
		}
		_, err = res.Update(t.Context(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// label reads one label of the FlinkDeployment ns/name on a cluster.
func label(ctx context.Context, dyn dynamic.Interface, ns, name, key string) (string, bool) {
	obj, err := dyn.Resource(flinksim.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	v, ok := obj.GetLabels()[key]
	return v, ok
}

// jobIDLabel is where both systems preserve a Flink job's id (Karmada's
// aliasLabelName, purser's rule of the same name).
const jobIDLabel = "flink.apache.org/job-id"

// outcome is one system's result of one scenario.
type outcome struct {
	took  time.Duration // 0: it did not happen within the bound
	right bool
	note  string
}

func (o outcome) secs() string {
	if o.took == 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f", o.took.Seconds())
}

func (o outcome) rightBit() int {
	if o.right {
		return 1
	}
	return 0
}

// logRow prints the line hack/benchreport reads for one scenario.
func logRow(t *testing.T, scenario string, p, k outcome) {
	t.Logf("karmada row %s: purser %s s right %d, karmada %s s right %d", scenario, p.secs(), p.rightBit(), k.secs(), k.rightBit())
	t.Logf("  purser: %s", p.note)
	t.Logf("  karmada: %s", k.note)
}

// karmadaBound is how long the benchmark waits for either system to do
// what it measures; what is not done by then is reported as not done.
const karmadaBound = 4 * time.Minute

// pollUntil polls cond every 100 ms until it is true or the bound passes,
// and returns when it was first seen true (zero if never).
func pollUntil(ctx context.Context, bound time.Duration, cond func(ctx context.Context) bool) time.Time {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		ok := cond(cctx)
		ccancel()
		if ok {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// karmadaFlink is the FlinkDeployment of the Karmada side and its policy:
// one cluster of clusters (spreadConstraints with one group: Karmada
// would otherwise run a copy on each), application failover after
// toleration seconds of unhealthy status, the old copy deleted before the
// new one is created (Directly, as purser's AtMostOne), the job id kept in
// a label. propagateDeps is required by Karmada's application failover
// controller (it ignores bindings without it).
func karmadaFlink(name, clusters string, toleration int) string {
	return fmt.Sprintf(`
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: %[1]s, namespace: %[4]s}
spec:
  propagateDeps: true
  resourceSelectors:
  - {apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment, name: %[1]s}
  placement:
    clusterAffinity: {clusterNames: [%[2]s]}
    spreadConstraints:
    - {spreadByField: cluster, maxGroups: 1, minGroups: 1}
  failover:
    application:
      decisionConditions: {tolerationSeconds: %[3]d}
      purgeMode: Directly
      statePreservation:
        rules:
        - {aliasLabelName: %[5]s, jsonPath: "{ .jobStatus.jobId }"}
---
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: %[1]s, namespace: %[4]s}
spec:
  image: flink:1.20
  flinkConfiguration:
    state.checkpoints.dir: s3://flink/checkpoints
    state.savepoints.dir: s3://flink/savepoints
    execution.checkpointing.interval: 1s
  job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: 2, upgradeMode: savepoint}
`, name, clusters, toleration, karmadaNS, jobIDLabel)
}

// applyAll applies a multi-document manifest.
func (d *karmadaDriver) applyAll(t *testing.T, manifests string) {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			d.apply(t, doc)
		}
	}
}

// purserFlink is purser's runnable of the same job: AtMostOne (the old
// copy gone before the new starts, as Karmada's Directly), the same
// toleration, the job id preserved to the same label, and restored from
// its last checkpoint.
func purserFlink(name, clusters string, toleration int) string {
	m := strings.Replace(flinkRunnable, "%s", clusters, 1)
	m = strings.Replace(m, "name: wordcount", "name: "+name, 1)
	m = strings.Replace(m, "tolerationSeconds: 3", fmt.Sprintf("tolerationSeconds: %d", toleration), 1)
	m = strings.Replace(m, "initialTolerationSeconds: 6", fmt.Sprintf("initialTolerationSeconds: %d", toleration), 1)
	return strings.Replace(m, "execution.checkpointing.interval: 200ms", "execution.checkpointing.interval: 1s", 1)
}

// karmadaRunning waits until Karmada has placed kind/name on one cluster
// and the simulator runs it there, and returns the cluster and job id.
// startFlinkInBoth runs the FlinkDeployment name through purser and
// through Karmada, each placeable on clusters, and waits until each copy
// runs Healthy with a checkpoint (purser's) to fail over with. It returns
// where each runs and its job id.
func (d *karmadaDriver) startFlinkInBoth(t *testing.T, f *farm, name string, clusters []string, toleration int) (pFrom, pJob, kFrom, kJob string) {
	t.Helper()
	for _, cl := range clusters {
		d.waitAPI(t, cl, "flink.apache.org/v1beta1", "flinkdeployments")
	}
	list := strings.Join(clusters, ", ")
	f.submit(purserFlink(name, list, toleration))
	d.applyAll(t, karmadaFlink(name, list, toleration))
	t.Cleanup(func() { d.deleteKarmadaObjects(name, "FlinkDeployment") })
	pFrom = running(f, name).Status.Cluster
	pJob, _ = f.sims[pFrom].Running(f.ns, name)
	waitCheckpoint(t, f, pJob)
	kFrom, kJob = d.karmadaRunning(t, f, name)
	d.waitHealthy(t, name, kFrom)
	return pFrom, pJob, kFrom, kJob
}

func (d *karmadaDriver) karmadaRunning(t *testing.T, f *farm, name string) (string, string) {
	t.Helper()
	var cluster, job string
	sandboxtest.Eventually(t, wait, "Karmada's "+name+" running", func(ctx context.Context) error {
		clusters, err := d.boundTo(ctx, "FlinkDeployment", name)
		if err != nil {
			return err
		}
		if len(clusters) != 1 {
			return fmt.Errorf("bound to %v", clusters)
		}
		id, ok := f.sims[clusters[0]].Running(karmadaNS, name)
		if !ok {
			return fmt.Errorf("not running on %s", clusters[0])
		}
		cluster, job = clusters[0], id
		return nil
	})
	return cluster, job
}

// karmadaApplication is scenario (a).
func karmadaApplication(t *testing.T, d *karmadaDriver, cs []*sandbox.Cluster) {
	const toleration = 10
	f := newFarmWith(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}}, periods{})
	const name = "app"
	pFrom, pJob, kFrom, kJob := d.startFlinkInBoth(t, f, name, []string{"a", "b"}, toleration)

	fault := time.Now()
	f.sims[pFrom].Fail(f.ns, name, flinksim.Reconciling)
	f.sims[kFrom].Fail(karmadaNS, name, flinksim.Reconciling)
	var p, k outcome
	var wg sync.WaitGroup
	wg.Go(func() {
		p = copyRunning(t.Context(), f.sims[other(pFrom)], f.dyn[other(pFrom)], f.ns, name, fault, pJob)
	})
	wg.Go(func() {
		k = copyRunning(t.Context(), f.sims[other(kFrom)], d.members[other(kFrom)], karmadaNS, name, fault, kJob)
	})
	wg.Wait()
	logRow(t, "application", p, k)
}

// waitHealthy waits until Karmada's binding of name reports it Healthy on
// cluster: its application failover judges only what it has seen.
func (d *karmadaDriver) waitHealthy(t *testing.T, name, cluster string) {
	t.Helper()
	sandboxtest.Eventually(t, wait, "Karmada sees "+name+" Healthy on "+cluster, func(ctx context.Context) error {
		rb, err := d.dyn.Resource(sandbox.KarmadaBindings).Namespace(karmadaNS).Get(ctx, name+"-flinkdeployment", metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(rb.Object, "status", "aggregatedStatus")
		for _, it := range items {
			m, _ := it.(map[string]any)
			if m["clusterName"] == cluster && m["health"] == "Healthy" {
				return nil
			}
		}
		return fmt.Errorf("aggregated status %v", items)
	})
}

// copyRunning waits for the copy of ns/name to run under sim and reads
// the job id label it was given; right when it is want.
func copyRunning(ctx context.Context, sim *flinksim.Simulator, member dynamic.Interface, ns, name string, fault time.Time, want string) outcome {
	at := pollUntil(ctx, karmadaBound, func(context.Context) bool {
		_, ok := sim.Running(ns, name)
		return ok
	})
	if at.IsZero() {
		return outcome{note: fmt.Sprintf("no copy running elsewhere within %s", karmadaBound)}
	}
	got, _ := label(ctx, member, ns, name, jobIDLabel)
	return outcome{took: at.Sub(fault), right: got == want,
		note: fmt.Sprintf("copy running after %s, label %s=%q, the job that ran was %q", at.Sub(fault).Round(10*time.Millisecond), jobIDLabel, got, want)}
}

// longJob is a Job whose pod runs for an hour under kwok.
const longJobSpec = `
    spec:
      backoffLimit: 0
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "1h"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1h"
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]`

func purserJob(name string) string {
	return `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: ` + name + `}
spec:
  template:
    apiVersion: batch/v1
    kind: Job` + longJobSpec + `
  placement:
    clusterAffinity: {clusterNames: [a, b]}
  failover:
    consistency: AtLeastOne
`
}

// karmadaJob is the Karmada side's Job and policy: one cluster of the
// two, no failover section (a cluster's failover is the controller
// manager's, purge mode Gracefully by default: the new copy first).
func karmadaJob(name, clusters string) string {
	return fmt.Sprintf(`
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: %[1]s, namespace: %[3]s}
spec:
  resourceSelectors:
  - {apiVersion: batch/v1, kind: Job, name: %[1]s}
  placement:
    clusterAffinity: {clusterNames: [%[2]s]}
    spreadConstraints:
    - {spreadByField: cluster, maxGroups: 1, minGroups: 1}
---
apiVersion: batch/v1
kind: Job
metadata: {name: %[1]s, namespace: %[3]s}
%[4]s
`, name, clusters, karmadaNS, strings.ReplaceAll(longJobSpec, "\n    ", "\n"))
}

// podRunning reports whether a pod of Job name runs in ns on a cluster.
func podRunning(ctx context.Context, member dynamic.Interface, ns, name string) bool {
	list, err := member.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns).
		List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		return false
	}
	for _, p := range list.Items {
		if phase, _, _ := unstructured.NestedString(p.Object, "status", "phase"); phase == string(corev1.PodRunning) {
			return true
		}
	}
	return false
}

// karmadaCluster is scenario (b): a's kube-apiserver stays; the lost
// cluster's is stopped under a Job of each system.
func karmadaCluster(t *testing.T, d *karmadaDriver, a *sandbox.Cluster, tuned bool) {
	p := periods{}
	flags := karmadaDefaultFlags
	if tuned {
		p = testPeriods
		flags = karmadaTunedFlags
	}
	if err := d.k.RestartControllerManager(flags); err != nil {
		t.Fatal(err)
	}
	lost := env.Dedicated(t, false)
	lostName := "lost-" + map[bool]string{false: "defaults", true: "tuned"}[tuned]
	d.join(t, lostName, lost)
	f := newFarmWith(t, sqliteDSN(t), []cluster{{name: "a", sandbox: a}, {name: "b", sandbox: lost}}, p)

	// Both start on the cluster that will be lost: a is cordoned in each
	// system until they run there.
	f.do(http.MethodPut, "/api/v1/clusters/a", map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{"taints": []map[string]string{{"key": "bench", "effect": "NoSchedule"}}},
	}, nil)
	d.taint(t, "a", true)
	// A name of its own for each subtest: Karmada's copy of the last one
	// may still be going from the lost cluster, whose Work cannot finish.
	name := "long-" + map[bool]string{false: "defaults", true: "tuned"}[tuned]
	f.submit(purserJob(name))
	d.applyAll(t, karmadaJob(name, "a, "+lostName))
	lostDyn := f.dyn["b"]
	sandboxtest.Eventually(t, wait, "both Jobs running on the cluster to lose", func(ctx context.Context) error {
		if !podRunning(ctx, lostDyn, f.ns, name) {
			return fmt.Errorf("purser's not running")
		}
		if !podRunning(ctx, lostDyn, karmadaNS, name) {
			return fmt.Errorf("Karmada's not running")
		}
		return nil
	})
	f.do(http.MethodPut, "/api/v1/clusters/a", map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{},
	}, nil)
	d.taint(t, "a", false)
	t.Cleanup(func() { d.deleteKarmadaObjects(name, "Job") })

	stopped := time.Now()
	lost.StopAPIServer()
	aDyn := f.dyn["a"]
	var pr, kr outcome
	var wg sync.WaitGroup
	wg.Go(func() { pr = jobMoved(t.Context(), aDyn, f.ns, name, stopped) })
	wg.Go(func() { kr = jobMoved(t.Context(), aDyn, karmadaNS, name, stopped) })
	wg.Wait()
	scenario := map[bool]string{false: "cluster-defaults", true: "cluster-tuned"}[tuned]
	logRow(t, scenario, pr, kr)
	// The next subtest's farm and cluster start fresh; this one's stop
	// now, before its folder is reused.
	f.stop()
	lost.Stop()
}

// jobMoved waits for Job name to run on the surviving cluster.
func jobMoved(ctx context.Context, member dynamic.Interface, ns, name string, stopped time.Time) outcome {
	at := pollUntil(ctx, karmadaBound, func(ctx context.Context) bool { return podRunning(ctx, member, ns, name) })
	if at.IsZero() {
		return outcome{note: fmt.Sprintf("the Job did not run on the other cluster within %s", karmadaBound)}
	}
	return outcome{took: at.Sub(stopped), right: true,
		note: fmt.Sprintf("the Job's pod ran on the other cluster %s after the kube-apiserver stopped", at.Sub(stopped).Round(10*time.Millisecond))}
}

// deleteKarmadaObjects removes a scenario's objects from Karmada, so that
// the next scenario's placement is its own.
func (d *karmadaDriver) deleteKarmadaObjects(name, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.dyn.Resource(karmadaResources[kind]).Namespace(karmadaNS).Delete(ctx, name, metav1.DeleteOptions{})
	_ = d.dyn.Resource(sandbox.KarmadaPolicies).Namespace(karmadaNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// karmadaSecond is scenario (c), on three clusters: the first failover's
// copy never runs (its cluster cannot run the JobManager either), and a
// second failover makes a third copy. Karmada needs the third cluster: a
// cluster it evicted from stays excluded while its eviction task lasts
// (until the new copy is healthy, or --graceful-eviction-timeout, 10 min).
func karmadaSecond(t *testing.T, d *karmadaDriver, cs []*sandbox.Cluster) {
	const toleration = 10
	c := env.Dedicated(t, false)
	d.join(t, "c", c)
	members := []cluster{{name: "a", sandbox: cs[0]}, {name: "b", sandbox: cs[1]}, {name: "c", sandbox: c}}
	f := newFarmWith(t, sqliteDSN(t), members, periods{})
	const name = "second"
	pFrom, pJob, kFrom, kJob := d.startFlinkInBoth(t, f, name, []string{"a", "b", "c"}, toleration)

	var p, k outcome
	var wg sync.WaitGroup
	wg.Go(func() { p = secondFailover(t.Context(), f, f.ns, name, pFrom, pJob, f.dyn) })
	wg.Go(func() { k = secondFailover(t.Context(), f, karmadaNS, name, kFrom, kJob, d.members) })
	wg.Wait()
	logRow(t, "second", p, k)
}

// secondFailover fails ns/name on every cluster, waits for the copy of
// the first failover (which therefore never runs), lets the other clusters
// run it again, and follows the second failover to the third copy
// running. The time is from the second copy's creation, when it starts
// being unhealthy, to the third copy running; right when the third copy
// carries the job id of the job that ran (want), not the second copy's.
func secondFailover(ctx context.Context, f *farm, ns, name, from, want string, members map[string]dynamic.Interface) outcome {
	for _, sim := range f.sims {
		sim.Fail(ns, name, flinksim.Reconciling)
	}
	var second string
	created := pollUntil(ctx, karmadaBound, func(context.Context) bool {
		for cl, sim := range f.sims {
			if cl != from && sim.Has(ns, name) {
				second = cl
				return true
			}
		}
		return false
	})
	if created.IsZero() {
		return outcome{note: fmt.Sprintf("no second copy within %s", karmadaBound)}
	}
	var secondJob string
	pollUntil(ctx, 30*time.Second, func(context.Context) bool {
		d := f.sims[second].Deploys(ns, name)
		if len(d) > 0 {
			secondJob = d[0].JobID
		}
		return secondJob != ""
	})
	for cl, sim := range f.sims {
		if cl != second {
			sim.Recover(ns, name)
		}
	}
	var third string
	at := pollUntil(ctx, karmadaBound, func(context.Context) bool {
		for cl, sim := range f.sims {
			if _, ok := sim.Running(ns, name); ok && cl != second {
				third = cl
				return true
			}
		}
		return false
	})
	if at.IsZero() {
		return outcome{note: fmt.Sprintf("second copy on %s (job %s) never ran; no third copy running within %s", second, secondJob, karmadaBound)}
	}
	got, _ := label(ctx, members[third], ns, name, jobIDLabel)
	return outcome{took: at.Sub(created), right: got == want,
		note: fmt.Sprintf("first on %s (job %s); second copy on %s (job %s, never ran); third copy on %s running %s after the second was created, label %s=%q",
			from, want, second, secondJob, third, at.Sub(created).Round(10*time.Millisecond), jobIDLabel, got)}
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
