package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 2, Argo: true})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// clientFromKubeconfig builds a client the way a user's kubectl would: from
// the kubeconfig file alone, verifying the cluster's certificate.
func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Insecure || len(cfg.CAData) == 0 {
		t.Fatalf("kubeconfig %s does not verify the server certificate", path)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func job(name string, initContainer bool) *batchv1.Job {
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
	}
	if initContainer {
		spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", Command: []string{"true"}}}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

func waitJobComplete(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("job %s/%s Complete", ns, name), func(ctx context.Context) error {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return nil
			}
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.Fatalf("job %s/%s failed: %s", ns, name, c.Message)
			}
		}
		return fmt.Errorf("conditions %v, succeeded %d", j.Status.Conditions, j.Status.Succeeded)
	})
}

func TestTwoClustersEachCompleteAJob(t *testing.T) {
	clusters := env.Clusters(t)
	if len(clusters) != 2 {
		t.Fatalf("want 2 clusters, got %d", len(clusters))
	}
	if clusters[0].Server() == clusters[1].Server() {
		t.Fatalf("both clusters serve at %s", clusters[0].Server())
	}
	for i, c := range clusters {
		if want := sandbox.ClusterName(i + 1); c.Name() != want {
			t.Errorf("cluster %d is named %q, want %q", i, c.Name(), want)
		}
		if got, want := c.Labels()["dc"], fmt.Sprintf("dc-%d", i+1); got != want {
			t.Errorf("%s: label dc=%q, want %q", c.Name(), got, want)
		}
	}
	ctx := context.Background()
	for _, c := range clusters {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			client := clientFromKubeconfig(t, c.KubeconfigPath())
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) == 0 {
				t.Fatal("no nodes")
			}
			for _, n := range nodes.Items {
				if !nodeReady(n) {
					t.Errorf("node %s is not Ready", n.Name)
				}
			}
			if err := c.EnsureNamespace(ctx, "team-a"); err != nil {
				t.Fatal(err)
			}
			if _, err := client.BatchV1().Jobs("team-a").Create(ctx, job("report", false), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitJobComplete(t, client, "team-a", "report")
			t.Cleanup(func() { deleteJob(t, client, "team-a", "report") })
		})
	}
}

func TestJobWithInitContainerCompletes(t *testing.T) {
	c := env.Clusters(t)[0]
	ctx := context.Background()
	client := clientFromKubeconfig(t, c.KubeconfigPath())
	if err := c.EnsureNamespace(ctx, "init-test"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.BatchV1().Jobs("init-test").Create(ctx, job("with-init", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteJob(t, client, "init-test", "with-init") })
	waitJobComplete(t, client, "init-test", "with-init")

	pods, err := client.CoreV1().Pods("init-test").List(ctx, metav1.ListOptions{LabelSelector: "job-name=with-init"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of the job: %v (%d)", err, len(pods.Items))
	}
	pod := pods.Items[0]
	if len(pod.Status.InitContainerStatuses) != 1 || pod.Status.InitContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("init container did not run to completion: %+v", pod.Status.InitContainerStatuses)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod phase %s, want Succeeded", pod.Status.Phase)
	}
}

var workflowResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

const twoStepWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: two-steps
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: first
        template: echo
    - - name: second
        template: echo
  - name: echo
    container:
      image: busybox
      command: [echo, hello]
`

func TestArgoWorkflowWithTwoSequentialStepsSucceeds(t *testing.T) {
	c := env.Clusters(t)[1]
	ctx := context.Background()
	if err := c.EnsureNamespace(ctx, "workflows"); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(twoStepWorkflow), &obj); err != nil {
		t.Fatal(err)
	}
	wfs := dyn.Resource(workflowResource).Namespace("workflows")
	if _, err := wfs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wfs.Delete(context.Background(), "two-steps", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete workflow two-steps: %v", err)
		}
	})

	var wf *unstructured.Unstructured
	sandboxtest.Eventually(t, 3*time.Minute, "workflow two-steps Succeeded", func(ctx context.Context) error {
		wf, err = wfs.Get(ctx, "two-steps", metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
		if phase == "Failed" || phase == "Error" {
			msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
			t.Fatalf("workflow %s: %s", phase, msg)
		}
		if phase != "Succeeded" {
			return fmt.Errorf("phase %q", phase)
		}
		return nil
	})

	// Both steps ran as pods, and the second started only after the first ended.
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	steps := map[string]map[string]any{}
	for _, n := range nodes {
		node, _ := n.(map[string]any)
		if node["type"] == "Pod" {
			name, _ := node["displayName"].(string)
			steps[name] = node
		}
	}
	first, second := steps["first"], steps["second"]
	if first == nil || second == nil {
		t.Fatalf("want pod steps first and second, got %v", keys(steps))
	}
	for name, n := range steps {
		if n["phase"] != "Succeeded" {
			t.Errorf("step %s phase %v", name, n["phase"])
		}
	}
	firstEnd, _ := time.Parse(time.RFC3339, fmt.Sprint(first["finishedAt"]))
	secondStart, _ := time.Parse(time.RFC3339, fmt.Sprint(second["startedAt"]))
	if secondStart.Before(firstEnd) {
		t.Errorf("second step started at %s, before the first ended at %s", secondStart, firstEnd)
	}
}

func TestAPIServerStopAndRestartKeepsObjects(t *testing.T) {
	c := env.Dedicated(t, false)
	ctx := context.Background()
	client := clientFromKubeconfig(t, c.KubeconfigPath())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep-me"}, Data: map[string]string{"k": "v"}}
	created, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server := c.Server()

	stopStart := time.Now()
	c.StopAPIServer()
	t.Logf("kube-apiserver stopped in %s", time.Since(stopStart).Round(time.Millisecond))
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "keep-me", metav1.GetOptions{}); err == nil {
		t.Fatal("request succeeded with the kube-apiserver stopped")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("want connection refused with the kube-apiserver stopped, got %v", err)
	}

	restart := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver ready again in %s", time.Since(restart).Round(time.Millisecond))
	if c.Server() != server {
		t.Fatalf("restarted at %s, was %s", c.Server(), server)
	}
	got, err := client.CoreV1().ConfigMaps("default").Get(ctx, "keep-me", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got.UID != created.UID || got.Data["k"] != "v" {
		t.Fatalf("after restart got uid %s data %v, want uid %s data k=v", got.UID, got.Data, created.UID)
	}
}

func TestWipedClusterIsEmptyAndServing(t *testing.T) {
	c := env.Dedicated(t, false)
	ctx := context.Background()
	client := clientFromKubeconfig(t, c.KubeconfigPath())
	if err := c.EnsureNamespace(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gone-after-wipe"}}
	if _, err := client.CoreV1().ConfigMaps("doomed").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	server := c.Server()

	if err := c.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Server() != server {
		t.Fatalf("wiped cluster moved from %s to %s", server, c.Server())
	}
	// The old kubeconfig still works: same endpoint, same credentials.
	if _, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace doomed after wipe: want NotFound, got %v", err)
	}
	if _, err := client.CoreV1().ConfigMaps("doomed").Get(ctx, "gone-after-wipe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after wipe: want NotFound, got %v", err)
	}
	// Serving: it runs work again.
	if err := c.EnsureNamespace(ctx, "reborn"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.BatchV1().Jobs("reborn").Create(ctx, job("after-wipe", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJobComplete(t, client, "reborn", "after-wipe")
}

func TestProxyCutRefusesAndRestorePasses(t *testing.T) {
	c := env.Clusters(t)[0]
	proxy, client := proxied(t, c, 5*time.Second)
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	// A watch open through the proxy is broken by the cut, as a partition would.
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	proxy.Cut()
	dialer := net.Dialer{Timeout: time.Second}
	if _, err := dialer.DialContext(ctx, "tcp", proxy.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a cut proxy: want connection refused, got %v", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Fatal("request through a cut proxy succeeded")
	}
	// Events that arrived before the cut may still be buffered; after them
	// the channel must close.
	closed := time.After(30 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-w.ResultChan():
		case <-closed:
			t.Fatal("watch through the cut proxy is still open")
		}
	}

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, 30*time.Second, "request through the restored proxy", func(ctx context.Context) error {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// A held proxy keeps the connection open and delivers nothing until its
// release, then everything: a create sent during the hold lands after it,
// as one retransmitted across a healed partition does. Released one way,
// requests arrive and answers do not.
func TestProxyHoldDeliversOnRelease(t *testing.T) {
	c := env.Clusters(t)[0]
	proxy, held := proxied(t, c, 30*time.Second)
	direct, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := held.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	name := "held-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()))
	t.Cleanup(func() {
		if err := direct.CoreV1().ConfigMaps("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete configmap %s: %v", name, err)
		}
	})

	proxy.Hold()
	created := make(chan error, 1)
	go func() {
		_, err := held.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		created <- err
	}()
	// Nothing arrives while held: the kube-apiserver, read around the
	// proxy, has no such ConfigMap, and the client has no answer.
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		if _, err := direct.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("while held, the ConfigMap: %v; want NotFound", err)
		}
		select {
		case err := <-created:
			t.Fatalf("the create answered while held: %v", err)
		default:
		}
	}
	// Released one way, the create lands, and its answer stays held.
	proxy.ReleaseToTarget()
	sandboxtest.Eventually(t, 30*time.Second, "the create landed", func(ctx context.Context) error {
		_, err := direct.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err
	})
	select {
	case err := <-created:
		t.Fatalf("the create answered while its answer was held: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	proxy.Release()
	if err := <-created; err != nil {
		t.Fatalf("the held create, released: %v", err)
	}
}

// proxied puts a proxy in front of c's kube-apiserver and returns it with
// a client that goes through it, each request bounded by timeout.
func proxied(t *testing.T, c *sandbox.Cluster, timeout time.Duration) (*sandbox.Proxy, kubernetes.Interface) {
	t.Helper()
	proxy, err := sandbox.NewProxy("127.0.0.1:0", c.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := c.RESTConfig()
	cfg.Host = "https://" + proxy.Addr()
	cfg.Timeout = timeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return proxy, client
}

func TestStopLeavesNoProcessAndFreesPorts(t *testing.T) {
	c := env.Dedicated(t, true)
	if left := sandbox.Leftovers(c.Dir()); len(left) < 6 {
		t.Fatalf("want etcd, kube-apiserver, controller-manager, scheduler, kwok and argo running, found %v", left)
	}
	c.Stop()
	if left := sandbox.Leftovers(c.Dir()); len(left) > 0 {
		t.Fatalf("processes left after Stop: %v", left)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", c.APIServerAddr())
	if err != nil {
		t.Fatalf("kube-apiserver port still taken after Stop: %v", err)
	}
	l.Close()
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteJob is a cleanup: the clusters are shared by the tests that follow.
func deleteJob(t *testing.T, client kubernetes.Interface, ns, name string) {
	bg := metav1.DeletePropagationBackground
	err := client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete job %s/%s: %v", ns, name, err)
	}
}

func keys(m map[string]map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ", ")
}

// BenchmarkClusterStart measures how long a new cluster takes from nothing
// to a ready API server with Ready nodes, and the memory its processes hold
// right after.
func BenchmarkClusterStart(b *testing.B) {
	for _, argo := range []bool{false, true} {
		b.Run(fmt.Sprintf("argo=%v", argo), func(b *testing.B) {
			bins := env.Binaries(b)
			var rssTotal float64
			for i := range b.N {
				dir := b.TempDir()
				b.StartTimer()
				c, err := sandbox.Start(context.Background(), sandbox.Config{
					Name: fmt.Sprintf("bench-%d", i), Dir: dir, Binaries: bins, Argo: argo,
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				rss := map[string]float64{}
				var sum float64
				for _, p := range sandbox.Leftovers(c.Dir()) {
					mb := rssMB(p.Pid)
					rss[p.Command] += mb
					sum += mb
				}
				rssTotal += sum
				b.Logf("RSS MB by process: %v", rss)
				c.Stop()
			}
			b.ReportMetric(rssTotal/float64(b.N), "MB-rss/cluster")
		})
	}
}

// rssMB reads a process's resident memory from /proc.
func rssMB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb float64
			if _, err := fmt.Sscan(f[1], &kb); err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
