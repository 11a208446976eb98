package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

// TestBenchmarkDCAccept measures what a DC costs the API: its audited
// accept rate with PostgreSQL's synchronous standby in another DC across
// a link of 5 ms round trip, each change committed alone and in groups
// (store.GroupCommit), next to the same with the standbys asynchronous (a
// commit waits for no other DC) and with the synchronous standby across
// no delay. 32 clients submit runnables to the API in the primary's DC
// for 15 s each; the submitters are stopped, so that only the accept path
// runs (the runnables' placement matches no cluster).
// The figures in docs/benchmarks.md come from
//
//	PURSER_BENCH=1 go test ./test/soak -run TestBenchmarkDCAccept -v
func TestBenchmarkDCAccept(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	ctx := t.Context()
	f, _ := startDCFarm(ctx, t, keptDir(t), nil, nil)
	for _, dc := range f.DCs {
		dc.Components[1].Stop(5 * time.Second) // the submitter
	}
	primary, err := f.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	measure := func(label string) {
		t.Helper()
		rate, p50, p99 := acceptLoad(t, primary, f.Token, &seq, 32, 15*time.Second)
		t.Logf("dc accept %s: %.0f submissions/s, p50 %s p99 %s", label, rate, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
	}
	api := primary.Components[0]
	withAPI := func(extra ...string) {
		t.Helper()
		args := api.Args()
		api.Kill()
		api.SetArgs(append(args, extra...))
		if err := api.Start(); err != nil {
			t.Fatal(err)
		}
		if err := f.WaitAPIs(ctx); err != nil {
			t.Fatal(err)
		}
		api.SetArgs(args)
	}
	f.WAN.SetDelay(2500 * time.Microsecond) // a round trip between DCs: 5 ms
	// One user sends every request: past its default rate limit the API
	// would answer 429, and the rate measured would be the limit's.
	const unlimited = "--user-rate=1000000"
	withAPI("--group-commit=false", unlimited)
	measure("sync-5ms-serial")
	withAPI(unlimited)
	measure("sync-5ms-grouped")
	setSynchronous(t, f, primary, false)
	measure("async-5ms-grouped")
	setSynchronous(t, f, primary, true)
	f.WAN.SetDelay(0)
	measure("sync-0ms-grouped")
}

// acceptLoad submits runnables from n clients for d and returns the rate
// of accepted ones with the median and 99th percentile latency.
func acceptLoad(t *testing.T, dc *farm.DC, token string, seq *atomic.Int64, n int, d time.Duration) (float64, time.Duration, time.Duration) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: dc.NS.Dial, MaxIdleConnsPerHost: n}, Timeout: 30 * time.Second}
	var mu sync.Mutex
	var latencies []time.Duration
	var failures atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var mine []time.Duration
			for time.Since(start) < d {
				name := fmt.Sprintf("bench-%d", seq.Add(1))
				body, _ := json.Marshal(map[string]any{
					"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindRunnable,
					"metadata": map[string]any{"namespace": "dc-bench", "name": name},
					"spec": map[string]any{
						"placement": map[string]any{"clusterAffinity": map[string]any{"clusterNames": []string{"nowhere"}}},
						"template": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{
							"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
								"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}},
					},
				})
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, dc.APIURL()+"/api/v1/runnables", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					failures.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failures.Load(); f > 0 {
		t.Errorf("%d submissions failed", f)
	}
	slices.Sort(latencies)
	if len(latencies) == 0 {
		t.Fatal("nothing accepted")
	}
	return float64(len(latencies)) / elapsed.Seconds(), latencies[len(latencies)/2], latencies[len(latencies)*99/100]
}

// setSynchronous switches Patroni's synchronous_mode (PATCH /config, the
// dynamic configuration in the DCS) and waits until the cluster shows it.
func setSynchronous(t *testing.T, f *farm.DCFarm, dc *farm.DC, on bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"synchronous_mode": on})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, fmt.Sprintf("http://%s:8008/config", dc.Addr), bytes.NewReader(body))
	resp, err := dc.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH /config: %s", resp.Status)
	}
	sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("synchronous_mode %v in effect", on), func(ctx context.Context) error {
		members, err := f.PatroniCluster(ctx, dc)
		if err != nil {
			return err
		}
		syncs := 0
		for _, m := range members {
			if m.Role == "sync_standby" {
				syncs++
			}
		}
		if (syncs > 0) != on {
			return fmt.Errorf("members %+v", members)
		}
		return nil
	})
}
