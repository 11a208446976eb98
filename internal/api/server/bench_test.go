package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// BenchmarkSubmit measures accepted submissions through the real HTTP API:
// authentication, decoding, validation, and one transaction holding the
// runnable, its audit entry and its outbox row, with the relay publishing
// to NATS meanwhile. Clients submit concurrently, as many users would.
// Compare with store's BenchmarkInsertRunnableWithAuditAndOutbox, the
// same rows written without the API.
func BenchmarkSubmit(b *testing.B) {
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			h := newHarness(b, eng)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var seq atomic.Int64
			var mu sync.Mutex
			var latencies []time.Duration
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					body := runnableYAML("team-a", fmt.Sprintf("bench-%d", seq.Add(1)), "true")
					req, _ := http.NewRequestWithContext(b.Context(), "POST", h.url+"/api/v1/runnables", bytes.NewReader([]byte(body)))
					req.Header.Set("Authorization", "Bearer "+h.tokens["alice"])
					req.Header.Set("Content-Type", "application/yaml")
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					mine = append(mine, time.Since(t0))
					if resp.StatusCode != http.StatusAccepted {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(latencies)
			if n := len(latencies); n > 0 {
				b.ReportMetric(float64(n)/elapsed.Seconds(), "submissions/s")
				b.ReportMetric(float64(latencies[n/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[n*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// BenchmarkConsolePages times the API calls behind the console's pages at
// the sizes the console must stay usable at (10,000 runnables, 100,000
// inventory records): each is one request as the page makes it, and the
// page is usable once it returns. Goal: under 200 ms each.
func BenchmarkConsolePages(b *testing.B) {
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			h := newHarness(b, eng)
			ctx := context.Background()
			seedRunnables(b, h, 10_000)
			seedInventory(b, h, 100_000)
			analyzeInventory(b, h, eng.Name)
			for _, page := range []struct{ name, path string }{
				{"runnables", "/api/v1/runnables?limit=200"},
				{"runnables-by-phase", "/api/v1/runnables?limit=200&phase=Queued&namespace=team-a"},
				{"inventory", "/api/v1/inventory?fields=meta&limit=500"},
				{"inventory-selector", "/api/v1/inventory?fields=meta&limit=500&labelSelector=app%3Dweb-7"},
				{"history", "/api/v1/history?limit=500"},
			} {
				b.Run(page.name, func(b *testing.B) {
					for b.Loop() {
						req, _ := http.NewRequestWithContext(ctx, "GET", h.url+page.path, http.NoBody)
						req.Header.Set("Authorization", "Bearer "+h.tokens["admin"])
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err != nil {
							b.Fatalf("%s: %v", page.path, err)
						}
						if resp.StatusCode != http.StatusOK {
							b.Fatalf("%s: %d", page.path, resp.StatusCode)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
				})
			}
		})
	}
}

// seedRunnables writes n runnables (with their audit entries) straight to
// the store, in large transactions: the API path is measured elsewhere.
func seedRunnables(b *testing.B, h *harness, n int) {
	b.Helper()
	ctx := context.Background()
	doc := []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job","spec":{}}}}`)
	for start := 0; start < n; start += 1000 {
		err := h.store.Tx(ctx, func(tx *store.Tx) error {
			for i := start; i < min(start+1000, n); i++ {
				r := &store.Runnable{Namespace: fmt.Sprintf("team-%c", 'a'+i%3), Name: fmt.Sprintf("job-%06d", i),
					UID: fmt.Sprintf("uid-%06d", i), Generation: 1, Spec: doc, SpecHash: "h", Phase: "Queued", Submitter: "alice"}
				if err := tx.Runnables().Create(ctx, r); err != nil {
					return err
				}
				if err := tx.Audit().Append(ctx, &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable", Namespace: r.Namespace, Name: r.Name, Summary: "seed", Outcome: "Queued"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func seedInventory(b *testing.B, h *harness, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	for start := 0; start < n; start += 5000 {
		rows := make([]store.InventoryRow, 0, 5000)
		for i := start; i < min(start+5000, n); i++ {
			rows = append(rows, store.InventoryRow{Cluster: fmt.Sprintf("dc%d-a", i%3), APIVersion: "v1", Kind: "ConfigMap",
				Namespace: fmt.Sprintf("team-%c", 'a'+i%3), Name: fmt.Sprintf("cm-%06d", i), UID: fmt.Sprintf("u-%06d", i),
				ResourceVersion: "1", Labels: map[string]string{"app": fmt.Sprintf("web-%d", i%100)}, Health: "Healthy", ObservedAt: now,
				Object: []byte(`{"data":{"k":"v"}}`)})
		}
		if err := h.store.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Inventory().Upsert(ctx, rows); return err }); err != nil {
			b.Fatal(err)
		}
	}
}

// analyzeInventory gives PostgreSQL's planner the statistics of the
// inventory that autovacuum gathers within a minute of the table filling
// (a table never analyzed needs 50 changed rows, then a tenth of its
// rows): without them the planner cannot tell a rare label from a common
// one, and reads the records in the listing's order, testing each, rather
// than the few the labels' GIN index points to. PURSER_BENCH_NO_ANALYZE=1
// measures that first minute instead (docs/benchmarks.md gives both).
// SQLite's plans for the inventory do not depend on statistics.
func analyzeInventory(b *testing.B, h *harness, engine string) {
	b.Helper()
	if engine != store.EnginePostgres || os.Getenv("PURSER_BENCH_NO_ANALYZE") != "" {
		return
	}
	if _, err := h.raw.ExecContext(context.Background(), "ANALYZE inventory"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkKubeApply measures the same writes, a deployable created
// each, through the REST API (PUT /api/v1/deployables) and through /k8s
// by server-side apply, which reads the object, merges the configuration
// by the schema, writes through the same handler and stores who owns
// which field in the same transaction. Issue 36 asks that the apply run
// at no less than half the REST rate.
func BenchmarkKubeApply(b *testing.B) {
	for _, eng := range storetest.Engines() {
		for _, via := range []string{"rest", "k8s-apply"} {
			b.Run(eng.Name+"/"+via, func(b *testing.B) {
				h := newHarness(b, eng)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				var seq atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						name := fmt.Sprintf("bench-%d", seq.Add(1))
						method, path, ct, want := "PUT", "/api/v1/deployables/team-a/"+name, "application/yaml", http.StatusCreated
						if via == "k8s-apply" {
							method, path, ct = "PATCH", "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/deployables/"+name+"?fieldManager=bench", "application/apply-patch+yaml"
						}
						req, _ := http.NewRequestWithContext(b.Context(), method, h.url+path, bytes.NewReader([]byte(configMapDeployable("team-a", name, "v1"))))
						req.Header.Set("Authorization", "Bearer "+h.tokens["alice"])
						req.Header.Set("Content-Type", ct)
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != want {
							b.Errorf("%s %s: status %d", method, path, resp.StatusCode)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
			})
		}
	}
}
