package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/purser-io/purser/internal/hub/audit"
)

// BenchmarkInsertRunnableWithAuditAndOutbox measures the raw rate of the
// transaction behind every accepted submission: create the runnable, append
// its audit entry, enqueue its outbox message. It is the ceiling the API's
// submission rate is compared against. "serial" is one client, so it shows
// the commit latency; "parallel" is many clients, which on both engines
// still commit one at a time through the audit chain (and, on SQLite, the
// single writer), so it shows how far batching of commits gets us.
func BenchmarkInsertRunnableWithAuditAndOutbox(b *testing.B) {
	for _, eng := range engines(b) {
		b.Run(eng.name, func(b *testing.B) {
			for _, mode := range []string{"serial", "parallel"} {
				b.Run(mode, func(b *testing.B) {
					s := eng.open(b)
					ctx := context.Background()
					var n atomic.Int64
					op := func() error {
						i := n.Add(1)
						r := newRunnable("bench", fmt.Sprintf("r-%09d", i))
						r.Spec = benchSpec
						return s.Tx(ctx, func(tx *Tx) error {
							if err := tx.Runnables().Create(ctx, r); err != nil {
								return err
							}
							if err := tx.Outbox().Enqueue(ctx, &OutboxMessage{Subject: "purser.submissions", MsgID: r.UID, Data: benchSpec}); err != nil {
								return err
							}
							return tx.Audit().Append(ctx, &audit.Entry{Actor: "bench", Action: "create", Kind: "Runnable",
								Namespace: r.Namespace, Name: r.Name, Summary: "submitted", Outcome: "Success"})
						})
					}
					b.ReportAllocs()
					b.ResetTimer()
					if mode == "serial" {
						for b.Loop() {
							if err := op(); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						b.SetParallelism(8)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := op(); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "ops/s")
				})
			}
		})
	}
}

// benchSpec is a Job of typical size (~1 KiB), so the rate includes
// realistic row sizes.
var benchSpec = []byte(`{"template":{"apiVersion":"batch/v1","kind":"Job","metadata":{"labels":{"app":"nightly-report","team":"a"}},` +
	`"spec":{"backoffLimit":2,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"report",` +
	`"image":"registry.example.com/team-a/nightly-report:2026.03.1","args":["--date","yesterday","--format","parquet"],` +
	`"resources":{"requests":{"cpu":"500m","memory":"512Mi"},"limits":{"cpu":"2","memory":"2Gi"}},` +
	`"env":[{"name":"OUTPUT","value":"s3://reports/team-a/"},{"name":"LOG_LEVEL","value":"info"}]}]}}}},` +
	`"placement":{"clusterAffinity":{"labelSelector":{"matchLabels":{"tier":"prod"}},"exclude":["dc3-a"]}},` +
	`"failover":{"consistency":"AtMostOne","cluster":{"purgeMode":"Gracefully"},"application":{"tolerationSeconds":120,` +
	`"purgeMode":"Gracefully","gracePeriodSeconds":600}}}`)
