package submitter_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/member/clusters"
)

// benchRunnables is how many runnables one round submits; clients is how
// many submit at once, both through the API and directly.
const (
	benchRunnables = 1000
	benchClients   = 8
)

// TestBenchmarkSubmit measures runnables per second from the API's answer
// to the object's creation on a sandbox cluster, with p50/p99 of that
// latency, next to client-go creating the same Jobs directly into the same
// cluster with the same client limits (clusters.QPS and Burst) in the same
// run. It is a test that logs its figures rather than a testing.B, because
// one round is a whole batch on shared clusters; it is skipped unless
// PURSER_BENCH is set. The figures in docs/submitter.md come from
//
//	PURSER_BENCH=1 go test ./internal/submitter -run TestBenchmarkSubmit -v
func TestBenchmarkSubmit(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	f := newFixture(t, sqliteDSN(t))
	c := env.Clusters(t)[0]
	f.register(c.Name(), c, c.Labels())
	a := f.api()
	f.start(submitter.Config{})

	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = clusters.QPS, clusters.Burst
	direct, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(t.Context(), f.ns); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(t.Context(), f.ns+"-direct"); err != nil {
		t.Fatal(err)
	}
	// Warm up both paths (discovery, connections, the namespace).
	a.do("POST", "/api/v1/runnables", runnableBody(f.ns, "warm-up"), http.StatusAccepted)
	f.waitPhase("warm-up", v1alpha1.PhaseSubmitted)

	// Direct: client-go creating the Jobs.
	start := time.Now()
	parallel(benchRunnables, func(i int) {
		obj := &unstructured.Unstructured{Object: job(true)}
		obj.SetName(fmt.Sprintf("direct-%03d", i))
		if _, err := direct.Resource(jobs).Namespace(f.ns+"-direct").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	directRate := float64(benchRunnables) / time.Since(start).Seconds()

	// Through purser: accepted by the API, created by the submitter; the
	// creation time is when the cluster's watch reports the object.
	w, err := direct.Resource(jobs).Namespace(f.ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.LabelRunnable})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	accepted := map[string]time.Time{}
	created := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			o := ev.Object.(*unstructured.Unstructured)
			mu.Lock()
			created[o.GetLabels()[v1alpha1.LabelRunnable]] = time.Now()
			n := len(created)
			mu.Unlock()
			if n >= benchRunnables {
				return
			}
		}
	}()
	start = time.Now()
	parallel(benchRunnables, func(i int) {
		name := fmt.Sprintf("bench-%03d", i)
		a.do("POST", "/api/v1/runnables", runnableBody(f.ns, name), http.StatusAccepted)
		mu.Lock()
		accepted[name] = time.Now()
		mu.Unlock()
	})
	acceptRate := float64(benchRunnables) / time.Since(start).Seconds()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("only %d of %d objects created", len(created), benchRunnables)
	}
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	var latencies []time.Duration
	for name, at := range accepted {
		c := created[name]
		if c.After(last) {
			last = c
		}
		latencies = append(latencies, max(c.Sub(at), 0))
	}
	slices.Sort(latencies)
	rate := float64(benchRunnables) / last.Sub(start).Seconds()
	t.Logf("direct client-go: %.1f objects/s; API accepted %.1f runnables/s", directRate, acceptRate)
	t.Logf("through purser:   %.1f runnables/s (%.0f%% of direct), accept->created p50 %v p99 %v",
		rate, 100*rate/directRate, latencies[len(latencies)/2].Round(time.Millisecond),
		latencies[len(latencies)*99/100].Round(time.Millisecond))
}

func runnableBody(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Runnable",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"template": job(true)},
	}
}

// parallel runs fn(0..n-1) on benchClients goroutines.
func parallel(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
