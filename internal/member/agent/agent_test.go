package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) {
	// BenchmarkAgentDesignSize measures in processes of their own, this
	// binary run again with the variable set.
	if spec := os.Getenv(designSizeEnv); spec != "" {
		os.Exit(designSizeMain(spec))
	}
	os.Exit(env.Run(m))
}

func secret(data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": "s", "managedFields": []any{map[string]any{"manager": "kubectl"}},
			"annotations": map[string]any{lastApplied: `{"data":{"p":"c2VjcmV0"}}`, "keep": "me"},
		},
		"data": data, "stringData": map[string]any{"p": "secret"},
	}}
}

func TestTrim(t *testing.T) {
	a, err := Trim(secret(map[string]any{"p": "c2VjcmV0"}))
	if err != nil {
		t.Fatal(err)
	}
	u := a.(*unstructured.Unstructured)
	b, _ := json.Marshal(u.Object)
	for _, leak := range []string{"c2VjcmV0", "secret", "managedFields", lastApplied} {
		if strings.Contains(string(b), leak) {
			t.Errorf("trimmed Secret holds %q: %s", leak, b)
		}
	}
	if u.GetAnnotations()["keep"] != "me" {
		t.Errorf("other annotations lost: %s", b)
	}
	hash := u.Object[stream.DataHashField]
	// Idempotent: trimming again keeps the hash of the original data.
	again, _ := Trim(u)
	if again.(*unstructured.Unstructured).Object[stream.DataHashField] != hash {
		t.Errorf("second trim changed the hash")
	}
	other, _ := Trim(secret(map[string]any{"p": "b3RoZXI="}))
	if other.(*unstructured.Unstructured).Object[stream.DataHashField] == hash {
		t.Errorf("different data, same hash")
	}
	// Tombstones carry their object through the transform.
	tomb, _ := Trim(cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: secret(map[string]any{"p": "c2VjcmV0"})})
	if d := tomb.(cache.DeletedFinalStateUnknown).Obj.(*unstructured.Unstructured).Object["data"]; d != nil {
		t.Errorf("tombstone's Secret kept its data")
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "v"}}}
	if out, _ := Trim(cm); out.(*unstructured.Unstructured).Object["data"] == nil {
		t.Errorf("a ConfigMap lost its data")
	}
	node := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n"},
		"status": map[string]any{
			"allocatable": map[string]any{"cpu": "4", "memory": "8Gi"},
			"images":      []any{map[string]any{"names": []any{"registry/image:1"}, "sizeBytes": int64(1 << 30)}},
		}}}
	out, _ := Trim(node)
	status := out.(*unstructured.Unstructured).Object["status"].(map[string]any)
	if _, ok := status["images"]; ok {
		t.Errorf("a Node kept its images: %v", status)
	}
	if status["allocatable"] == nil {
		t.Errorf("a Node lost its allocatable resources: %v", status)
	}
}

// TestTrimInterns: two objects decoded apart share one copy of their keys
// and of their namespace once trimmed, and keep their own values.
func TestTrimInterns(t *testing.T) {
	decode := func(name string) *unstructured.Unstructured {
		var u unstructured.Unstructured
		data := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name +
			`","namespace":"team-a","labels":{"app":"web"},"annotations":{"` + lastApplied + `":"{}"}},"data":{"k":"v"}}`
		if err := u.UnmarshalJSON([]byte(data)); err != nil {
			t.Fatal(err)
		}
		out, err := Trim(&u)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*unstructured.Unstructured)
	}
	a, b := decode("a"), decode("b")
	key := func(m map[string]any, k string) *byte {
		for kk := range m {
			if kk == k {
				return unsafe.StringData(kk)
			}
		}
		t.Fatalf("no key %q in %v", k, m)
		return nil
	}
	mdA, mdB := a.Object["metadata"].(map[string]any), b.Object["metadata"].(map[string]any)
	if key(mdA, "namespace") != key(mdB, "namespace") {
		t.Errorf("the key namespace is not shared")
	}
	if unsafe.StringData(a.GetNamespace()) != unsafe.StringData(b.GetNamespace()) {
		t.Errorf("the namespace's value is not shared")
	}
	if a.GetName() != "a" || b.GetName() != "b" || a.GetLabels()["app"] != "web" {
		t.Errorf("values changed: %v %v", a.Object, b.Object)
	}
	if _, ok := mdA["annotations"]; ok {
		t.Errorf("an annotations map left empty is kept: %v", mdA)
	}
}

// testLogger shows the agents' logs with -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// start runs a new agent until the returned stop is called or the test
// ends, and waits for Run to return either way.
func start(t testing.TB, cfg Config) (a *Agent, stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent %s: %v", cfg.Cluster, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return a, stop
}

// heartbeatOf reads the heartbeat of cluster from the bucket.
func heartbeatOf(ctx context.Context, c *stream.Client, cluster string) (*stream.Heartbeat, error) {
	kv, err := c.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var hb stream.Heartbeat
	if err := json.Unmarshal(e.Value(), &hb); err != nil {
		return nil, err
	}
	return &hb, nil
}

// consume collects what the agent publishes on the events and snapshots
// subjects of cluster, with an ephemeral consumer of its own.
type consumed struct {
	mu        sync.Mutex
	events    []stream.Event
	snapshots []stream.SnapshotChunk
}

func consume(t *testing.T, c *stream.Client, cluster string) *consumed {
	t.Helper()
	out := &consumed{}
	ctx := streamtest.Context(t)
	for _, s := range []struct{ stream, subject string }{
		{stream.EventsStream, stream.EventsSubject(cluster)},
		{stream.SnapshotsStream, stream.SnapshotsSubject(cluster)},
	} {
		cons, err := c.JetStream().CreateConsumer(ctx, s.stream, jetstream.ConsumerConfig{FilterSubject: s.subject})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			out.mu.Lock()
			defer out.mu.Unlock()
			if s.stream == stream.EventsStream {
				var ev stream.Event
				_ = json.Unmarshal(m.Data(), &ev)
				out.events = append(out.events, ev)
			} else {
				var ch stream.SnapshotChunk
				_ = json.Unmarshal(m.Data(), &ch)
				out.snapshots = append(out.snapshots, ch)
			}
			_ = m.Ack()
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cc.Stop)
	}
	return out
}

func (c *consumed) find(pred func(stream.Event) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.events {
		if pred(ev) {
			return true
		}
	}
	return false
}

// TestAgentOnARealCluster: a start with more objects than the queue holds
// publishes each once; events that overflow the queue while the stream is
// down end in a full resync that publishes every object; a CRD installed
// after the start is watched; heartbeats and snapshots arrive.
func TestAgentOnARealCluster(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "agent-test"
	got := consume(t, sc, cluster)
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ns := "agent-test"
	ctx := t.Context()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The ConfigMap kube-controller-manager puts in every namespace comes
	// first: arriving while the initial list fills the queue, it would
	// overflow it.
	sandboxtest.Eventually(t, time.Minute, "kube-root-ca.crt in "+ns, func(ctx context.Context) error {
		_, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	create := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("cm-%03d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	published := func(what string, got *consumed, n int) {
		sandboxtest.Eventually(t, 2*time.Minute, what, func(context.Context) error {
			for i := range n {
				name := fmt.Sprintf("cm-%03d", i)
				if !got.find(func(ev stream.Event) bool { return ev.Namespace == ns && ev.Name == name }) {
					return fmt.Errorf("no event for %s", name)
				}
			}
			return nil
		})
	}
	const initial, later = 100, 150
	create(0, initial)
	widget := schema.GroupVersionKind{Group: "example.purser.io", Version: "v1", Kind: "Widget"}
	a, err := New(Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, srv.URL),
		Kinds:            []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, widget},
		SnapshotInterval: time.Second, HeartbeatInterval: 500 * time.Millisecond, DiscoveryInterval: time.Second,
		QueueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	published("every ConfigMap of the initial list published", got, initial)
	if n := a.resyncs.Load(); n != 0 {
		t.Errorf("the initial list overflowed the queue: %d resyncs", n)
	}

	srv.Stop()
	create(initial, later)
	sandboxtest.Eventually(t, time.Minute, "the queue overflows while the stream is down", func(context.Context) error {
		// The resync loop takes the overflow within a second, and its
		// resync waits for the stream: only the count stays.
		if a.overflows.Load() == 0 {
			return fmt.Errorf("no overflow yet")
		}
		return nil
	})
	srv.Restart()
	sandboxtest.Eventually(t, time.Minute, "test client reconnected", func(ctx context.Context) error { return sc.Ready(ctx) })
	// A fresh consumer reads the stream from its start, whatever the
	// first one saw before the restart.
	got = consume(t, sc, cluster)
	published("every ConfigMap published after the resync", got, later)
	if a.resyncs.Load() == 0 {
		t.Errorf("no resync after the overflow")
	}

	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.InstallCRD(t, dyn, "example.purser.io", "v1", "Widget", "widgets")
	widgets := dyn.Resource(widget.GroupVersion().WithResource("widgets")).Namespace(ns)
	sandboxtest.Eventually(t, 2*time.Minute, "a Widget created once its CRD is served", func(ctx context.Context) error {
		_, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.purser.io/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		return nil
	})
	sandboxtest.Eventually(t, 2*time.Minute, "the Widget published", func(context.Context) error {
		if !got.find(func(ev stream.Event) bool {
			return ev.Kind == "Widget" && ev.Name == "w" && ev.Type == stream.EventAdded
		}) {
			return fmt.Errorf("no event for the Widget")
		}
		return nil
	})

	kv, err := sc.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, time.Minute, "a heartbeat counting the objects", func(ctx context.Context) error {
		e, err := kv.Get(ctx, cluster)
		if err != nil {
			return err
		}
		var hb stream.Heartbeat
		if err := json.Unmarshal(e.Value(), &hb); err != nil {
			return err
		}
		if hb.Objects["v1/ConfigMap"] < later || hb.LastSnapshot.IsZero() || hb.Resyncs == 0 {
			return fmt.Errorf("heartbeat %+v", hb)
		}
		return nil
	})
	sandboxtest.Eventually(t, time.Minute, "a snapshot listing the ConfigMaps with a list version", func(context.Context) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		for _, s := range got.snapshots {
			for _, l := range s.Kinds {
				if l.Kind == "ConfigMap" && len(l.Items) >= later && l.ListResourceVersion != "" {
					return nil
				}
			}
		}
		return fmt.Errorf("%d chunks, none complete for ConfigMaps", len(got.snapshots))
	})
}

// TestTrimCRD: a CRD keeps its names, scope and columns, not its schemas.
func TestTrimCRD(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "workflows.argoproj.io"},
		"spec": map[string]any{"group": "argoproj.io", "names": map[string]any{"kind": "Workflow", "plural": "workflows"},
			"conversion": map[string]any{"strategy": "None"},
			"versions": []any{map[string]any{"name": "v1alpha1", "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}},
				"additionalPrinterColumns": []any{map[string]any{"name": "Status", "jsonPath": ".status.phase", "type": "string"}}}}},
	}}
	out, err := Trim(u)
	if err != nil {
		t.Fatal(err)
	}
	spec := out.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	v := spec["versions"].([]any)[0].(map[string]any)
	if _, ok := v["schema"]; ok {
		t.Errorf("the trimmed CRD keeps its schema")
	}
	if _, ok := spec["conversion"]; ok {
		t.Errorf("the trimmed CRD keeps its conversion")
	}
	if cols := v["additionalPrinterColumns"].([]any); len(cols) != 1 || spec["names"].(map[string]any)["plural"] != "workflows" {
		t.Errorf("the trimmed CRD lost its names or columns: %v", spec)
	}
}
