// Package scale_test measures purser at its design size through its real
// parts. TestBenchmarkInventoryDesignSize: the inventory of 100 clusters
// of 10,000 objects each.
package scale_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// TestBenchmarkInventoryDesignSize fills purser's inventory to its design
// size and measures it under churn:
//
//  1. 100 clusters × 10,000 objects (ConfigMaps, Jobs, Argo Workflows and
//     FlinkDeployments with status, 0.5–3 KB each) are published as their
//     agents' ADDED events, interleaved across clusters as 100 agents
//     starting at once publish them, into the embedded JetStream server;
//  2. the ingester, `purser ingester` in a process of its own, ingests
//     them into a fresh PostgreSQL database (the rate, and its memory);
//  3. for at least a minute, 1,000 changes a second across the farm,
//     while the inventory is listed through the HTTP API (one namespace, a
//     label selector, every record page by page) and each cluster sends
//     one snapshot that finds a few zombies.
//
// It is a test that logs its figures (docs/benchmarks.md, "The inventory
// at design size"), skipped unless PURSER_BENCH is set:
//
//	PURSER_BENCH=1 PURSER_TEST_POSTGRES=... go test ./test/scale -run TestBenchmarkInventoryDesignSize -v -timeout 30m
//
// PURSER_BENCH_CLUSTERS, PURSER_BENCH_OBJECTS (per cluster),
// PURSER_BENCH_CHURN_RATE and PURSER_BENCH_CHURN_SECONDS scale it.
func TestBenchmarkInventoryDesignSize(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("set PURSER_BENCH=1 to run the benchmark")
	}
	if os.Getenv("PURSER_TEST_POSTGRES") == "" {
		t.Skip("set PURSER_TEST_POSTGRES: the design size is PostgreSQL's")
	}
	clusters := benchInt("PURSER_BENCH_CLUSTERS", 100)
	objects := benchInt("PURSER_BENCH_OBJECTS", 10_000)
	rate := benchInt("PURSER_BENCH_CHURN_RATE", 1000)
	churnFor := time.Duration(benchInt("PURSER_BENCH_CHURN_SECONDS", 60)) * time.Second
	total := clusters * objects
	ctx := t.Context()

	dsn := storetest.NewPostgresDatabase(t)
	// The API's store: opening it migrates the schema before the
	// ingester starts.
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	db := storetest.RawDB(t, dsn)
	natsURL := startNATS(t)
	pub := streamtest.Declared(t, natsURL)
	f := newFarm(clusters, objects)

	// 1. The backlog: every object's ADDED event, waiting in the stream
	// as after a start of every agent (or an outage of the ingester).
	start := time.Now()
	if err := publishAll(ctx, t, natsURL, f); err != nil {
		t.Fatal(err)
	}
	published := time.Since(start)
	t.Logf("inventory design size: published %d events of %d clusters in %s (%.0f/s)",
		total, clusters, published.Round(100*time.Millisecond), float64(total)/published.Seconds())

	// 2. Ingest, from the ingester's start to the last record committed.
	start = time.Now()
	in := startIngester(t, dsn, natsURL)
	memCtx, stopMem := context.WithCancel(ctx)
	ingestPeak := in.peakMemory(memCtx, time.Second)
	if err := waitFeed(ctx, db, int64(total), 20*time.Minute); err != nil {
		stopMem()
		t.Fatalf("ingest: %v", err)
	}
	ingested := time.Since(start)
	stopMem()
	mem := ingestPeak()
	if n := count(t, db, `SELECT count(*) FROM inventory`); n != int64(total) {
		t.Fatalf("inventory holds %d records, want %d", n, total)
	}
	t.Logf("inventory design size: ingested %d objects in %s: %.0f objects/s",
		total, ingested.Round(100*time.Millisecond), float64(total)/ingested.Seconds())
	t.Logf("inventory design size: ingester memory during ingest: heap in use %.1f MB, RSS %.1f MB",
		mem.heapInUse/1e6, mem.rss/1e6)

	// Statistics, as autovacuum gathers them within a minute of a table
	// filling; the planner's choices below depend on them.
	if _, err := db.ExecContext(ctx, `ANALYZE inventory`); err != nil {
		t.Fatal(err)
	}
	logDatabaseSize(t, db)

	// 3. Churn, and what is measured under it.
	churnCtx, stopChurn := context.WithCancel(ctx)
	memCtx, stopMem = context.WithCancel(ctx)
	churnPeak := in.peakMemory(memCtx, time.Second)
	api := startAPI(t, s)
	probe := newLagProbe(feedSeq(t, db))
	var wg sync.WaitGroup
	var changes atomic.Int64
	churnStart := time.Now()
	wg.Go(func() {
		if err := churn(churnCtx, natsURL, f, rate, &changes); err != nil && churnCtx.Err() == nil {
			t.Errorf("churn: %v", err)
		}
	})
	probeCtx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); probe.run(probeCtx, db) }()

	// The lists repeat until the churn ends; the full listing and the
	// snapshots run once each, and the churn lasts its minute or until
	// they are done if they take longer, so that all are measured under it.
	var lists, once sync.WaitGroup
	var nsLat, selLat, pageLat, snapLat []time.Duration
	var fullTook time.Duration
	var fullRecords, selMatches int
	lists.Go(func() {
		var err error
		nsLat, selLat, selMatches, err = listRepeatedly(churnCtx, api, clusters)
		if err != nil && churnCtx.Err() == nil {
			t.Errorf("lists: %v", err)
		}
	})
	once.Go(func() {
		var err error
		if fullRecords, fullTook, pageLat, err = listEverything(churnCtx, api); err != nil && churnCtx.Err() == nil {
			t.Errorf("full list: %v", err)
		}
	})
	once.Go(func() {
		var err error
		if snapLat, err = snapshotEveryCluster(churnCtx, natsURL, db, f); err != nil && churnCtx.Err() == nil {
			t.Errorf("snapshots: %v", err)
		}
	})
	sleep(ctx, churnFor)
	onceDone := make(chan struct{})
	go func() { once.Wait(); close(onceDone) }()
	select {
	case <-onceDone:
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
		// A benchmark measures; on a machine too slow for it, the figures
		// below say so.
		t.Logf("the full listing and the snapshots are not done after %s of churn; stopping them", churnFor+10*time.Minute)
	}
	stopChurn()
	churned := time.Since(churnStart)
	wg.Wait()
	lists.Wait()
	once.Wait()
	// Every change published is awaited, so that a backlog shows in the
	// lag rather than being left out of it.
	if err := waitCaughtUp(ctx, pub, 3*time.Minute); err != nil {
		t.Logf("after the churn, the ingester has not caught up in 3 minutes (the lags below leave out what it had not ingested): %v", err)
	}
	time.Sleep(100 * time.Millisecond) // the probe's last poll
	stopProbe()
	<-probeDone
	stopMem()
	churnMem := churnPeak()

	lags := probe.lags()
	t.Logf("inventory design size: churn %d changes/s for %s (%d changes, %d records changed seen): ingest lag p50 %s p99 %s",
		rate, churned.Round(100*time.Millisecond), changes.Load(), len(lags), pct(lags, 50), pct(lags, 99))
	t.Logf("inventory design size: list one namespace (first page of 500): p50 %s p99 %s over %d requests",
		pct(nsLat, 50), pct(nsLat, 99), len(nsLat))
	t.Logf("inventory design size: list by label selector app (%d matches on average): p50 %s p99 %s over %d requests",
		selMatches/max(len(selLat), 1), pct(selLat, 50), pct(selLat, 99), len(selLat))
	t.Logf("inventory design size: full list of %d records in %d pages of 1000: %s, page p50 %s p99 %s",
		fullRecords, len(pageLat), fullTook.Round(10*time.Millisecond), pct(pageLat, 50), pct(pageLat, 99))
	t.Logf("inventory design size: snapshot reconcile per cluster (%d objects, %d zombies): p50 %s p99 %s max %s over %d clusters",
		objects, lostPerSnapshot, pct(snapLat, 50), pct(snapLat, 99), pct(snapLat, 100), len(snapLat))
	t.Logf("inventory design size: ingester memory during churn: heap in use %.1f MB, RSS %.1f MB",
		churnMem.heapInUse/1e6, churnMem.rss/1e6)
}

func benchInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// publishAll publishes every object's ADDED event, object i of every
// cluster before object i+1 of any, from four connections (agents
// publish from several goroutines too), each with at most a window of
// acknowledgements outstanding.
func publishAll(ctx context.Context, t testing.TB, natsURL string, f *farm) error {
	const publishers = 4
	errs := make(chan error, publishers)
	var wg sync.WaitGroup
	now := time.Now()
	for p := range publishers {
		js := streamtest.Connect(t, natsURL).JetStream()
		wg.Go(func() {
			for i := p; i < f.objects; i += publishers {
				for c := range f.clusters {
					ev := f.event(c, i, stream.EventAdded, now)
					if err := publishEvent(ctx, js, ev); err != nil {
						errs <- err
						return
					}
				}
				if i%(publishers*10) == p {
					if err := waitPublished(ctx, js); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := waitPublished(ctx, js); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func publishEvent(_ context.Context, js jetstream.JetStream, ev stream.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = js.PublishAsync(stream.EventsSubject(ev.Cluster), data, jetstream.WithMsgID(ev.MsgID()))
	return err
}

func waitPublished(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return errors.New("publishing: no acknowledgement for 2 minutes")
	}
}

// feedSeq is the inventory's change sequence: how many changes were
// committed (inventory_feed.go). Reading it costs one row, where counting
// a million records costs a scan.
func feedSeq(t testing.TB, db *sql.DB) int64 {
	return count(t, db, `SELECT seq FROM inventory_feed WHERE id = 1`)
}

func count(t testing.TB, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFeed waits until the change sequence reaches n.
func waitFeed(ctx context.Context, db *sql.DB, n int64, most time.Duration) error {
	deadline := time.Now().Add(most)
	var seq int64
	for {
		if err := db.QueryRowContext(ctx, `SELECT seq FROM inventory_feed WHERE id = 1`).Scan(&seq); err != nil {
			return err
		}
		if seq >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d changes committed after %s", seq, n, most)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitCaughtUp waits until the ingester's consumer of the events has
// acknowledged every event.
func waitCaughtUp(ctx context.Context, c *stream.Client, most time.Duration) error {
	deadline := time.Now().Add(most)
	for {
		err := streamtest.Consumed(ctx, c, stream.EventsStream, stream.IngesterConsumer)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func logDatabaseSize(t *testing.T, db *sql.DB) {
	var totalBytes, indexBytes, rows, objectBytes int64
	err := db.QueryRowContext(t.Context(), `SELECT pg_total_relation_size('inventory'), pg_indexes_size('inventory'),
		(SELECT count(*) FROM inventory), (SELECT coalesce(sum(length(object)), 0) FROM inventory)`).
		Scan(&totalBytes, &indexBytes, &rows, &objectBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inventory design size: database %.1f MB for %d records: %d B/record (table and TOAST %d B, indexes %d B); objects average %d B of JSON",
		float64(totalBytes)/1e6, rows, totalBytes/rows, (totalBytes-indexBytes)/rows, indexBytes/rows, objectBytes/rows)
	var detail []string
	r, err := db.QueryContext(t.Context(), `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index
		WHERE indrelid = 'inventory'::regclass ORDER BY 2 DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var name string
		var size int64
		if err := r.Scan(&name, &size); err != nil {
			t.Fatal(err)
		}
		detail = append(detail, fmt.Sprintf("%s %d B", name, size/rows))
	}
	t.Logf("indexes per record: %v", detail)
}

// churn publishes rate changes a second, in ticks of 10 ms, until ctx is
// done.
func churn(ctx context.Context, natsURL string, f *farm, rate int, changes *atomic.Int64) error {
	c, err := stream.Connect(ctx, natsURL, stream.Config{Name: "churn"})
	if err != nil {
		return err
	}
	defer c.Close()
	js := c.JetStream()
	rng := rand.New(rand.NewPCG(1, 2))
	const tick = 10 * time.Millisecond
	perTick := float64(rate) * tick.Seconds()
	start := time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return waitPublished(context.Background(), js)
		case <-ticker.C:
		}
		// Catch up on late ticks, so that the rate holds on a busy machine.
		due := int(float64(time.Since(start)/tick) * perTick)
		for ; sent < due; sent++ {
			if err := publishEvent(ctx, js, f.change(rng, time.Now())); err != nil {
				return err
			}
			changes.Add(1)
		}
		// An agent's publishers wait for JetStream's acknowledgements;
		// so does the churn, before the client's window of unacknowledged
		// messages fills (it refuses more past 4,000).
		if js.PublishAsyncPending() > 1000 {
			if err := waitPublished(ctx, js); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// lagProbe reads each change as it commits: a record's seq is its last
// change's number and observed_at the time its event was published (the
// agent's clock, here the generator's), so that the time a poll first
// sees it, minus observed_at, is its ingest lag within the poll's period.
type lagProbe struct {
	mu    sync.Mutex
	after int64
	lag   []time.Duration
}

func newLagProbe(after int64) *lagProbe { return &lagProbe{after: after} }

func (p *lagProbe) run(ctx context.Context, db *sql.DB) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := db.QueryContext(ctx, `SELECT seq, observed_at FROM inventory WHERE seq > $1 ORDER BY seq`, p.after)
		if err == nil {
			now := time.Now()
			p.mu.Lock()
			for rows.Next() {
				var seq int64
				var observed time.Time
				if rows.Scan(&seq, &observed) == nil {
					p.after = max(p.after, seq)
					p.lag = append(p.lag, now.Sub(observed))
				}
			}
			p.mu.Unlock()
			_ = rows.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *lagProbe) lags() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lag)
}

// listRepeatedly lists, until ctx is done, one namespace (the first page
// of 500, what the console shows first) and one app's objects by label
// selector across the farm, in turns, each a different namespace and app
// than the last, with a pause of 50 ms between requests: one user paging
// through the console.
func listRepeatedly(ctx context.Context, api *apiClient, clusters int) (ns, sel []time.Duration, matches int, err error) {
	rng := rand.New(rand.NewPCG(3, 4))
	for ctx.Err() == nil {
		team := fmt.Sprintf("team-%03d", rng.IntN(min(teamNamespaces, clusters*2)))
		p, took, err := api.list(ctx, url.Values{"namespace": {team}, "limit": {"500"}})
		if err != nil {
			return ns, sel, matches, err
		}
		if len(p.Items) == 0 {
			return ns, sel, matches, fmt.Errorf("namespace %s: no records", team)
		}
		ns = append(ns, took)
		sleep(ctx, 50*time.Millisecond)
		app := fmt.Sprintf("%s-app-%d", team, rng.IntN(appsPerNamespace))
		p, took, err = api.list(ctx, url.Values{"labelSelector": {"app=" + app}, "limit": {"1000"}})
		if err != nil {
			return ns, sel, matches, err
		}
		if len(p.Items) == 0 || p.Continue != "" {
			return ns, sel, matches, fmt.Errorf("selector app=%s: %d records, continue %q", app, len(p.Items), p.Continue)
		}
		sel = append(sel, took)
		matches += len(p.Items)
		sleep(ctx, 50*time.Millisecond)
	}
	return ns, sel, matches, nil
}

// listEverything lists every record, pages of 1,000 (the most the API
// gives), following the continue token, as a client mirroring the
// inventory would.
func listEverything(ctx context.Context, api *apiClient) (int, time.Duration, []time.Duration, error) {
	var pages []time.Duration
	n := 0
	cont := ""
	start := time.Now()
	for {
		q := url.Values{"limit": {"1000"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		p, took, err := api.list(ctx, q)
		if err != nil {
			return n, time.Since(start), pages, err
		}
		pages = append(pages, took)
		n += len(p.Items)
		if p.Continue == "" {
			return n, time.Since(start), pages, nil
		}
		cont = p.Continue
	}
}

// lostPerSnapshot is how many objects of each cluster are deleted without
// their events reaching the hub before its snapshot: the zombies it must
// remove.
const lostPerSnapshot = 10

// snapshotEveryCluster sends one snapshot of each cluster in turn, as its
// agent would, and times each from its publication to its commit (the
// cluster's last_snapshot, which the ingester writes in the
// reconciliation's transaction); it checks that the zombies are gone.
func snapshotEveryCluster(ctx context.Context, natsURL string, db *sql.DB, f *farm) ([]time.Duration, error) {
	c, err := stream.Connect(ctx, natsURL, stream.Config{Name: "snapshots"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	js := c.JetStream()
	rng := rand.New(rand.NewPCG(5, 6))
	var out []time.Duration
	for i, mc := range f.clusters {
		// Microseconds: what the database keeps of a time.
		takenAt := time.Now().Truncate(time.Microsecond)
		chunks, zombies := f.snapshot(i, lostPerSnapshot, rng, takenAt)
		start := time.Now()
		for _, ch := range chunks {
			data, err := json.Marshal(ch)
			if err != nil {
				return out, err
			}
			if _, err := js.Publish(ctx, stream.SnapshotsSubject(mc.name), data, jetstream.WithMsgID(ch.MsgID())); err != nil {
				return out, fmt.Errorf("publish snapshot of %s: %w", mc.name, err)
			}
		}
		for {
			var applied bool
			err := db.QueryRowContext(ctx, `SELECT coalesce(last_snapshot >= $2, false) FROM cluster_agents WHERE cluster = $1`,
				mc.name, takenAt).Scan(&applied)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return out, err
			}
			if applied {
				break
			}
			if time.Since(start) > 2*time.Minute {
				return out, fmt.Errorf("snapshot of %s not applied after 2 minutes", mc.name)
			}
			sleep(ctx, 5*time.Millisecond)
			if ctx.Err() != nil {
				return out, nil
			}
		}
		out = append(out, time.Since(start))
		var left int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM inventory WHERE cluster = $1 AND uid = ANY($2)`,
			mc.name, zombies).Scan(&left); err != nil {
			return out, err
		}
		if left != 0 {
			return out, fmt.Errorf("snapshot of %s left %d of its %d zombies", mc.name, left, len(zombies))
		}
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// pct is the p-th percentile of ds (100: the largest), as a duration
// the report reads back in seconds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)].Round(10 * time.Microsecond)
}
