package submitter_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Two shared clusters, sandbox-1 and sandbox-2 (dc=dc-1, dc=dc-2), with
// Argo Workflows. Each test works in its own namespace and database, so
// tests never see each other's runnables.
var env = sandboxtest.New(sandboxtest.Config{Clusters: 2, Argo: true})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait on the sandbox. It is generous because it
// measures nothing: a loaded two-core machine must still pass.
const wait = 3 * time.Minute

var (
	jobs      = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	workflows = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
)

// fixture is one database and one NATS with some clusters registered, and
// the submitters a test starts on them.
type fixture struct {
	t       *testing.T
	store   *store.Store
	sealer  *seal.Sealer
	streams *stream.Client
	nats    *streamtest.Server
	natsURL string
	key     []byte // the sealer's key, for submitters in other processes
	ns      string
	dyn     map[string]dynamic.Interface // by registered name
}

func newFixture(t *testing.T, dsn string) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, key := sealtest.New(t)
	nats := streamtest.Start(t, "")
	f := &fixture{
		t: t, store: st, sealer: sealer, streams: streamtest.Declared(t, nats.URL), nats: nats, natsURL: nats.URL, key: key,
		ns: "t-" + randomHex(4), dyn: map[string]dynamic.Interface{},
	}
	t.Cleanup(f.cleanupNamespace)
	return f
}

func sqliteDSN(t *testing.T) string { return storetest.Engines()[0].NewDSN(t) }

// register writes a cluster row as the API would, kubeconfig sealed, under
// name (which may differ from the sandbox's own name).
func (f *fixture) register(name string, c *sandbox.Cluster, labels map[string]string) {
	f.t.Helper()
	kc, err := c.Kubeconfig("")
	if err != nil {
		f.t.Fatal(err)
	}
	clusterstest.Register(f.t, f.store, f.sealer, store.Cluster{Name: name, Labels: labels}, kc)
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		f.t.Fatal(err)
	}
	f.dyn[name] = dyn
}

// registerShared registers the shared clusters under their own names.
func (f *fixture) registerShared() []*sandbox.Cluster {
	cs := env.Clusters(f.t)
	for _, c := range cs {
		f.register(c.Name(), c, c.Labels())
	}
	return cs
}

func (f *fixture) cleanupNamespace() {
	for _, dyn := range f.dyn {
		_ = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).
			Delete(context.Background(), f.ns, metav1.DeleteOptions{})
	}
}

// start runs a submitter until the returned stop is called or the test
// ends; stop checks that Run returned, i.e. that it stopped its goroutines.
func (f *fixture) start(cfg submitter.Config) (stop func()) {
	f.t.Helper()
	cfg.Store, cfg.Sealer = f.store, f.sealer
	if cfg.Stream == nil {
		cfg.Stream = f.streams
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s := submitter.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				f.t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			f.t.Errorf("Run did not return within a minute of its context ending")
		}
	}
	f.t.Cleanup(stop)
	return stop
}

// runnableSpec is what a test submits.
type runnableSpec struct {
	template  map[string]any
	placement v1alpha1.Placement
	deadline  *time.Time
	author    *store.Author // as the API records it; nil: none recorded
	failover  *v1alpha1.Failover
}

// submit stores a Queued runnable and publishes its submission, as the
// API and its outbox relay do.
func (f *fixture) submit(name string, spec runnableSpec) string {
	f.t.Helper()
	doc, err := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: v1alpha1.RunnableSpec{
		Template: spec.template, Placement: spec.placement, Deadline: spec.deadline, Failover: spec.failover,
	}, Author: spec.author})
	if err != nil {
		f.t.Fatal(err)
	}
	rec := &store.Runnable{
		Namespace: f.ns, Name: name, UID: "uid-" + randomHex(8), Generation: 1, Spec: doc, SpecHash: randomHex(8),
		Phase: string(v1alpha1.PhaseQueued), Submitter: "alice", Status: []byte(`{"message":"waiting for a cluster"}`),
	}
	err = f.store.Tx(context.Background(), func(tx *store.Tx) error { return tx.Runnables().Create(context.Background(), rec) })
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(rec, stream.SubmissionSubmit, "")
	return rec.UID
}

// publish sends a submission message; a non-empty suffix makes a message
// the stream does not deduplicate, as a redelivery would be.
func (f *fixture) publish(rec *store.Runnable, event, suffix string) {
	f.t.Helper()
	msg := stream.Submission{UID: rec.UID, Namespace: rec.Namespace, Name: rec.Name, Event: event}
	data, _ := json.Marshal(msg)
	// Retried like the outbox relay does, for tests that restart NATS.
	sandboxtest.Eventually(f.t, streamtest.Timeout, "publish "+msg.ID()+suffix, func(ctx context.Context) error {
		return f.streams.Publish(ctx, stream.SubjectSubmissions, msg.ID()+suffix, data)
	})
}

// consumed waits until the submitters have settled every submission
// published so far: each is acknowledged after its reconcile committed, so
// what they would do about those messages is done.
func (f *fixture) consumed() {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, "every submission settled", func(ctx context.Context) error {
		return streamtest.Consumed(ctx, f.streams, stream.SubmissionsStream, stream.SubmitterConsumer)
	})
}

// cancel cancels a runnable as the API does.
func (f *fixture) cancel(name string) {
	f.t.Helper()
	var rec *store.Runnable
	err := f.store.Tx(context.Background(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Runnables().Get(context.Background(), f.ns, name); err != nil {
			return err
		}
		rec.Phase = string(v1alpha1.PhaseCancelled)
		return tx.Runnables().Update(context.Background(), rec)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(rec, stream.SubmissionCancel, "")
}

// get reads a runnable, its status message and its attempts.
func (f *fixture) get(name string) (*store.Runnable, string, []*store.Attempt) {
	f.t.Helper()
	var rec *store.Runnable
	var attempts []*store.Attempt
	err := f.store.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Runnables().Get(context.Background(), f.ns, name); err != nil {
			return err
		}
		attempts, err = tx.Attempts().List(context.Background(), rec.UID)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	var st v1alpha1.RunnableStatus
	// A row stored as the API would store it has no status until the
	// submitter writes one.
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &st); err != nil {
			f.t.Fatalf("status of %s: %v", rec.Name, err)
		}
	}
	return rec, st.Message, attempts
}

// waitPhase waits until the runnable is in phase and returns it.
func (f *fixture) waitPhase(name string, phase v1alpha1.Phase) (*store.Runnable, string, []*store.Attempt) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, fmt.Sprintf("runnable %s in phase %s", name, phase), func(context.Context) error {
		rec, msg, _ := f.get(name)
		if rec.Phase != string(phase) {
			return fmt.Errorf("phase %s (%s)", rec.Phase, msg)
		}
		return nil
	})
	return f.get(name)
}

// objects lists the objects of gvr in the test's namespace on a cluster
// that carry runnable uid's label.
func (f *fixture) objects(cluster string, gvr schema.GroupVersionResource, uid string) []unstructured.Unstructured {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := f.dyn[cluster].Resource(gvr).Namespace(f.ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha1.LabelRunnableUID + "=" + uid,
	})
	if apierrors.IsNotFound(err) {
		return nil // the cluster does not serve the kind
	}
	if err != nil {
		f.t.Fatalf("list %s on %s: %v", gvr.Resource, cluster, err)
	}
	return list.Items
}

// audit returns the audit entries of a runnable, oldest first.
func (f *fixture) audit(name string) []*audit.Entry {
	f.t.Helper()
	var out []*audit.Entry
	err := f.store.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		out, err = tx.Audit().List(context.Background(), store.AuditFilter{Namespace: f.ns, Name: name})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func actions(entries []*audit.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Actor+":"+e.Action)
	}
	return out
}

func job(containers bool) map[string]any {
	podSpec := map[string]any{"restartPolicy": "Never"}
	if containers {
		podSpec["containers"] = []any{map[string]any{"name": "main", "image": "busybox", "command": []any{"true"}}}
	} else {
		podSpec["containers"] = []any{}
	}
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"spec": map[string]any{"backoffLimit": 0, "template": map[string]any{"spec": podSpec}},
	}
}

func workflow() map[string]any {
	return map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"spec": map[string]any{
			"entrypoint": "main",
			"templates": []any{map[string]any{
				"name":      "main",
				"container": map[string]any{"image": "alpine", "command": []any{"echo", "hello"}},
			}},
		},
	}
}

func onCluster(names ...string) v1alpha1.Placement {
	return v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: names}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
