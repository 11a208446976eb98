package inventory_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 1, Argo: true})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait for the inventory to converge. It is generous:
// tests assert what converges, never how fast.
const wait = 2 * time.Minute

// hub is one test's stream and database with an ingester running on them.
type hub struct {
	nats   *streamtest.Server
	dsn    string
	store  *store.Store
	pub    *stream.Client
	sealer *seal.Sealer // the hub's key, which keys Secrets' fingerprints
}

// logger writes to the test's output, shown when it fails or with -v.
func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func newHub(t *testing.T, eng storetest.Engine) *hub {
	t.Helper()
	h := &hub{nats: streamtest.Start(t, ""), dsn: eng.NewDSN(t)}
	h.pub = streamtest.Declared(t, h.nats.URL)
	s, err := store.Open(streamtest.Context(t), h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h.store = s
	if h.sealer, err = seal.New([]byte(strings.Repeat("k", seal.KeySize))); err != nil {
		t.Fatal(err)
	}
	in, err := inventory.New(inventory.Config{Store: s, Stream: streamtest.Connect(t, h.nats.URL), Logger: logger(t),
		Fingerprint: h.sealer.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	run(t, in.Run)
	return h
}

// run runs fn until the returned stop is called or the test ends, and
// waits for it to return either way.
func run(t *testing.T, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("run: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// snapshotInterval is the agents' period between snapshots.
const snapshotInterval = 2 * time.Second

func startAgent(t *testing.T, h *hub, c *sandbox.Cluster) (stop func()) {
	t.Helper()
	a, err := agent.New(agent.Config{
		Cluster: c.Name(), RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, h.nats.URL),
		SnapshotInterval: snapshotInterval, HeartbeatInterval: time.Second, DiscoveryInterval: 2 * time.Second,
		Logger: logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return run(t, a.Run)
}

// record returns the record of kind namespace/name in cluster, or nil.
func (h *hub) record(ctx context.Context, cluster, kind, namespace, name string) (*store.InventoryRow, error) {
	var rows []store.InventoryRow
	err := h.store.Read(ctx, func(tx *store.Tx) (err error) {
		rows, _, err = tx.Inventory().List(ctx, store.InventoryFilter{Cluster: cluster, Kind: kind, Namespace: namespace, Name: name})
		return err
	})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}

func (h *hub) waitFor(t *testing.T, what, cluster, kind, namespace, name string, cond func(r *store.InventoryRow) error) {
	t.Helper()
	sandboxtest.Eventually(t, wait, what, func(ctx context.Context) error {
		r, err := h.record(ctx, cluster, kind, namespace, name)
		if err != nil {
			return err
		}
		return cond(r)
	})
}

func present(r *store.InventoryRow) error {
	if r == nil {
		return fmt.Errorf("no record")
	}
	return nil
}

func absent(r *store.InventoryRow) error {
	if r != nil {
		return fmt.Errorf("record still there at resourceVersion %s", r.ResourceVersion)
	}
	return nil
}

func clients(t *testing.T, c *sandbox.Cluster, namespace string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(t.Context(), namespace); err != nil {
		t.Fatal(err)
	}
	return kc, dyn
}

// namespace names a namespace per test and engine on the shared cluster.
func namespace(t *testing.T) string {
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return strings.Trim(n[max(0, len(n)-60):], "-")
}

// TestObjectsFollowTheCluster: ConfigMaps, Jobs, Workflows and Secrets
// created, changed and deleted appear, change and disappear, and no Secret
// data reaches the database.
func TestObjectsFollowTheCluster(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			c := env.Clusters(t)[0]
			h := newHub(t, eng)
			startAgent(t, h, c)
			ns := namespace(t)
			kc, dyn := clients(t, c, ns)
			ctx := t.Context()
			cms := kc.CoreV1().ConfigMaps(ns)

			// The kinds the cluster serves, with their scope, are recorded
			// for the API to authorize with.
			sandboxtest.Eventually(t, wait, "the cluster's kinds recorded", func(ctx context.Context) error {
				var kinds []store.ServedKind
				if err := h.store.Read(ctx, func(tx *store.Tx) (err error) { kinds, err = tx.Kinds().List(ctx, c.Name()); return }); err != nil {
					return err
				}
				want := map[string]bool{"/Namespace": false, "batch/Job": true, "argoproj.io/Workflow": true, "rbac.authorization.k8s.io/ClusterRole": false}
				for _, k := range kinds {
					if namespaced, ok := want[k.Group+"/"+k.Kind]; ok && namespaced == k.Namespaced {
						delete(want, k.Group+"/"+k.Kind)
					}
				}
				if len(want) > 0 {
					return fmt.Errorf("%d kinds recorded; missing or with the wrong scope: %v", len(kinds), want)
				}
				return nil
			})

			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app",
				Labels:      map[string]string{"team": "a"},
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
				Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "ConfigMap appears", c.Name(), "ConfigMap", ns, "app", present)
			r, _ := h.record(ctx, c.Name(), "ConfigMap", ns, "app")
			if r.UID != string(cm.UID) || r.Labels["team"] != "a" || r.APIVersion != "v1" {
				t.Errorf("record %+v", r)
			}
			if strings.Contains(string(r.Object), "managedFields") || strings.Contains(string(r.Object), "last-applied") {
				t.Errorf("object not trimmed: %s", r.Object)
			}

			cm.Data["k"] = "v2"
			if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "ConfigMap changes", c.Name(), "ConfigMap", ns, "app", func(r *store.InventoryRow) error {
				if r == nil || r.ResourceVersion != cm.ResourceVersion || !strings.Contains(string(r.Object), `"v2"`) {
					return fmt.Errorf("record %v, want resourceVersion %s", r, cm.ResourceVersion)
				}
				return nil
			})

			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "report"}, Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
			if _, err := kc.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "Job appears", c.Name(), "Job", ns, "report", present)

			wf := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
				"metadata": map[string]any{"name": "wf"},
				"spec": map[string]any{"entrypoint": "main", "templates": []any{map[string]any{
					"name": "main", "container": map[string]any{"image": "busybox", "command": []any{"true"}}}}},
			}}
			wfs := dyn.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(ns)
			if _, err := wfs.Create(ctx, wf, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "Workflow appears", c.Name(), "Workflow", ns, "wf", present)

			const secretValue = "purser-secret-value-7f3a9c"
			if _, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds",
					Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"p":"` + secretValue + `"}}`}},
				StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "Secret appears", c.Name(), "Secret", ns, "creds", present)
			r, _ = h.record(ctx, c.Name(), "Secret", ns, "creds")
			var obj map[string]any
			if err := json.Unmarshal(r.Object, &obj); err != nil || obj[stream.DataHashField] != nil || obj["data"] != nil {
				t.Errorf("Secret record: %s", r.Object)
			}
			// Of the data, only a hash keyed with the hub's key: not the
			// bare SHA-256 that anyone could test a guess against.
			guess, _ := json.Marshal(map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(secretValue))})
			bare := sha256.Sum256(guess)
			if want := h.sealer.Fingerprint([]byte("inventory secret data " + hex.EncodeToString(bare[:]))); obj[inventory.KeyedDataField] != want {
				t.Errorf("Secret record's %s is %v, want the keyed digest %s", inventory.KeyedDataField, obj[inventory.KeyedDataField], want)
			}
			assertNoValue(t, h.dsn, secretValue)
			assertNoValue(t, h.dsn, hex.EncodeToString(bare[:]))

			if err := cms.Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "ConfigMap disappears", c.Name(), "ConfigMap", ns, "app", absent)
			bg := metav1.DeletePropagationBackground
			if err := kc.BatchV1().Jobs(ns).Delete(ctx, "report", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "Job disappears", c.Name(), "Job", ns, "report", absent)
			if err := wfs.Delete(ctx, "wf", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "Workflow disappears", c.Name(), "Workflow", ns, "wf", absent)
		})
	}
}

// assertNoValue searches every text column of every table for value, in
// clear and in base64, behind the store's back.
func assertNoValue(t *testing.T, dsn, value string) {
	t.Helper()
	db := storetest.RawDB(t, dsn)
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	for _, q := range []string{
		`SELECT COUNT(*) FROM inventory WHERE object LIKE ? OR object LIKE ? OR labels LIKE ?`,
		`SELECT COUNT(*) FROM audit_log WHERE details LIKE ? OR details LIKE ? OR summary LIKE ?`,
	} {
		var n int
		pat, encPat := "%"+value+"%", "%"+encoded+"%"
		if err := db.QueryRowContext(t.Context(), storetest.Rebind(dsn, q), pat, encPat, pat).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("the database holds Secret data: %s", q)
		}
	}
}

// TestZombiesRemovedAfterAgentRestart: objects deleted while no agent
// watched are removed by the first snapshot of the next agent.
func TestZombiesRemovedAfterAgentRestart(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			c := env.Clusters(t)[0]
			h := newHub(t, eng)
			ns := namespace(t)
			kc, _ := clients(t, c, ns)
			ctx := t.Context()
			cms := kc.CoreV1().ConfigMaps(ns)
			names := []string{"keep", "gone-1", "gone-2"}
			for _, n := range names {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			stop := startAgent(t, h, c)
			for _, n := range names {
				h.waitFor(t, n+" appears", c.Name(), "ConfigMap", ns, n, present)
			}
			stop()
			for _, n := range names[1:] {
				if err := cms.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			startAgent(t, h, c)
			for _, n := range names[1:] {
				h.waitFor(t, n+" removed as a zombie", c.Name(), "ConfigMap", ns, n, absent)
			}
			if r, err := h.record(ctx, c.Name(), "ConfigMap", ns, "keep"); err != nil || r == nil {
				t.Errorf("live object removed: %v", err)
			}
		})
	}
}

// TestAPIServerStoppedKeepsRecords: a cluster whose kube-apiserver is down
// keeps its records: its agent sends no snapshot of a cache that cannot
// refresh, and whatever it sent is applied without removing any.
func TestAPIServerStoppedKeepsRecords(t *testing.T) {
	c := env.Dedicated(t, false)
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHub(t, eng)
			startAgent(t, h, c)
			ns := namespace(t)
			kc, _ := clients(t, c, ns)
			if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitFor(t, "ConfigMap appears", c.Name(), "ConfigMap", ns, "held", present)
			c.StopAPIServer()
			// Two snapshot periods pass in which the agent knew the
			// kube-apiserver was down (its heartbeats say so), and every
			// snapshot it sent meanwhile is applied.
			h.heartbeatSays(t, c.Name(), time.Now().Add(2*snapshotInterval), false)
			h.drained(t, stream.SnapshotsStream)
			if r, err := h.record(t.Context(), c.Name(), "ConfigMap", ns, "held"); err != nil || r == nil {
				t.Fatalf("record lost while the API server was down: %v", err)
			}
			if err := c.StartAPIServer(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.snapshotApplied(t, c.Name(), time.Now())
			if r, err := h.record(t.Context(), c.Name(), "ConfigMap", ns, "held"); err != nil || r == nil {
				t.Fatalf("record lost after the API server came back: %v", err)
			}
		})
	}
}

// publishEvent puts a crafted event on the real stream, as an agent would;
// msgID lets a test replay an event under a new id, which is what a
// redelivered or republished batch looks like to the ingester.
func (h *hub) publishEvent(t *testing.T, msgID string, ev stream.Event) {
	t.Helper()
	ev.APIVersion, ev.Kind = "v1", "ConfigMap"
	if ev.Namespace == "" {
		ev.Namespace = "crafted"
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Object, _ = json.Marshal(map[string]any{"metadata": map[string]any{"name": ev.Name, "resourceVersion": ev.ResourceVersion}})
	data, _ := json.Marshal(ev)
	if err := h.pub.Publish(streamtest.Context(t), stream.EventsSubject(ev.Cluster), msgID, data); err != nil {
		t.Fatal(err)
	}
}

func (h *hub) publishChunk(t *testing.T, c stream.SnapshotChunk) {
	t.Helper()
	data, _ := json.Marshal(c)
	if err := h.pub.Publish(streamtest.Context(t), stream.SnapshotsSubject(c.Cluster), c.MsgID(), data); err != nil {
		t.Fatal(err)
	}
}

func atVersion(rv string) func(r *store.InventoryRow) error {
	return func(r *store.InventoryRow) error {
		if r == nil || r.ResourceVersion != rv {
			return fmt.Errorf("record %v, want resourceVersion %s", r, rv)
		}
		return nil
	}
}

// TestReplayedAndReorderedEvents: old events delivered after new ones, a
// batch delivered twice, and a late ADDED after a DELETED leave the newest
// state.
func TestReplayedAndReorderedEvents(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHub(t, eng)
			const cl = "crafted-1"
			ev := func(name, uid, rv, typ string) stream.Event {
				return stream.Event{Cluster: cl, Name: name, UID: uid, ResourceVersion: rv, Type: typ}
			}
			// Newest first, then the older history of the same object, then
			// the whole batch again under new ids.
			batch := []stream.Event{
				ev("a", "uid-a", "12", stream.EventModified),
				ev("a", "uid-a", "9", stream.EventAdded),
				ev("a", "uid-a", "10", stream.EventModified),
				ev("b", "uid-b", "20", stream.EventAdded),
				ev("b", "uid-b", "25", stream.EventDeleted),
				ev("b", "uid-b", "21", stream.EventModified),
			}
			for round := range 2 {
				for i, e := range batch {
					h.publishEvent(t, fmt.Sprintf("r%d-%d", round, i), e)
				}
			}
			// A sentinel published last: once it is in, everything before
			// it on the subject has been applied.
			h.publishEvent(t, "sentinel", ev("z", "uid-z", "1", stream.EventAdded))
			h.waitFor(t, "sentinel applied", cl, "ConfigMap", "crafted", "z", present)
			h.waitFor(t, "a at its newest version", cl, "ConfigMap", "crafted", "a", atVersion("12"))
			h.waitFor(t, "b stays deleted", cl, "ConfigMap", "crafted", "b", absent)

			// One at a time across batches: an older MODIFIED after the
			// newer one, and a late ADDED of the deleted object.
			h.publishEvent(t, "late-a", ev("a", "uid-a", "11", stream.EventModified))
			h.publishEvent(t, "late-b", ev("b", "uid-b", "20", stream.EventAdded))
			h.publishEvent(t, "sentinel-2", ev("z", "uid-z", "2", stream.EventModified))
			h.waitFor(t, "second sentinel applied", cl, "ConfigMap", "crafted", "z", atVersion("2"))
			h.waitFor(t, "a still at its newest version", cl, "ConfigMap", "crafted", "a", atVersion("12"))
			h.waitFor(t, "b not resurrected", cl, "ConfigMap", "crafted", "b", absent)
		})
	}
}

// TestSnapshotRaceAndChunks: a record newer than a snapshot's list (an
// object created after the list was taken) survives it, a zombie does not,
// and a snapshot is applied only once all its chunks are in.
func TestSnapshotRaceAndChunks(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHub(t, eng)
			const cl = "crafted-2"
			for _, e := range []stream.Event{
				{Name: "live", UID: "uid-live", ResourceVersion: "40"},
				{Name: "zombie", UID: "uid-zombie", ResourceVersion: "50"},
				{Name: "racer", UID: "uid-racer", ResourceVersion: "101"},
			} {
				e.Cluster, e.Type = cl, stream.EventAdded
				h.publishEvent(t, e.UID, e)
			}
			for _, n := range []string{"live", "zombie", "racer"} {
				h.waitFor(t, n+" appears", cl, "ConfigMap", "crafted", n, present)
			}

			// A snapshot at list version 100 that knows only "live", in
			// three chunks; the middle one is held back.
			items := [][2]string{{"uid-live", "40"}}
			for i := range 60000 {
				items = append(items, [2]string{fmt.Sprintf("uid-filler-%05d-%s", i, strings.Repeat("x", 20)), "30"})
			}
			chunks := stream.ChunkSnapshot(cl, "snap-1", time.Now(), []stream.KindList{
				{APIVersion: "v1", Kind: "ConfigMap", ListResourceVersion: "100", Items: items}})
			if len(chunks) < 3 {
				t.Fatalf("%d chunks, want at least 3 for this test", len(chunks))
			}
			for i, c := range chunks {
				if i != 1 {
					h.publishChunk(t, c)
				}
			}
			// Incomplete: nothing may be removed. Batches are applied in
			// order, so once a complete snapshot of another cluster
			// published after these chunks is applied, they were seen.
			marker := stream.ChunkSnapshot(cl+"-marker", "snap-marker", time.Now(), []stream.KindList{
				{APIVersion: "v1", Kind: "ConfigMap", ListResourceVersion: "1"}})
			h.publishChunk(t, marker[0])
			h.snapshotApplied(t, cl+"-marker", time.Time{})
			if r, _ := h.record(t.Context(), cl, "ConfigMap", "crafted", "zombie"); r == nil {
				t.Fatal("an incomplete snapshot removed a record")
			}
			h.publishChunk(t, chunks[1])
			h.waitFor(t, "zombie removed", cl, "ConfigMap", "crafted", "zombie", absent)
			for _, n := range []string{"live", "racer"} {
				if r, err := h.record(t.Context(), cl, "ConfigMap", "crafted", n); err != nil || r == nil {
					t.Errorf("%s removed by the snapshot: %v", n, err)
				}
			}
		})
	}
}

// TestTwoIngesters: two ingesters share the consumer and the database;
// the history of 100 objects, published in a scrambled order, ends at each
// object's newest state.
func TestTwoIngesters(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHub(t, eng)
			second, err := inventory.New(inventory.Config{Store: h.store, Stream: streamtest.Connect(t, h.nats.URL),
				Logger: logger(t), Batch: 7})
			if err != nil {
				t.Fatal(err)
			}
			run(t, second.Run)
			const cl, objects, versions = "crafted-3", 100, 10
			var evs []stream.Event
			for o := range objects {
				for v := 1; v <= versions; v++ {
					typ := stream.EventModified
					switch {
					case v == 1:
						typ = stream.EventAdded
					case v == versions && o%4 == 0:
						typ = stream.EventDeleted // every fourth object ends deleted
					}
					evs = append(evs, stream.Event{Cluster: cl, Name: fmt.Sprintf("o-%03d", o),
						UID: fmt.Sprintf("uid-%03d", o), ResourceVersion: fmt.Sprint(1000*o + v), Type: typ})
				}
			}
			// A fixed scramble: reversed in blocks, then interleaved.
			for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
				if (i/13)%2 == 0 {
					evs[i], evs[j] = evs[j], evs[i]
				}
			}
			for i, ev := range evs {
				h.publishEvent(t, fmt.Sprintf("e-%d", i), ev)
			}
			h.drained(t, stream.EventsStream)
			for o := range objects {
				name := fmt.Sprintf("o-%03d", o)
				if o%4 == 0 {
					h.waitFor(t, name+" deleted", cl, "ConfigMap", "crafted", name, absent)
					continue
				}
				h.waitFor(t, name+" at its newest version", cl, "ConfigMap", "crafted", name, atVersion(fmt.Sprint(1000*o+versions)))
			}
		})
	}
}

// drained waits until the ingesters have acknowledged every message of
// streamName: from then on the database holds all they will ever apply.
func (h *hub) drained(t *testing.T, streamName string) {
	t.Helper()
	sandboxtest.Eventually(t, wait, streamName+" consumed", func(ctx context.Context) error {
		return streamtest.Consumed(ctx, h.pub, streamName, stream.IngesterConsumer)
	})
}

// heartbeatSays waits until the ingester has applied a heartbeat of
// cluster sent after since whose report of the kube-apiserver is
// connected or not.
func (h *hub) heartbeatSays(t *testing.T, cluster string, since time.Time, connected bool) {
	t.Helper()
	sandboxtest.Eventually(t, wait, fmt.Sprintf("a heartbeat of %s saying connected=%v", cluster, connected), func(ctx context.Context) error {
		var fresh map[string]store.AgentFreshness
		err := h.store.Read(ctx, func(tx *store.Tx) (err error) {
			fresh, err = tx.Agents().ListFreshness(ctx)
			return err
		})
		if err != nil {
			return err
		}
		f := fresh[cluster]
		var api v1alpha1.AgentKubeAPI
		if len(f.KubeAPI) > 0 {
			if err := json.Unmarshal(f.KubeAPI, &api); err != nil {
				return err
			}
		}
		if f.LastHeartbeat == nil || !f.LastHeartbeat.After(since) || api.Connected != connected {
			return fmt.Errorf("last heartbeat %v, kube API %s", f.LastHeartbeat, f.KubeAPI)
		}
		return nil
	})
}

// snapshotApplied waits until the ingester has applied a snapshot of
// cluster taken after since, and returns when that snapshot was taken.
func (h *hub) snapshotApplied(t *testing.T, cluster string, since time.Time) time.Time {
	t.Helper()
	var taken time.Time
	sandboxtest.Eventually(t, wait, "a snapshot of "+cluster+" applied", func(ctx context.Context) error {
		var fresh map[string]store.AgentFreshness
		err := h.store.Read(ctx, func(tx *store.Tx) (err error) {
			fresh, err = tx.Agents().ListFreshness(ctx)
			return err
		})
		if err != nil {
			return err
		}
		last := fresh[cluster].LastSnapshot
		if last == nil || !last.After(since) {
			return fmt.Errorf("last snapshot applied %v, want one taken after %s", last, since.Format(time.RFC3339Nano))
		}
		taken = *last
		return nil
	})
	return taken
}

// An agent whose clock is an hour behind does not make its cluster look
// an hour silent: the heartbeat counts from when the NATS server stored
// it, which is what the controller's fencing margin relies on.
func TestHeartbeatTimedByTheServer(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHub(t, eng)
			ctx := t.Context()
			kv, err := h.pub.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
			if err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			beat, err := json.Marshal(stream.Heartbeat{Cluster: "skewed", Time: sent.Add(-time.Hour), LeaseSeconds: 30})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "skewed", beat); err != nil {
				t.Fatal(err)
			}
			sandboxtest.Eventually(t, wait, "the heartbeat recorded", func(ctx context.Context) error {
				var fresh map[string]store.AgentFreshness
				if err := h.store.Read(ctx, func(tx *store.Tx) (err error) {
					fresh, err = tx.Agents().ListFreshness(ctx)
					return err
				}); err != nil {
					return err
				}
				f, ok := fresh["skewed"]
				if !ok || f.LastHeartbeat == nil {
					return fmt.Errorf("no heartbeat yet")
				}
				// The store keeps whole microseconds; allow for that and
				// for the server's clock being this machine's.
				if d := f.LastHeartbeat.Sub(sent); d < -time.Second || d > time.Minute {
					t.Fatalf("last heartbeat %v, %v from when it was sent: the agent's clock was used", f.LastHeartbeat, d)
				}
				return nil
			})
		})
	}
}
