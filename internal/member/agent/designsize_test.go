package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// BenchmarkAgentDesignSize runs the agent, as `purser agent` builds it
// (leader election on, default intervals but the snapshot period), against
// one dedicated sandbox cluster holding purser's design size of 100,000
// tracked objects (designSize), publishing to a real JetStream server, and
// measures in the same run:
//
//   - the heap per tracked object after GC, against a plain client-go
//     informer (dynamic and untrimmed, as in BenchmarkInformerMemory) and a
//     typed one over the same kinds and objects;
//   - the time to the caches' initial sync and to every initial event
//     acknowledged by the stream;
//   - the time of one full snapshot, from the cache list to the last chunk
//     acknowledged (three in a row, the median);
//   - the RSS of each.
//
// Each of the three runs in a process of its own (this test binary again,
// see runDesignSizeChild), so that heap and RSS are the agent's alone: not
// the benchmark's clients that created the objects, nor the JetStream
// server, which stays in this process. The objects are created once and
// read by all three. It takes 12 to 15 minutes on two loaded cores, most of
// it creating the objects, and never runs with `go test` alone: -bench must
// name it.
func BenchmarkAgentDesignSize(b *testing.B) {
	ctx := b.Context()
	c := env.Dedicated(b, false)
	start := time.Now()
	n, err := populate(ctx, c.RESTConfig(), designSize)
	if err != nil {
		b.Fatalf("populate the cluster: %v (%d created)", err, n)
	}
	created := time.Since(start)
	b.Logf("created %d objects (%d namespaces of %d ConfigMaps, %d Secrets, %d suspended Jobs) in %s: %.0f objects/s",
		n, designSize.Namespaces, designSize.ConfigMaps, designSize.Secrets, designSize.Jobs, created.Round(time.Second), float64(n)/created.Seconds())

	srv := streamtest.Start(b, "")
	streamtest.Declared(b, srv.URL)
	cfg := designSizeChild{Kubeconfig: c.KubeconfigPath(), NATS: srv.URL, Cluster: "design-size"}

	var plain, typed, agent designSizeResult
	for b.Loop() {
		plain = runDesignSizeChild(ctx, b, cfg, "plain")
		typed = runDesignSizeChild(ctx, b, cfg, "typed")
		agent = runDesignSizeChild(ctx, b, cfg, "agent")
	}
	for _, r := range []designSizeResult{plain, typed, agent} {
		b.Logf("%s: %d objects, %.0f B/object (heap %.0f MB), synced in %.2fs, %.1f s of CPU, RSS %.0f MB (peak %.0f MB)",
			r.Role, r.Objects, r.HeapPerObject, r.HeapMB, r.SyncSeconds, r.CPUSeconds, r.RSSMB, r.PeakRSSMB)
	}
	b.Logf("agent: every initial event acknowledged %.2fs after start (%d messages, %d full resyncs); first snapshot %.2fs after start; snapshots %v s, %d chunks, %.1f MB each",
		agent.PublishedSeconds, agent.EventsPublished, agent.Resyncs, agent.FirstSnapshotSeconds, agent.SnapshotSeconds, agent.SnapshotChunks, agent.SnapshotMB)
	if agent.Objects < designSize.total() {
		b.Errorf("the agent tracks %d objects, fewer than the %d created", agent.Objects, designSize.total())
	}
	b.ReportMetric(float64(agent.Objects), "objects")
	b.ReportMetric(float64(n)/created.Seconds(), "created-objects/s")
	for _, r := range []designSizeResult{plain, typed, agent} {
		b.ReportMetric(r.HeapPerObject, r.Role+"-B/object")
		b.ReportMetric(r.HeapMB, r.Role+"-MB-heap")
		b.ReportMetric(r.SyncSeconds, r.Role+"-sync-s")
		b.ReportMetric(r.CPUSeconds, r.Role+"-cpu-s")
		b.ReportMetric(r.RSSMB, r.Role+"-MB-rss")
		b.ReportMetric(r.PeakRSSMB, r.Role+"-MB-rss-peak")
	}
	b.ReportMetric(agent.PublishedSeconds, "agent-published-s")
	b.ReportMetric(agent.FirstSnapshotSeconds, "agent-first-snapshot-s")
	b.ReportMetric(float64(agent.Resyncs), "agent-resyncs")
	b.ReportMetric(median(agent.SnapshotSeconds), "snapshot-s")
	b.ReportMetric(slices.Max(agent.SnapshotSeconds), "snapshot-max-s")
	b.ReportMetric(float64(agent.SnapshotChunks), "snapshot-chunks")
	b.ReportMetric(agent.SnapshotMB, "snapshot-MB")
}

// designSizeChild is what a measuring process is given, in the
// environment variable designSizeEnv.
type designSizeChild struct {
	Role       string // "agent", "plain" or "typed"
	Kubeconfig string
	NATS       string
	Cluster    string
	Out        string // where the result is written, as JSON
}

// designSizeEnv makes this test binary a measuring process (see TestMain).
const designSizeEnv = "PURSER_AGENT_DESIGN_SIZE_CHILD"

// designSizeProfiles, when set, names a folder where the agent's process
// writes CPU profiles of its initial sync and of its snapshots, and a heap
// profile: how a slow or large figure is looked into.
const designSizeProfiles = "PURSER_AGENT_PROFILE_DIR"

// designSizeResult is what a measuring process found.
type designSizeResult struct {
	Role          string
	Objects       int     // objects in its caches
	HeapPerObject float64 // heap after GC over Objects, less the heap before the caches
	HeapMB        float64 // the caches' heap
	SyncSeconds   float64 // start to every cache synced
	RSSMB         float64 // once synced (the agent: once its initial events are published)
	PeakRSSMB     float64 // the process's high-water mark
	// CPUSeconds is the CPU time (user and system) the process spent from
	// start to synced (the agent: to its initial events published): what
	// the figures above cost whatever the machine's load.
	CPUSeconds float64

	// The agent's alone.
	PublishedSeconds     float64 // start to every initial event acknowledged
	EventsPublished      int
	Resyncs              int64   // full resyncs (the queue overflowed) before the measurement
	FirstSnapshotSeconds float64 // start to the first snapshot acknowledged
	SnapshotSeconds      []float64
	SnapshotChunks       int
	SnapshotMB           float64
}

// runDesignSizeChild runs one measuring process and returns its result.
func runDesignSizeChild(ctx context.Context, b *testing.B, cfg designSizeChild, role string) designSizeResult {
	b.Helper()
	cfg.Role = role
	cfg.Out = filepath.Join(b.TempDir(), role+".json")
	spec, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), designSizeEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("measure %s: %v", role, err)
	}
	data, err := os.ReadFile(cfg.Out)
	if err != nil {
		b.Fatal(err)
	}
	var r designSizeResult
	if err := json.Unmarshal(data, &r); err != nil {
		b.Fatal(err)
	}
	return r
}

// designSizeMain is the whole of a measuring process: it measures what
// spec names, writes the result, and returns the exit code.
func designSizeMain(spec string) int {
	var cfg designSizeChild
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "design size:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	var r designSizeResult
	var err error
	switch cfg.Role {
	case "agent":
		r, err = measureAgent(ctx, cfg)
	case "plain", "typed":
		r, err = measureInformers(ctx, cfg)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err == nil {
		var data []byte
		if data, err = json.Marshal(r); err == nil {
			err = os.WriteFile(cfg.Out, data, 0o600)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "design size, %s: %v\n", cfg.Role, err)
		return 1
	}
	return 0
}

// measureAgent runs the agent until its caches are synced, every initial
// event is acknowledged and its first snapshot is published, measures its
// heap and RSS, then times three full snapshots.
func measureAgent(ctx context.Context, cfg designSizeChild) (designSizeResult, error) {
	r := designSizeResult{Role: cfg.Role}
	// As `purser agent --kubeconfig` builds it (internal/compose).
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return r, err
	}
	sc, err := stream.Connect(ctx, cfg.NATS, stream.Config{Name: "agent-design-size"})
	if err != nil {
		return r, err
	}
	defer sc.Close()
	js := sc.JetStream()
	base := heap()
	stopProfile := profile("sync.cpu.pprof")
	a, err := New(Config{Cluster: cfg.Cluster, RESTConfig: rc, Stream: sc,
		// Only the first snapshot runs by itself; the others are timed
		// one by one below.
		SnapshotInterval: time.Hour,
		LeaderElection:   LeaderElection{Enabled: true}})
	if err != nil {
		return r, err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	start, cpu := time.Now(), cpuSeconds()
	wg.Go(func() { _ = a.Run(runCtx) })

	// Synced: the configured kinds' watches start before the labelled
	// ones, in the same discovery pass.
	if err := poll(ctx, func() (bool, error) {
		a.mu.Lock()
		labelled := len(a.labelled)
		a.mu.Unlock()
		return a.leading.Load() && labelled > 0 && a.cachesSynced(), nil
	}); err != nil {
		return r, fmt.Errorf("wait for the caches: %w", err)
	}
	r.SyncSeconds = time.Since(start).Seconds()
	for _, w := range a.watches() {
		r.Objects += w.count()
	}
	firstSnapshot := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !a.lastSnapshot.IsZero()
	}
	if err := poll(ctx, func() (bool, error) {
		if r.FirstSnapshotSeconds == 0 && firstSnapshot() {
			r.FirstSnapshotSeconds = time.Since(start).Seconds()
		}
		msgs, _, err := streamState(ctx, js, stream.EventsStream)
		if err != nil {
			return false, err
		}
		// Published: the stream holds a message per cached object and
		// nothing waits in the queue.
		if msgs >= uint64(r.Objects) && len(a.queue) == 0 && r.PublishedSeconds == 0 {
			r.PublishedSeconds = time.Since(start).Seconds()
			r.EventsPublished = int(msgs)
		}
		return r.PublishedSeconds > 0 && r.FirstSnapshotSeconds > 0, nil
	}); err != nil {
		return r, fmt.Errorf("wait for the initial events and the first snapshot: %w", err)
	}
	r.CPUSeconds = cpuSeconds() - cpu
	stopProfile()
	r.Resyncs = a.resyncs.Load()
	used := float64(heap()) - float64(base)
	r.HeapMB = used / 1e6
	r.HeapPerObject = used / float64(r.Objects)
	r.RSSMB, r.PeakRSSMB = rss()
	if dir := os.Getenv(designSizeProfiles); dir != "" {
		if f, err := os.Create(filepath.Join(dir, "heap.pprof")); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}

	stopProfile = profile("snapshot.cpu.pprof")
	defer stopProfile()
	// A snapshot is skipped when the kube-apiserver's probe fails, which
	// a loaded machine may make it do: three published, of six at most.
	for attempt := 0; len(r.SnapshotSeconds) < 3; attempt++ {
		if attempt == 6 {
			return r, fmt.Errorf("%d of 6 snapshots published", len(r.SnapshotSeconds))
		}
		a.mu.Lock()
		last := a.lastSnapshot
		a.mu.Unlock()
		msgs, bytes, err := streamState(ctx, js, stream.SnapshotsStream)
		if err != nil {
			return r, err
		}
		t := time.Now()
		a.snapshot(ctx)
		d := time.Since(t)
		a.mu.Lock()
		published := a.lastSnapshot.After(last)
		a.mu.Unlock()
		if !published {
			fmt.Fprintln(os.Stderr, "design size: a snapshot was skipped (the kube-apiserver's probe failed)")
			continue
		}
		msgs2, bytes2, err := streamState(ctx, js, stream.SnapshotsStream)
		if err != nil {
			return r, err
		}
		r.SnapshotSeconds = append(r.SnapshotSeconds, d.Seconds())
		r.SnapshotChunks = int(msgs2 - msgs)
		r.SnapshotMB = float64(bytes2-bytes) / 1e6
	}
	if !a.leading.Load() {
		return r, errors.New("the agent lost its leadership during the measurement")
	}
	return r, nil
}

// measureInformers runs client-go informers, untrimmed and without
// handlers, over the kinds the agent tracks in full: dynamic ones (what
// the agent would hold without Trim) for "plain", typed ones from
// client-go's informer factory for "typed" (CustomResourceDefinitions,
// which need another clientset, left out: a cluster without Argo has
// none).
func measureInformers(ctx context.Context, cfg designSizeChild) (designSizeResult, error) {
	r := designSizeResult{Role: cfg.Role}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return r, err
	}
	// The agent's own client limits (New).
	rc.QPS, rc.Burst = 50, 100
	gvrs, err := servedResources(ctx, rc, DefaultKinds)
	if err != nil {
		return r, err
	}
	base := heap()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	start, cpu := time.Now(), cpuSeconds()
	var infs []cache.SharedIndexInformer
	switch cfg.Role {
	case "plain":
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return r, err
		}
		for _, gvr := range gvrs {
			infs = append(infs, dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0, cache.Indexers{}, nil).Informer())
		}
	case "typed":
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return r, err
		}
		f := informers.NewSharedInformerFactory(cs, 0)
		for _, gvr := range gvrs {
			if gvr.Group == "apiextensions.k8s.io" {
				continue
			}
			inf, err := f.ForResource(gvr)
			if err != nil {
				return r, err
			}
			infs = append(infs, inf.Informer())
		}
	}
	for _, inf := range infs {
		wg.Go(func() { inf.RunWithContext(runCtx) })
	}
	if err := poll(ctx, func() (bool, error) {
		return !slices.ContainsFunc(infs, func(i cache.SharedIndexInformer) bool { return !i.HasSynced() }), nil
	}); err != nil {
		return r, fmt.Errorf("wait for the caches: %w", err)
	}
	r.SyncSeconds = time.Since(start).Seconds()
	r.CPUSeconds = cpuSeconds() - cpu
	for _, inf := range infs {
		r.Objects += len(inf.GetStore().ListKeys())
	}
	used := float64(heap()) - float64(base)
	r.HeapMB = used / 1e6
	r.HeapPerObject = used / float64(r.Objects)
	r.RSSMB, r.PeakRSSMB = rss()
	return r, nil
}

// servedResources resolves the kinds that the cluster serves to their
// resources.
func servedResources(ctx context.Context, rc *rest.Config, kinds []schema.GroupVersionKind) ([]schema.GroupVersionResource, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	var out []schema.GroupVersionResource
	for _, gvk := range kinds {
		list, err := disc.ServerResourcesForGroupVersionWithContext(ctx, gvk.GroupVersion().String())
		if err != nil {
			continue // not served
		}
		for _, res := range list.APIResources {
			if res.Kind == gvk.Kind && !strings.Contains(res.Name, "/") {
				out = append(out, gvk.GroupVersion().WithResource(res.Name))
			}
		}
	}
	return out, nil
}

// poll calls cond every 50 ms until it is true, fails, or ctx is done.
func poll(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// streamState is the number of messages and bytes a stream holds.
func streamState(ctx context.Context, js jetstream.JetStream, name string) (msgs, bytes uint64, err error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	return info.State.Msgs, info.State.Bytes, nil
}

// rss reads the process's resident set and its high-water mark, in MB.
func rss() (now, peak float64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			continue
		}
		if name == "VmRSS" {
			now = kb / 1e3
		} else {
			peak = kb / 1e3
		}
	}
	return now, peak
}

// cpuSeconds is the CPU time the process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// profile starts a CPU profile into name under designSizeProfiles, when
// that is set; the returned func stops it.
func profile(name string) func() {
	dir := os.Getenv(designSizeProfiles)
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { pprof.StopCPUProfile(); _ = f.Close() }) }
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
