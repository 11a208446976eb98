package syncer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// BenchmarkSyncer measures, on the three shared sandbox clusters and
// SQLite, what the issue asks for: the time to converge N ConfigMap
// deployables (PURSER_SYNCER_BENCH_N, default 1000) onto every cluster
// from a cold start, drift repair latency (p50/p99 over 60 hand edits),
// and the writes of an idle resync (goal: zero). Run it alone:
//
//	go test ./internal/syncer -run '^$' -bench Syncer -benchtime 1x
func BenchmarkSyncer(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PURSER_SYNCER_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		f := newFixture(b, storetest.Engines()[0].NewDSN(b))
		all := names(f.clusters...)
		ctx := context.Background()

		// The source of truth first, in one transaction, as if the API
		// had accepted it before the syncer started.
		doc := func(i int) []byte {
			return []byte(fmt.Sprintf(`{"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","data":{"i":"%d"}}}}`, i))
		}
		err := f.store.Tx(ctx, func(tx *store.Tx) error {
			for i := range n {
				rec := &store.Deployable{Namespace: f.ns, Name: fmt.Sprintf("cm-%05d", i), UID: randomHex(16), Generation: 1,
					Spec: doc(i), SpecHash: randomHex(8)}
				if err := tx.Deployables().Create(ctx, rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		raw := storetest.RawDB(b, f.dsn)
		synced := func(ctx context.Context) (int, error) {
			var c int
			err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM deployable_status WHERE state = 'Synced' AND synced_generation = 1`).Scan(&c)
			return c, err
		}

		const resync = 15 * time.Second
		start := time.Now()
		s, stop := f.start(syncerOpts{resync: resync})
		sandboxtest.Eventually(b, 30*time.Minute, "every deployable synced everywhere", func(ctx context.Context) error {
			c, err := synced(ctx)
			if err != nil {
				return err
			}
			if c != n*len(all) {
				return fmt.Errorf("%d of %d synced", c, n*len(all))
			}
			return nil
		})
		converge := time.Since(start)
		b.ReportMetric(converge.Seconds(), "s/converge")
		b.ReportMetric(float64(n*len(all))/converge.Seconds(), "objects/s")

		// Drift: someone edits a synced object; time until it is back.
		var lat []time.Duration
		for i := range 60 {
			c := all[i%len(all)]
			name := fmt.Sprintf("cm-%05d", (i*7919)%n)
			cm, err := f.configMap(ctx, c, name)
			if err != nil {
				b.Fatal(err)
			}
			want := cm.Data["i"]
			cm.Data["i"] = "edited"
			t0 := time.Now()
			if _, err := f.kube[c].CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			for {
				got, err := f.configMap(ctx, c, name)
				if err == nil && got.Data["i"] == want {
					break
				}
				if time.Since(t0) > 2*time.Minute {
					b.Fatalf("%s on %s not repaired", name, c)
				}
				time.Sleep(5 * time.Millisecond)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "ms/repair-p50")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "ms/repair-p99")

		// Idle: two full resyncs with nothing changed.
		time.Sleep(3 * time.Second)
		kube, status := s.kubeWrites.Load(), s.statusWrites.Load()
		time.Sleep(2*resync + resync/5 + 2*time.Second)
		b.ReportMetric(float64(s.kubeWrites.Load()-kube)/2, "kube-writes/idle-resync")
		b.ReportMetric(float64(s.statusWrites.Load()-status)/2, "db-writes/idle-resync")
		stop()
	}
}

// BenchmarkPoll measures one poll of the source of truth holding 10,000
// deployables, with no cluster to hand changes to: "idle" is the poll of
// every second while nothing changes (the table's fingerprint only),
// "full" the poll that reads and compares every row (after a change, and
// every 30th poll). No sandbox cluster is needed:
//
//	go test ./internal/syncer -run '^$' -bench Poll
func BenchmarkPoll(b *testing.B) {
	const n = 10_000
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, eng.NewDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			err = st.Tx(ctx, func(tx *store.Tx) error {
				for i := range n {
					doc := fmt.Sprintf(`{"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","data":{"i":"%d"}}}}`, i)
					rec := &store.Deployable{Namespace: "bench", Name: fmt.Sprintf("cm-%05d", i), UID: randomHex(16),
						Generation: 1, Spec: []byte(doc), SpecHash: randomHex(8)}
					if err := tx.Deployables().Create(ctx, rec); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			s := New(Config{Store: st})
			if err := s.poll(ctx, true); err != nil {
				b.Fatal(err)
			}
			if len(s.deployables) != n {
				b.Fatalf("the poll found %d deployables, want %d", len(s.deployables), n)
			}
			for _, full := range []bool{false, true} {
				b.Run(map[bool]string{false: "idle", true: "full"}[full], func(b *testing.B) {
					for b.Loop() {
						if err := s.poll(ctx, full); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
