package failover_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/cli/client"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Two shared clusters for the tests that leave them running; tests that
// stop a kube-apiserver or cut an agent off take dedicated ones.
var env = sandboxtest.New(sandboxtest.Config{Clusters: 2})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait on the sandbox. It is generous because it
// measures nothing: a loaded two-core machine must still pass.
const wait = 3 * time.Minute

// Periods of the farm, short so that failovers happen in seconds.
const (
	heartbeat  = 300 * time.Millisecond
	agentLease = 6 * time.Second // a stalled heartbeat path (NATS, ingester, SQLite) must not make a cluster NotReady
	margin     = time.Second
	toleration = 3 // seconds
	// probeInterval is the health monitor's; it judges a cluster after
	// 3 failed or 2 successful probes in a row.
	probeInterval = 200 * time.Millisecond
)

var (
	flinkGVR = flinksim.Resource
	jobsGVR  = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// farm is a whole purser on one database and one NATS: the API (with its
// outbox relay), a submitter, an ingester, an agent per cluster, the
// cluster health monitor and the failover controller, plus a Flink
// simulator in each cluster.
type farm struct {
	t      testing.TB
	store  *store.Store
	sealer *seal.Sealer
	nats   *streamtest.Server
	api    *client.Client
	ns     string
	dyn    map[string]dynamic.Interface
	sims   map[string]*flinksim.Simulator
	log    *slog.Logger
	// s3 is the farm's S3-compatible storage of Flink checkpoints (a
	// gofakes3 server over real HTTP): the simulators write each
	// completed checkpoint's _metadata there, as Flink does, and the
	// failover controller resolves restore points from it.
	s3          *minio.Client
	checkpoints *checkpoints.Resolver

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// metrics holds the failover controller's, whose passes counter, with
	// probes (what the health monitor observed), is the progress a test
	// waits for before asserting that nothing happened.
	metrics *prometheus.Registry
	probes  probeLog
}

// cluster is a sandbox cluster as the farm registers it. natsURL and
// apiServer, when set, put something between it and the hub (a proxy
// that a test cuts): natsURL is how its agent reaches NATS, apiServer how
// the control plane (health monitor, submitter, failover controller)
// reaches its kube-apiserver. The agent, the Flink simulator and the
// test's own clients always reach the kube-apiserver directly.
type cluster struct {
	name      string
	sandbox   *sandbox.Cluster
	natsURL   string // "" : the farm's NATS
	apiServer string // "" : the cluster's own endpoint
	// noOperator: the cluster serves FlinkDeployments (the CRD is
	// installed) but no Flink operator runs there, as after the
	// operator's loss.
	noOperator bool
}

// periods are the farm's timings of the failover path. The tests use
// short ones; the application failover benchmark uses the components'
// defaults (the zero value), as a deployment runs them.
type periods struct {
	failoverPass, relayPoll time.Duration
	// probe, threshold and grace are the health monitor's probe interval,
	// failed probes in a row before not Ready, and NoExecute grace.
	probe     time.Duration
	threshold int
	grace     time.Duration
	// stateSnapshots runs the simulators as operators 1.10+ with the
	// FlinkStateSnapshot CRD installed.
	stateSnapshots bool
	// reconcile is the simulated operator's reconcile interval (default
	// its 60 s): a running deployment shows a new checkpoint, and takes a
	// periodic savepoint, only at its passes.
	reconcile time.Duration
	// evictionRate is the failover controller's (--eviction-rate; 0: its
	// default), clientLimits those of the submitter's and the
	// controller's clients of each member cluster (zero: purser's).
	evictionRate float64
	clientLimits clusters.Limits
}

// testPeriods keep the tests short.
var testPeriods = periods{failoverPass: 200 * time.Millisecond, relayPoll: 100 * time.Millisecond,
	probe: probeInterval, threshold: 3, grace: 2 * time.Second, reconcile: 200 * time.Millisecond}

func newFarm(t testing.TB, dsn string, members []cluster) *farm {
	t.Helper()
	return newFarmWith(t, dsn, members, testPeriods)
}

func newFarmWith(t testing.TB, dsn string, members []cluster, p periods) *farm {
	t.Helper()
	ctx := context.Background()
	f := &farm{t: t, ns: "t-" + randomHex(4), dyn: map[string]dynamic.Interface{}, sims: map[string]*flinksim.Simulator{}}
	f.log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	if _, bench := t.(*testing.B); bench {
		f.log = slog.New(slog.DiscardHandler) // a benchmark prints everything it logs
		// PURSER_BENCH_LOG names a file for the farm's logs instead, to
		// follow where a benchmark's time goes.
		if path := os.Getenv("PURSER_BENCH_LOG"); path != "" {
			file, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = file.Close() })
			f.log = slog.New(slog.NewTextHandler(file, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	}
	var err error
	if f.store, err = store.Open(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	f.sealer, _ = sealtest.New(t)
	f.nats = streamtest.Start(t, "")
	streams := streamtest.Declared(t, f.nats.URL)
	f.ctx, f.cancel = context.WithCancel(ctx)
	t.Cleanup(f.stop)

	relay := f.startAPI(streams, p.relayPoll)
	f.startS3()
	for _, m := range members {
		f.register(m, p)
	}
	interp, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: f.store, Stream: streams, Health: interp, Logger: f.log.With("component", "ingester")})
	if err != nil {
		t.Fatal(err)
	}
	f.run("ingester", ingester.Run)
	f.run("submitter", submitter.New(submitter.Config{Store: f.store, Sealer: f.sealer, Stream: streams,
		RescanInterval: time.Second, Logger: f.log.With("component", "submitter"), ClientLimits: p.clientLimits}).Run)
	cache := clusters.NewLimitedCache(f.sealer, p.clientLimits)
	f.metrics = prometheus.NewRegistry()
	ctl := failover.New(failover.Config{Store: f.store, Objects: clusters.NewObjects(cache), EvictionRate: p.evictionRate,
		Interval: p.failoverPass, AgentLease: agentLease, FencingMargin: margin, Logger: f.log,
		Checkpoints: f.checkpoints, Notify: relay.Notify, Registerer: f.metrics})
	f.run("health", clusters.NewHealthMonitor(clusters.Config{
		Store: f.store, Sealer: f.sealer, Interval: p.probe,
		Policy:      clusters.Policy{FailureThreshold: p.threshold, SuccessThreshold: 2, NoExecuteGrace: p.grace, AgentLease: agentLease},
		OnNoExecute: ctl.Kick, Logger: f.log.With("component", "health"), Observed: f.probes.observe,
	}).Run)
	f.run("failover", ctl.Run)
	f.run("drills", controldrill.NewFollower(controldrill.FollowerConfig{Store: f.store, Logger: f.log.With("component", "drills")}).Run)
	return f
}

// passedAfter waits until the failover controller has completed a pass
// that began after at: what it would do about the state at that time, it
// has done.
func (f *farm) passedAfter(at time.Time) {
	f.t.Helper()
	from := int64(-1)
	sandboxtest.Eventually(f.t, wait, "a failover pass begun after "+at.Format("15:04:05.000"), func(context.Context) error {
		if from < 0 {
			if time.Now().Before(at) {
				return fmt.Errorf("not %s yet", at.Format("15:04:05.000"))
			}
			from = f.passes()
		}
		// The first pass counted may have begun before at; the second
		// began after it.
		if n := f.passes() - from; n < 2 {
			return fmt.Errorf("%d passes completed since", n)
		}
		return nil
	})
}

// passes reads purser_failover_passes_total.
func (f *farm) passes() int64 {
	f.t.Helper()
	families, err := f.metrics.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == "purser_failover_passes_total" && len(mf.GetMetric()) == 1 {
			return int64(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	f.t.Fatal("no purser_failover_passes_total among the controller's metrics")
	return 0
}

// probeLog records the health monitor's probes by cluster.
type probeLog struct {
	mu        sync.Mutex
	outcomes  map[string][]probe.Outcome
	onFailure map[string]func()
}

// observe is the monitor's Observed hook. It runs react on the monitor's
// goroutine, before the next probe.
func (p *probeLog) observe(cluster string, o clusters.Observation, _ clusters.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcomes == nil {
		p.outcomes = map[string][]probe.Outcome{}
	}
	p.outcomes[cluster] = append(p.outcomes[cluster], o.Probe.Outcome)
	if react := p.onFailure[cluster]; react != nil && o.Probe.Outcome != probe.OK {
		react()
	}
}

// setOnFailure makes every failed probe of cluster run react (nil: nothing).
func (p *probeLog) setOnFailure(cluster string, react func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onFailure == nil {
		p.onFailure = map[string]func(){}
	}
	p.onFailure[cluster] = react
}

// count is how many probes of cluster were observed.
func (p *probeLog) count(cluster string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.outcomes[cluster])
}

// wait waits for a probe of cluster with outcome among those observed
// after the first from.
func (p *probeLog) wait(t testing.TB, cluster string, from int, outcome probe.Outcome) {
	t.Helper()
	sandboxtest.Eventually(t, wait, fmt.Sprintf("a probe of %s with outcome %d", cluster, outcome), func(context.Context) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if got := p.outcomes[cluster]; len(got) <= from || !slices.Contains(got[from:], outcome) {
			return fmt.Errorf("outcomes since: %v", got[min(from, len(got)):])
		}
		return nil
	})
}

// startAPI serves the REST API with an admin token (drills included),
// and relays its outbox to the stream.
func (f *farm) startAPI(streams *stream.Client, poll time.Duration) *outbox.Relay {
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		f.t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		f.t.Fatal(err)
	}
	relay := outbox.NewRelay(outbox.StoreSource(f.store), streams, outbox.Config{Interval: poll})
	f.run("relay", relay.Run)
	srv := httptest.NewServer(server.New(server.Config{Store: f.store, Outbox: relay, Tokens: tokens, Policy: pol, Sealer: f.sealer,
		DrillSnapshot: controldrill.Snapshotter(controldrill.Options{})}))
	f.t.Cleanup(srv.Close)
	f.api = client.New(client.Config{Server: srv.URL, Token: token})
	return relay
}

// register adds a cluster through the API, installs the FlinkDeployment
// CRD and a Flink simulator in it, and starts its agent.
func (f *farm) register(m cluster, p periods) {
	f.t.Helper()
	kc, err := m.sandbox.Kubeconfig(m.apiServer)
	if err != nil {
		f.t.Fatal(err)
	}
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster",
		"metadata": map[string]any{"name": m.name},
		"spec":     map[string]any{"kubeconfig": string(kc)},
	}
	f.do(http.MethodPost, "/api/v1/clusters", body, nil)
	cfg := m.sandbox.RESTConfig()
	if err := flinksim.InstallCRD(f.ctx, cfg); err != nil {
		f.t.Fatal(err)
	}
	if p.stateSnapshots {
		if err := flinksim.InstallSnapshotCRD(f.ctx, cfg); err != nil {
			f.t.Fatal(err)
		}
	}
	if !m.noOperator {
		sim, err := flinksim.Start(f.ctx, m.name, cfg, flinksim.Config{StartDelay: 300 * time.Millisecond, Logger: f.log,
			Checkpoints: f.writeCheckpoint, Discards: f.discardCheckpoint, StateSnapshots: p.stateSnapshots, ReconcileInterval: p.reconcile})
		if err != nil {
			f.t.Fatal(err)
		}
		f.sims[m.name] = sim
	}
	if f.dyn[m.name], err = dynamic.NewForConfig(cfg); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.dyn[m.name].Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).
			Delete(context.Background(), f.ns, metav1.DeleteOptions{})
	})
	f.startAgent(m.name, cfg, m.natsURL)
}

func (f *farm) startAgent(name string, cfg *rest.Config, natsURL string) {
	if natsURL == "" {
		natsURL = f.nats.URL
	}
	streams, err := stream.Connect(f.ctx, natsURL, stream.Config{Name: "agent-" + name})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(streams.Close)
	a, err := agent.New(agent.Config{Cluster: name, RESTConfig: cfg, Stream: streams,
		SnapshotInterval: 5 * time.Second, HeartbeatInterval: heartbeat, DiscoveryInterval: time.Second,
		LeaseDuration: agentLease, Logger: f.log.With("component", "agent", "cluster", name)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.run("agent "+name, a.Run)
}

// run starts a component until the farm stops.
func (f *farm) run(name string, fn func(context.Context) error) {
	f.wg.Go(func() {
		if err := fn(f.ctx); err != nil && f.ctx.Err() == nil {
			f.t.Errorf("%s stopped: %v", name, err)
		}
	})
}

func (f *farm) stop() {
	f.cancel()
	f.wg.Wait()
	for _, sim := range f.sims {
		sim.Wait()
	}
}

// do calls the API and fails the test on anything but 2xx.
func (f *farm) do(method, path string, body, out any) {
	f.t.Helper()
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			f.t.Fatal(err)
		}
	}
	code, err := f.api.Do(f.ctx, method, path, nil, data, "application/json", out)
	if err != nil || code/100 != 2 {
		f.t.Fatalf("%s %s: %d %v", method, path, code, err)
	}
}

// submit posts a runnable from YAML in the farm's namespace, and returns
// its name.
func (f *farm) submit(manifest string) string {
	f.t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		f.t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	meta["namespace"] = f.ns
	f.do(http.MethodPost, "/api/v1/runnables", obj, nil)
	name, _ := meta["name"].(string)
	return name
}

// runnable reads one runnable through the API.
func (f *farm) runnable(name string) *v1alpha1.Runnable {
	f.t.Helper()
	var r v1alpha1.Runnable
	f.do(http.MethodGet, "/api/v1/runnables/"+f.ns+"/"+name, nil, &r)
	return &r
}

// waitFor polls the runnable until ok says so, and fails the test with
// the last state after wait.
func (f *farm) waitFor(name, what string, ok func(*v1alpha1.Runnable) bool) *v1alpha1.Runnable {
	f.t.Helper()
	var r *v1alpha1.Runnable
	sandboxtest.Eventually(f.t, wait, "runnable "+name+" "+what, func(context.Context) error {
		if r = f.runnable(name); ok(r) {
			return nil
		}
		y, _ := yaml.Marshal(r.Status)
		return fmt.Errorf("status:\n%s", y)
	})
	return r
}

// objects lists the runnable objects of a kind in the farm's namespace on
// one cluster.
func (f *farm) objects(cluster string, gvr schema.GroupVersionResource) []unstructured.Unstructured {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	list, err := f.dyn[cluster].Resource(gvr).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list %s on %s: %v", gvr.Resource, cluster, err)
	}
	return list.Items
}

// history returns the actions the audit log holds for a runnable.
func (f *farm) history(name string) []string {
	f.t.Helper()
	var out struct {
		Items []struct {
			Action  string `json:"action"`
			Summary string `json:"summary"`
		} `json:"items"`
	}
	f.do(http.MethodGet, "/api/v1/history?namespace="+f.ns+"&name="+name, nil, &out)
	var actions []string
	for _, e := range out.Items {
		actions = append(actions, e.Action)
	}
	return actions
}

// historySummaries returns the summaries the audit log holds for a
// runnable, oldest first.
func (f *farm) historySummaries(name string) []string {
	f.t.Helper()
	var out struct {
		Items []struct {
			Summary string `json:"summary"`
		} `json:"items"`
	}
	f.do(http.MethodGet, "/api/v1/history?namespace="+f.ns+"&name="+name, nil, &out)
	var s []string
	for _, e := range out.Items {
		s = append(s, e.Summary)
	}
	return s
}

func sqliteDSN(t testing.TB) string { return storetest.Engines()[0].NewDSN(t) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startS3 serves S3 over HTTP for the farm's checkpoints, with the bucket
// "flink" the tests' FlinkDeployments write to.
func (f *farm) startS3() {
	f.t.Helper()
	ts := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	f.t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	var err error
	f.s3, err = minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4("flink", "secret", ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.s3.MakeBucket(f.ctx, "flink", minio.MakeBucketOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.checkpoints, err = checkpoints.New(checkpoints.Config{Endpoint: u.Host, AccessKeyID: "flink", SecretAccessKey: "secret", Insecure: true})
	if err != nil {
		f.t.Fatal(err)
	}
}

// writeCheckpoint writes a completed checkpoint's (or savepoint's)
// _metadata where Flink would: path/_metadata, path in bucket "flink".
func (f *farm) writeCheckpoint(ctx context.Context, path string) error {
	key, ok := strings.CutPrefix(path, "s3://flink/")
	if !ok {
		return nil // elsewhere: not the farm's storage
	}
	body := []byte("checkpoint metadata of " + path)
	_, err := f.s3.PutObject(ctx, "flink", key+"/_metadata", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	return err
}

// discardCheckpoint deletes a subsumed checkpoint's _metadata, as Flink
// deletes the checkpoints it no longer retains.
func (f *farm) discardCheckpoint(ctx context.Context, path string) error {
	key, ok := strings.CutPrefix(path, "s3://flink/")
	if !ok {
		return nil
	}
	return f.s3.RemoveObject(ctx, "flink", key+"/_metadata", minio.RemoveObjectOptions{})
}

// watchCreated reports when the object name of gvr is created on cluster
// from now on, as the watch event arrives.
func (f *farm) watchCreated(cluster string, gvr schema.GroupVersionResource, name string) <-chan time.Time {
	f.t.Helper()
	w, err := f.dyn[cluster].Resource(gvr).Namespace(f.ns).Watch(f.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				out <- time.Now()
				return
			}
		}
	}()
	return out
}
