package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/store/storetest"
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
					req, _ := http.NewRequest("POST", h.url+"/api/v1/runnables", bytes.NewReader([]byte(body)))
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
