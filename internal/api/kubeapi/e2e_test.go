package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// wait bounds the waits on the real pipeline; it measures nothing.
const wait = 3 * time.Minute

// pipeline is purser as it runs: NATS, the ingester, a real agent per
// sandbox cluster, and the API server (with /k8s and its feed) over the
// database the ingester writes. Nothing is written into the inventory by
// the test.
type pipeline struct {
	t     testing.TB
	store *store.Store
	srv   *httptest.Server
	token string // admin's
	kube  map[string]kubernetes.Interface
}

// member is a sandbox cluster under the name purser knows it by, and the
// kinds its Cluster asks its agent to track beside the defaults
// (spec.inventory.kinds).
type member struct {
	name    string
	sandbox *sandbox.Cluster
	optIn   []string
}

func startPipeline(t testing.TB, members []member) *pipeline {
	t.Helper()
	// NATS first: cleanups run last first, so the components stop before
	// the server they talk to.
	nats := streamtest.Start(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	run := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s stopped: %v", name, err)
			}
		})
	}
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := &pipeline{t: t, store: st, kube: map[string]kubernetes.Interface{}}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, bench := t.(*testing.B); bench {
		log = slog.New(slog.DiscardHandler)
	}
	streams := streamtest.Declared(t, nats.URL)
	interp, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: st, Stream: streams, Health: interp, Logger: log.With("component", "ingester")})
	if err != nil {
		t.Fatal(err)
	}
	run("ingester", ingester.Run)
	p.token = auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(p.token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := sealtest.New(t)
	relay := outbox.NewRelay(outbox.StoreSource(st), streams, outbox.Config{Interval: 100 * time.Millisecond})
	run("relay", relay.Run)
	p.srv = httptest.NewTLSServer(server.New(server.Config{Store: st, InventoryChanges: streams, Outbox: relay, Tokens: tokens, Policy: pol, Sealer: sealer, Logger: log}))
	t.Cleanup(p.srv.Close)
	for _, m := range members {
		// Registered as an admin registers it, with the kinds its agent
		// is to track on request.
		kc, err := m.sandbox.Kubeconfig("")
		if err != nil {
			t.Fatal(err)
		}
		spec := map[string]any{"kubeconfig": string(kc)}
		if len(m.optIn) > 0 {
			spec["inventory"] = map[string]any{"kinds": m.optIn}
		}
		body, _ := json.Marshal(map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": m.name}, "spec": spec})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+"/api/v1/clusters", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("register cluster %s: %d %s", m.name, resp.StatusCode, answer)
		}
		sc, err := stream.Connect(ctx, nats.URL, stream.Config{Name: "agent-" + m.name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sc.Close)
		a, err := agent.New(agent.Config{Cluster: m.name, RESTConfig: m.sandbox.RESTConfig(), Stream: sc,
			SnapshotInterval: 5 * time.Second, HeartbeatInterval: 300 * time.Millisecond, DiscoveryInterval: time.Second,
			LeaseDuration: 6 * time.Second, Logger: log.With("component", "agent", "cluster", m.name)})
		if err != nil {
			t.Fatal(err)
		}
		run("agent "+m.name, a.Run)
		if p.kube[m.name], err = m.sandbox.Client(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// put sends a PUT of body to the API as admin; 200 or the test fails.
func (p *pipeline) put(path string, body any) {
	p.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, p.srv.URL+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, answer)
	}
}

func (p *pipeline) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
}

// kubectl is the real kubectl with `purser kubeconfig`'s contexts for the
// pipeline's server.
func (p *pipeline) kubectl(t *testing.T, clusters []string) *kubectl {
	t.Helper()
	return newKubectlWith(t, client.KubeconfigOptions{Server: p.srv.URL, Name: "purser", Clusters: clusters, Token: p.token, CAData: p.caPEM()})
}

// namespace creates a namespace of the test's in every member, deleted
// when the test ends.
func (p *pipeline) namespace(prefix string) string {
	p.t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := prefix + "-" + hex.EncodeToString(b)
	for name, kc := range p.kube {
		if _, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			p.t.Fatalf("create namespace %s in %s: %v", ns, name, err)
		}
		p.t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	return ns
}

func (p *pipeline) configMap(cluster, ns, name string, data map[string]string) {
	p.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	if _, err := p.kube[cluster].CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		p.t.Fatalf("create ConfigMap %s/%s in %s: %v", ns, name, cluster, err)
	}
}

// try runs kubectl in a wait: a failure (the kind not in the inventory
// yet) is the wait's error, not the test's.
func (k *kubectl) try(args ...string) (string, error) {
	k.t.Helper()
	out, errOut, failed := k.run(args...)
	if failed {
		return "", fmt.Errorf("kubectl %s: %s", strings.Join(args, " "), errOut)
	}
	return out, nil
}

// watchLines runs `kubectl ARGS` (a -w) and hands on each line of its
// output, stamped when it was read.
type watchLines struct {
	lines  chan stampedLine
	stderr *bytes.Buffer
	cmd    *exec.Cmd
}

type stampedLine struct {
	at   time.Time
	text string
}

func startWatch(t testing.TB, c *exec.Cmd) *watchLines {
	t.Helper()
	w := &watchLines{lines: make(chan stampedLine, 1000), stderr: &bytes.Buffer{}, cmd: c}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = w.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- stampedLine{at: time.Now(), text: sc.Text()}
		}
		close(w.lines)
	}()
	return w
}

// next waits for the first line that match accepts, and returns when it
// was read.
func (w *watchLines) next(t testing.TB, what string, match func(fields []string) bool) time.Time {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("kubectl -w ended before %s: %s", what, w.stderr.String())
			}
			if match(strings.Fields(l.text)) {
				return l.at
			}
		case <-timeout:
			t.Fatalf("kubectl -w: no line for %s after %s: %s", what, wait, w.stderr.String())
		}
	}
}

// TestKubectlEndToEnd runs purser as it runs: two sandbox clusters, each
// with a real agent, NATS, the ingester and the API server; the machine's
// kubectl (the sandbox's pinned build) reads the farm through /k8s. It
// lists ConfigMaps and Jobs of both clusters with a CLUSTER column,
// watches a ConfigMap created on a member cluster arrive (the latency is
// logged), and, once one cluster's kube-apiserver is stopped, still
// answers from the inventory, warning that that cluster's records may be
// stale.
func TestKubectlEndToEnd(t *testing.T) {
	shared := env.Clusters(t)[0]
	stopped := env.Dedicated(t, false) // its kube-apiserver is stopped below
	// c1 tracks Pods and Events on request (its Cluster's
	// spec.inventory.kinds), c2 does not.
	p := startPipeline(t, []member{{"c1", shared, []string{"Pod", "Event"}}, {"c2", stopped, nil}})
	ns := p.namespace("e2e")
	k := p.kubectl(t, []string{"c1", "c2"})
	for _, c := range []string{"c1", "c2"} {
		p.configMap(c, ns, "settings", map[string]string{"a": "1", "b": "2"})
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns}, Spec: batchv1.JobSpec{
			Suspend: new(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox:1"}}}}}}
		if _, err := p.kube[c].BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p.configMap("c2", ns, "only-c2", nil)
	for _, c := range []string{"c1", "c2"} {
		// A Job that runs (kwok completes its pod), in both clusters.
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns}, Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox:1"}}}}}}
		if _, err := p.kube[c].BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The agents report, the ingester stores, kubectl reads both clusters.
	sandboxtest.Eventually(t, wait, "kubectl get cm lists both clusters' ConfigMaps", func(context.Context) error {
		out, err := k.try("get", "cm", "-n", ns)
		if err != nil {
			return err
		}
		header, rows := table(t, out)
		if want := "NAME,CLUSTER,DATA,AGE"; strings.Join(header, ",") != want && len(rows) > 0 {
			return fmt.Errorf("columns %v, want %s", header, want)
		}
		var got []string
		for _, r := range rows {
			if r["NAME"] != "kube-root-ca.crt" {
				got = append(got, r["CLUSTER"]+"/"+r["NAME"]+"/"+r["DATA"])
			}
		}
		slices.Sort(got)
		if want := "c1/settings/2 c2/only-c2/0 c2/settings/2"; strings.Join(got, " ") != want {
			return fmt.Errorf("rows %v, want %s", got, want)
		}
		return nil
	})
	sandboxtest.Eventually(t, wait, "kubectl get jobs lists both clusters' Jobs", func(context.Context) error {
		out, err := k.try("get", "jobs", "-n", ns)
		if err != nil {
			return err
		}
		header, rows := table(t, out)
		if want := "NAME,CLUSTER,STATUS,COMPLETIONS,DURATION,AGE"; strings.Join(header, ",") != want {
			return fmt.Errorf("columns %v, want %s", header, want)
		}
		if got := strings.Join(rowNames(rows), " "); !sameSet(got, "c1//train c2//train c1//work c2//work") {
			return fmt.Errorf("rows %s", got)
		}
		for _, r := range rows {
			if r["NAME"] == "train" && (r["STATUS"] != "Suspended" || r["COMPLETIONS"] != "0/1") {
				return fmt.Errorf("job in %s: STATUS %q COMPLETIONS %q, want Suspended 0/1", r["CLUSTER"], r["STATUS"], r["COMPLETIONS"])
			}
		}
		return nil
	})

	// kubectl get pods -A through purser shows c1's pods as kubectl on c1
	// shows them (READY, STATUS, RESTARTS), and none of c2's, which does
	// not track Pods.
	onC1 := &kubectl{t: t, bin: k.bin, kubeconfig: shared.KubeconfigPath(), home: t.TempDir()}
	sandboxtest.Eventually(t, wait, "kubectl get pods -A through purser shows c1's pods as c1 does", func(context.Context) error {
		onMember, err := onC1.try("get", "pods", "-n", ns)
		if err != nil {
			return err
		}
		_, direct := table(t, onMember)
		out, err := k.try("get", "pods", "-A")
		if err != nil {
			return err
		}
		header, rows := table(t, out)
		if want := "NAMESPACE,NAME,CLUSTER,READY,STATUS,RESTARTS,AGE"; strings.Join(header, ",") != want {
			return fmt.Errorf("columns %v, want %s", header, want)
		}
		want := map[string]string{}
		for _, r := range direct {
			want[r["NAME"]] = "c1 " + r["READY"] + " " + r["STATUS"] + " " + r["RESTARTS"]
		}
		got := map[string]string{}
		for _, r := range rows {
			if r["NAMESPACE"] == ns {
				got[r["NAME"]] = r["CLUSTER"] + " " + r["READY"] + " " + r["STATUS"] + " " + r["RESTARTS"]
			}
		}
		if len(want) == 0 || !maps.Equal(got, want) {
			return fmt.Errorf("through purser %v, on c1 %v", got, want)
		}
		return nil
	})

	// c1's Events are served too; once its Cluster no longer asks for
	// them, their records leave the inventory (the agent's next snapshot
	// lists them empty) and the Pods stay.
	events := func() ([]map[string]string, error) {
		out, err := k.try("--context", "purser-c1", "get", "events", "-n", ns)
		if err != nil {
			return nil, err
		}
		_, rows := table(t, out)
		return rows, nil
	}
	sandboxtest.Eventually(t, wait, "kubectl get events through purser lists c1's Events about the Job", func(context.Context) error {
		rows, err := events()
		if err != nil {
			return err
		}
		for _, r := range rows {
			if strings.HasPrefix(r["NAME"], "work.") && r["CLUSTER"] == "c1" {
				return nil
			}
		}
		return fmt.Errorf("no Event of the Job work: %v", rows)
	})
	p.put("/api/v1/clusters/c1", map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster", "metadata": map[string]any{"name": "c1"},
		"spec": map[string]any{"inventory": map[string]any{"kinds": []string{"Pod"}}}})
	sandboxtest.Eventually(t, wait, "c1's Events gone from the inventory", func(context.Context) error {
		rows, err := events()
		if err != nil && !strings.Contains(err.Error(), `doesn't have a resource type "events"`) {
			return err
		}
		if len(rows) > 0 {
			return fmt.Errorf("%d Events still served", len(rows))
		}
		return nil
	})
	if out, err := k.try("get", "pods", "-n", ns); err != nil || !strings.Contains(out, "work-") {
		t.Errorf("kubectl get pods after c1 stopped tracking Events: %v\n%s", err, out)
	}

	// kubectl -w through purser sees a ConfigMap created on a member.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := startWatch(t, k.cmd(ctx, "get", "cm", "-n", ns, "-w"))
	w.next(t, "the listed only-c2", func(f []string) bool { return len(f) > 1 && f[0] == "only-c2" })
	var lat []time.Duration
	for i, c := range []string{"c1", "c2", "c1"} {
		name := fmt.Sprintf("watched-%d", i)
		t0 := time.Now()
		p.configMap(c, ns, name, map[string]string{"x": "1"})
		at := w.next(t, name+" created in "+c, func(f []string) bool { return len(f) >= 3 && f[0] == name && f[1] == c && f[2] == "1" })
		lat = append(lat, at.Sub(t0))
	}
	t.Logf("member change → event at kubectl get -w through purser: %v", lat)
	cancel()

	// c2's kube-apiserver stops: its agent says so in its beats, and
	// kubectl still reads both clusters' records, warned about c2's.
	stopped.StopAPIServer()
	sandboxtest.Eventually(t, wait, "kubectl get cm warns that c2's records may be stale", func(context.Context) error {
		out, errOut, failed := k.run("get", "cm", "-n", ns)
		if failed {
			return fmt.Errorf("kubectl failed: %s", errOut)
		}
		if !strings.Contains(errOut, "Warning: cluster c2: its records may be stale (the agent reports") ||
			!strings.Contains(errOut, "cannot reach its kube-apiserver") {
			return fmt.Errorf("no warning naming c2 as stale: %q", errOut)
		}
		if strings.Contains(errOut, "cluster c1") {
			return fmt.Errorf("the warnings name c1, whose kube-apiserver answers: %q", errOut)
		}
		_, rows := table(t, out)
		if got := strings.Join(rowNames(rows), " "); !strings.Contains(got, "c2//only-c2") || !strings.Contains(got, "c1//watched-0") || !strings.Contains(got, "c2//watched-1") {
			return fmt.Errorf("rows %s, want both clusters' records", got)
		}
		return nil
	})
	// One cluster's context: its records, and the warning.
	out, errOut, failed := k.run("--context", "purser-c2", "get", "jobs", "-n", ns)
	if failed || !strings.Contains(out, "train") || !strings.Contains(errOut, "Warning: cluster c2: its records may be stale") {
		t.Errorf("kubectl --context purser-c2 get jobs with c2's kube-apiserver stopped: failed=%v\n%s%s\nwant the Job and a warning naming c2", failed, out, errOut)
	}
}

// BenchmarkK8sWatchLatency measures what a user of `kubectl get -w` waits
// for: the time from a change on a member cluster (a ConfigMap created
// through its kube-apiserver, timed from the create call) to its line at
// kubectl, watching through purser's /k8s (agent, NATS, ingester,
// database, feed) and, in the same run, the same watch directly on the
// member's kube-apiserver. 50 changes 100 ms apart; both watches see each.
func BenchmarkK8sWatchLatency(b *testing.B) {
	c := env.Clusters(b)[0]
	p := startPipeline(b, []member{{"c1", c, nil}})
	ns := p.namespace("watch-bench")
	bins := env.Binaries(b)
	home := b.TempDir()
	through := &kubectl{bin: bins.Kubectl(), home: home, kubeconfig: filepath.Join(home, "purser")}
	data, err := client.WriteKubeconfig(client.Kubeconfig(client.KubeconfigOptions{Server: p.srv.URL, Name: "purser", Clusters: []string{"c1"},
		Token: p.token, CAData: p.caPEM()}))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(through.kubeconfig, data, 0o600); err != nil {
		b.Fatal(err)
	}
	direct := &kubectl{bin: bins.Kubectl(), home: home, kubeconfig: c.KubeconfigPath()}
	// The namespace's first object, listed by both before the changes.
	p.configMap("c1", ns, "seed", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// purser serves the kinds its inventory holds: the watch starts once
	// the agent has reported the seed.
	sandboxtest.Eventually(b, wait, "the seed listed through purser", func(ctx context.Context) error {
		out, err := through.cmd(ctx, "get", "cm", "seed", "-n", ns).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
	watches := map[string]*watchLines{
		"purser":         startWatch(b, through.cmd(ctx, "get", "cm", "-n", ns, "-w")),
		"kube-apiserver": startWatch(b, direct.cmd(ctx, "get", "cm", "-n", ns, "-w")),
	}
	for _, w := range watches {
		w.next(b, "the listed seed", func(f []string) bool { return len(f) > 1 && f[0] == "seed" })
	}
	const changes = 50
	for b.Loop() {
		lat := map[string][]time.Duration{}
		for i := range changes {
			name := fmt.Sprintf("change-%d-%d", b.N, i)
			t0 := time.Now()
			p.configMap("c1", ns, name, nil)
			for side, w := range watches {
				at := w.next(b, name, func(f []string) bool { return len(f) > 1 && f[0] == name })
				lat[side] = append(lat[side], at.Sub(t0))
			}
			time.Sleep(100 * time.Millisecond)
		}
		for side, l := range lat {
			slices.Sort(l)
			b.ReportMetric(l[len(l)/2].Seconds()*1000, side+"-ms-p50")
			b.ReportMetric(l[(len(l)*99-1)/100].Seconds()*1000, side+"-ms-p99")
		}
	}
}
