package inventory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/inventory"
)

// benchEvents is the number of events per measured round.
const benchEvents = 20000

// benchEvent is a realistic ConfigMap event of about 600 bytes.
func benchEvent(round, i int) stream.Event {
	name := fmt.Sprintf("cm-%d-%06d", round, i)
	obj, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "bench", "uid": fmt.Sprintf("uid-%d-%06d", round, i),
			"resourceVersion": fmt.Sprint(1000 + i), "labels": map[string]any{"app": "bench", "shard": fmt.Sprint(i % 10)}},
		"data": map[string]any{"config": strings.Repeat("x", 300)}})
	return stream.Event{Cluster: "bench", APIVersion: "v1", Kind: "ConfigMap", Namespace: "bench", Name: name,
		UID: fmt.Sprintf("uid-%d-%06d", round, i), ResourceVersion: fmt.Sprint(1000 + i), Type: stream.EventAdded,
		Labels: map[string]string{"app": "bench", "shard": fmt.Sprint(i % 10)}, Time: time.Now(), Object: obj}
}

func countRows(b *testing.B, db *sql.DB) int {
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM inventory`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkIngestEvents measures the ingester end to end: benchEvents
// events waiting in the stream (as after an outage) fetched, applied and
// acknowledged until the database holds them all. Each round has its own
// stream and database, so that no round inherits another's deliveries.
func BenchmarkIngestEvents(b *testing.B) {
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			total := 0
			for b.Loop() {
				b.StopTimer()
				srv := streamtest.Start(b, "")
				pub := streamtest.Declared(b, srv.URL)
				publishAsync(b, pub.JetStream(), 0)
				dsn := eng.NewDSN(b)
				s, err := store.Open(context.Background(), dsn)
				if err != nil {
					b.Fatal(err)
				}
				db := storetest.RawDB(b, dsn)
				in, err := inventory.New(inventory.Config{Store: s, Stream: streamtest.Connect(b, srv.URL), Logger: benchLogger(), Batch: benchBatch()})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				b.StartTimer()

				go func() { defer close(done); _ = in.Run(ctx) }()
				for countRows(b, db) < benchEvents {
					time.Sleep(5 * time.Millisecond)
				}
				total += benchEvents

				b.StopTimer()
				cancel()
				<-done
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				srv.Stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func publishAsync(b *testing.B, js jetstream.JetStream, round int) {
	for i := range benchEvents {
		ev := benchEvent(round, i)
		data, _ := json.Marshal(ev)
		if _, err := js.PublishAsync(stream.EventsSubject("bench"), data, jetstream.WithMsgID(ev.MsgID())); err != nil {
			b.Fatal(err)
		}
		// Stay under the client's limit of outstanding async publishes.
		if i%1000 == 999 {
			waitPublished(b, js)
		}
	}
	waitPublished(b, js)
}

func waitPublished(b *testing.B, js jetstream.JetStream) {
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing timed out")
	}
}

// BenchmarkRawUpsert is the ceiling: the same rows written by plain
// multi-row upserts of 500 rows, one transaction per batch, no stream,
// no ordering checks.
func BenchmarkRawUpsert(b *testing.B) {
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			dsn := eng.NewDSN(b)
			s, err := store.Open(context.Background(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			// Opened only to migrate the schema.
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			db := storetest.RawDB(b, dsn)
			if !storetest.IsPostgres(dsn) {
				db.SetMaxOpenConns(1)
				if _, err := db.ExecContext(b.Context(), `PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL`); err != nil {
					b.Fatal(err)
				}
			}
			round, total := 0, 0
			for b.Loop() {
				for start := 0; start < benchEvents; start += 500 {
					rawBatch(b, db, dsn, round, start, 500)
				}
				round++
				total += benchEvents
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func rawBatch(b *testing.B, db *sql.DB, dsn string, round, start, n int) {
	values := make([]string, n)
	args := make([]any, 0, 12*n)
	now := time.Now().UTC()
	var ts any = now
	if !storetest.IsPostgres(dsn) {
		ts = now.Format("2006-01-02T15:04:05.000000Z")
	}
	for i := range n {
		ev := benchEvent(round, start+i)
		labels, _ := json.Marshal(ev.Labels)
		values[i] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
		args = append(args, ev.Cluster, ev.APIVersion, ev.Kind, ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion,
			string(labels), "Unknown", "", ts, string(ev.Object))
	}
	q := storetest.Rebind(dsn, `INSERT INTO inventory (cluster, api_version, kind, namespace, name, uid,
		resource_version, labels, health, phase, observed_at, object) VALUES `+strings.Join(values, ", ")+`
		ON CONFLICT (cluster, uid) DO UPDATE SET resource_version = excluded.resource_version,
		labels = excluded.labels, object = excluded.object, observed_at = excluded.observed_at`)
	tx, err := db.BeginTx(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tx.ExecContext(b.Context(), q, args...); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReconcileSnapshot reconciles a snapshot of 100,000 objects
// against 101,000 records, 1,000 of them zombies (re-created between
// rounds, untimed).
func BenchmarkReconcileSnapshot(b *testing.B) {
	const n, zombies = 100000, 1000
	for _, eng := range storetest.Engines() {
		b.Run(eng.Name, func(b *testing.B) {
			s, err := store.Open(context.Background(), eng.NewDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ctx := context.Background()
			row := func(i int, prefix string) store.InventoryRow {
				return store.InventoryRow{Cluster: "bench", APIVersion: "v1", Kind: "ConfigMap", Namespace: "bench",
					Name: fmt.Sprintf("%s-%06d", prefix, i), UID: fmt.Sprintf("%s-uid-%06d-aaaa-bbbb-cccccccccccc", prefix, i),
					ResourceVersion: fmt.Sprint(1000 + i), Health: "Unknown", ObservedAt: time.Now(), Object: []byte(`{}`)}
			}
			items := make(map[string]string, n)
			var rows []store.InventoryRow
			for i := range n {
				r := row(i, "live")
				items[r.UID] = r.ResourceVersion
				rows = append(rows, r)
			}
			write := func(rows []store.InventoryRow) {
				for start := 0; start < len(rows); start += 5000 {
					part := rows[start:min(start+5000, len(rows))]
					if err := s.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Inventory().Upsert(ctx, part); return err }); err != nil {
						b.Fatal(err)
					}
				}
			}
			write(rows)
			round := 0
			for b.Loop() {
				b.StopTimer()
				var zs []store.InventoryRow
				for i := range zombies {
					zs = append(zs, row(i, fmt.Sprintf("zombie%d", round)))
				}
				round++
				write(zs)
				b.StartTimer()
				var rec store.Reconciliation
				err := s.Tx(ctx, func(tx *store.Tx) (err error) {
					rec, err = tx.Inventory().Reconcile(ctx, store.InventorySnapshot{Cluster: "bench", APIVersion: "v1",
						Kind: "ConfigMap", ListResourceVersion: "999999999", TakenAt: time.Now(), Items: items})
					return err
				})
				if err != nil || rec.Removed != zombies {
					b.Fatalf("reconcile: %+v %v", rec, err)
				}
			}
		})
	}
}

// benchLogger shows the ingester's warnings when PURSER_BENCH_LOG is set.
func benchLogger() *slog.Logger {
	if os.Getenv("PURSER_BENCH_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// benchBatch is the ingester's batch size, PURSER_BENCH_BATCH or the
// default.
func benchBatch() int {
	n, _ := strconv.Atoi(os.Getenv("PURSER_BENCH_BATCH"))
	return n
}
