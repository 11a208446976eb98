package main

import (
	"path"
	"regexp"
	"strings"
	"time"
)

// entry is one `go test` invocation of the plan. Each feeds one section of
// docs/benchmarks.md, the block between <!-- bench:Section begin --> and
// <!-- bench:Section end -->.
type entry struct {
	ID      string // unique; -only matches it, the raw file names it
	Section string // the marker id of the table it feeds
	Pkg     string // package directory, "./internal/hub/store/"
	// Bench is the -bench regexp. A Test entry runs a test that logs its
	// figures instead (-run Test -v), and Logs says how to read them.
	Bench     string
	Test      string
	Logs      []logMetric
	Benchtime string // -benchtime; empty for the default of 1s
	Timeout   time.Duration
	Env       []string // added to the environment, "PURSER_BENCH=1"
	// Estimate is the wall time on 2 shared vCPUs (measured by make
	// bench of 2026-11-29 at load 3-7, rounded up), for -dry and the
	// expected total.
	Estimate time.Duration
	// Long entries run only when -only names them: make bench runs the
	// scaled version beside them by default.
	Long bool
}

// logMetric reads figures from a test's log: each submatch of Pattern
// becomes the metric named by the Units at its position; a value that
// parses as a duration ("7.2s") is stored in seconds.
type logMetric struct {
	Pattern *regexp.Regexp
	Units   []string
}

// short is the package's last element, the prefix of every result name
// ("store.BenchmarkClusterCapacity/sqlite").
func (e entry) short() string { return path.Base(strings.TrimSuffix(e.Pkg, "/")) }

// plan lists every benchmark behind docs/benchmarks.md, in the order of the
// document. Each sets the -benchtime its section has always stated; the
// figures of the "-benchtime 3x" ones are the last or the mean of three,
// as each benchmark reports them.
var plan = []entry{
	{ID: "sandbox", Section: "sandbox", Pkg: "./internal/sandbox/",
		Bench: "^BenchmarkClusterStart$", Benchtime: "3x", Timeout: 20 * time.Minute, Estimate: 60 * time.Second},
	{ID: "submit-ceiling", Section: "submit", Pkg: "./internal/hub/store/",
		Bench: "^BenchmarkInsertRunnableWithAuditAndOutbox$", Timeout: 10 * time.Minute, Estimate: 15 * time.Second},
	{ID: "submit-api", Section: "submit", Pkg: "./internal/api/server/",
		Bench: "^BenchmarkSubmit$", Timeout: 10 * time.Minute, Estimate: 15 * time.Second},
	{ID: "stream", Section: "stream", Pkg: "./internal/hub/stream/",
		Bench: "^BenchmarkPublish(Batch)?$", Timeout: 10 * time.Minute, Estimate: 10 * time.Second},
	{ID: "syncer", Section: "syncer", Pkg: "./internal/control/syncer/",
		Bench: "^BenchmarkSyncer$", Benchtime: "1x", Timeout: 40 * time.Minute, Estimate: 2 * time.Minute},
	{ID: "syncer-poll", Section: "syncer-poll", Pkg: "./internal/control/syncer/",
		Bench: "^BenchmarkPoll$", Timeout: 10 * time.Minute, Estimate: 20 * time.Second},
	{ID: "rollout", Section: "rollout", Pkg: "./internal/control/syncer/",
		Bench: "^BenchmarkRolloutDecisions$", Benchtime: "1x", Timeout: 10 * time.Minute, Estimate: 30 * time.Second},
	{ID: "ingest", Section: "inventory", Pkg: "./internal/member/inventory/",
		Bench: "^Benchmark(IngestEvents|RawUpsert|ReconcileSnapshot)$", Benchtime: "3x", Timeout: 30 * time.Minute, Estimate: 90 * time.Second},
	{ID: "event-decode", Section: "event-decode", Pkg: "./internal/hub/stream/",
		Bench: "^BenchmarkDecodeEvent$", Timeout: 10 * time.Minute, Estimate: 15 * time.Second},
	{ID: "upsert", Section: "inventory", Pkg: "./internal/hub/store/",
		Bench: "^BenchmarkUpsertInventory$", Timeout: 10 * time.Minute, Estimate: 10 * time.Second},
	// A quarter of an hour on its own (a million objects published,
	// ingested and listed), in make bench with the rest: the design size
	// is what the document answers for.
	{ID: "inventory-design-size", Section: "inventory-design-size", Pkg: "./test/scale/",
		Test: "TestBenchmarkInventoryDesignSize", Env: []string{"PURSER_BENCH=1"}, Timeout: 45 * time.Minute, Estimate: 12 * time.Minute,
		Logs: inventoryDesignSizeLogs()},
	{ID: "outage-recovery", Section: "outage-recovery", Pkg: "./internal/member/kuberetry/",
		Bench: "^BenchmarkRecoveryAfterOutage$", Benchtime: "1x", Timeout: 10 * time.Minute, Estimate: 50 * time.Second},
	{ID: "agent-memory", Section: "agent-memory", Pkg: "./internal/member/agent/",
		Bench: "^BenchmarkInformerMemory$", Benchtime: "3x", Timeout: 20 * time.Minute, Estimate: 30 * time.Second},
	// The agent against one cluster of 100,000 objects: 12 to 15 minutes
	// at load 20-47, most of it creating the objects; part of make bench,
	// as the design size is what the document answers for. agent-memory
	// is its scaled version (2,000 ConfigMaps).
	{ID: "agent-design-size", Section: "agent-design-size", Pkg: "./internal/member/agent/",
		Bench: "^BenchmarkAgentDesignSize$", Benchtime: "1x", Timeout: 30 * time.Minute, Estimate: 13 * time.Minute},
	{ID: "submitter", Section: "submitter", Pkg: "./internal/control/submitter/",
		Test: "TestBenchmarkSubmit", Env: []string{"PURSER_BENCH=1"}, Timeout: 30 * time.Minute, Estimate: 90 * time.Second,
		Logs: []logMetric{
			{regexp.MustCompile(`direct client-go: ([0-9.]+) objects/s; API accepted ([0-9.]+) runnables/s`),
				[]string{"direct-objects/s", "accepted-runnables/s"}},
			{regexp.MustCompile(`through purser: +([0-9.]+) runnables/s .*p50 (\S+) p99 (\S+)`),
				[]string{"runnables/s", "p50-s", "p99-s"}},
		}},
	{ID: "console", Section: "console", Pkg: "./internal/api/server/",
		Bench: "^BenchmarkConsolePages$", Benchtime: "20x", Timeout: 20 * time.Minute, Estimate: 45 * time.Second},
	{ID: "inventory-list", Section: "inventory-list", Pkg: "./internal/api/server/",
		Bench: "^BenchmarkInventoryList$", Timeout: 40 * time.Minute, Estimate: 90 * time.Second},
	{ID: "k8s-list", Section: "k8s-list", Pkg: "./internal/api/kubeapi/",
		Bench: "^BenchmarkK8sList$", Timeout: 30 * time.Minute, Estimate: 4 * time.Minute},
	{ID: "k8s-apply", Section: "k8s-apply", Pkg: "./internal/api/server/",
		Bench: "^BenchmarkKubeApply$", Benchtime: "3s", Timeout: 10 * time.Minute, Estimate: 45 * time.Second},
	{ID: "k8s-watch", Section: "k8s-watch", Pkg: "./internal/api/kubeapi/",
		Bench: "^BenchmarkK8sWatches$", Benchtime: "1x", Timeout: 10 * time.Minute, Estimate: 40 * time.Second},
	{ID: "k8s-watch-latency", Section: "k8s-watch-latency", Pkg: "./internal/api/kubeapi/",
		Bench: "^BenchmarkK8sWatchLatency$", Benchtime: "1x", Timeout: 10 * time.Minute, Estimate: 40 * time.Second},
	{ID: "capacity", Section: "capacity", Pkg: "./internal/hub/store/",
		Bench: "^BenchmarkClusterCapacity$", Timeout: 10 * time.Minute, Estimate: 30 * time.Second},
	{ID: "placement-scale", Section: "placement-scale", Pkg: "./internal/control/submitter/",
		Test: "TestBenchmarkPlacementScale", Env: []string{"PURSER_BENCH=1"}, Timeout: 60 * time.Minute, Estimate: 5 * time.Minute,
		Logs: []logMetric{placementScale("sqlite"), placementScale("postgres")}},
	{ID: "kueue-baseline", Section: "kueue-baseline", Pkg: "./internal/control/submitter/",
		Test: "TestBenchmarkKueueBaselineOneCohort", Env: []string{"PURSER_BENCH=1"}, Timeout: 60 * time.Minute, Estimate: 3 * time.Minute,
		Logs: []logMetric{kueueBaseline("1")}},
	// The whole baseline, 15,000 workloads: make bench BENCH_FLAGS="-only kueue-baseline-full".
	{ID: "kueue-baseline-full", Section: "kueue-baseline", Pkg: "./internal/control/submitter/",
		Test: "TestBenchmarkKueueBaseline", Env: []string{"PURSER_BENCH=1"}, Timeout: 90 * time.Minute, Estimate: 15 * time.Minute,
		Logs: []logMetric{kueueBaseline("5")}, Long: true},
	{ID: "fair-share", Section: "fair-share", Pkg: "./internal/control/submitter/",
		Test: "TestBenchmarkFairShare", Env: []string{"PURSER_BENCH=1"}, Timeout: 20 * time.Minute, Estimate: 90 * time.Second,
		Logs: fairShareLogs()},
	// Two ticks of a minute each per engine, so at least two minutes of
	// wall time each, most of it waiting for the second tick.
	{ID: "schedules", Section: "schedules", Pkg: "./internal/control/scheduler/",
		Test: "TestBenchmarkSchedules", Env: []string{"PURSER_BENCH=1"}, Timeout: 30 * time.Minute, Estimate: 8 * time.Minute,
		Logs: []logMetric{schedulesLag("sqlite"), schedulesLag("postgres")}},
	{ID: "drill", Section: "drill", Pkg: "./internal/control/drill/",
		Test: "TestBenchmarkDrill", Env: []string{"PURSER_BENCH=1"}, Timeout: 20 * time.Minute, Estimate: time.Minute,
		Logs: []logMetric{drillLog("sqlite"), drillLog("postgres")}},
	{ID: "health", Section: "health", Pkg: "./internal/member/health/",
		Bench: "^BenchmarkInterpret$", Timeout: 5 * time.Minute, Estimate: 10 * time.Second},
	{ID: "dc-accept", Section: "dc-accept", Pkg: "./test/soak/",
		Test: "TestBenchmarkDCAccept", Env: []string{"PURSER_BENCH=1"}, Timeout: 30 * time.Minute, Estimate: 3 * time.Minute,
		Logs: []logMetric{
			dcAccept("sync-5ms-serial"), dcAccept("sync-5ms-grouped"), dcAccept("async-5ms-grouped"), dcAccept("sync-0ms-grouped"),
		}},
	// The loss of the database primary's DC, on the same farm: Patroni's
	// promotion and the components' reconnect, in the test CI runs too.
	{ID: "dc-primary-loss", Section: "dc-primary-loss", Pkg: "./test/soak/",
		Test: "TestDCPrimaryLoss", Timeout: 30 * time.Minute, Estimate: 3 * time.Minute,
		Logs: []logMetric{
			{regexp.MustCompile(`RTO: first write accepted (\S+) after the power loss \(by generation \d+\): \S+ promoted after (\S+), the first write (\S+) later`),
				[]string{"rto-s", "promoted-s", "reconnect-s"}},
			{regexp.MustCompile(`the longest wait between accepted writes: (\S+)`), []string{"return-gap-s"}},
		}},
	{ID: "failover-application", Section: "failover-application", Pkg: "./internal/control/failover/",
		Bench: "^BenchmarkFailoverApplication$", Benchtime: "3x", Timeout: 30 * time.Minute, Estimate: 60 * time.Second},
	// 1x: each iteration starts a dedicated cluster named after the
	// benchmark, and a second iteration's cannot start while the first's
	// still runs (it is stopped when the benchmark ends).
	{ID: "failover-cluster", Section: "failover-cluster", Pkg: "./internal/control/failover/",
		Bench: "^BenchmarkFailoverCluster$", Benchtime: "1x", Timeout: 60 * time.Minute, Estimate: 6 * time.Minute},
	{ID: "failover-application-many", Section: "failover-application-many", Pkg: "./internal/control/failover/",
		Bench: "^BenchmarkFailoverApplicationMany$", Benchtime: "1x", Timeout: 30 * time.Minute, Estimate: 90 * time.Second},
	{ID: "drain", Section: "drain", Pkg: "./internal/control/failover/",
		Bench: "^BenchmarkDrain$", Benchtime: "1x", Timeout: 20 * time.Minute, Estimate: 90 * time.Second},
	{ID: "drill-flink", Section: "drill-flink", Pkg: "./internal/control/failover/",
		Bench: "^BenchmarkDrillFlink$", Benchtime: "1x", Timeout: 30 * time.Minute, Estimate: 90 * time.Second},
	// Karmada v1.18.2 beside purser on the same clusters; its first run
	// builds Karmada into the sandbox cache (about 10 min more, cold).
	{ID: "karmada", Section: "karmada", Pkg: "./internal/control/failover/",
		Test: "TestBenchmarkKarmada", Env: []string{"PURSER_BENCH=1"}, Timeout: 60 * time.Minute, Estimate: 9 * time.Minute,
		Logs: karmadaLogs()},
}

// The sections: one table each, in the document's order. A cell names a
// result as "package.Benchmark/sub" and a unit; a ratio divides two of
// them, both from the same run.
var sections = []section{
	{ID: "sandbox",
		Columns: []string{"figure", "value", "how"},
		Rows: [][]cell{
			{lit("start of one cluster, nothing to Ready node"), secs("sandbox.BenchmarkClusterStart/argo=false", 1), lit("`BenchmarkClusterStart/argo=false`")},
			{lit("start of one cluster with the Argo CRDs and controller"), secs("sandbox.BenchmarkClusterStart/argo=true", 1), lit("`argo=true`")},
			{lit("memory of one cluster right after start (RSS of its processes)"), metric("sandbox.BenchmarkClusterStart/argo=false", "MB-rss/cluster", 0, " MB"), lit("same benchmark, `MB-rss/cluster`")},
			{lit("memory with Argo"), metric("sandbox.BenchmarkClusterStart/argo=true", "MB-rss/cluster", 0, " MB"), lit("same, `argo=true`")},
			{lit("Argo's cost: start time / memory, with over without"),
				join(" / ", ratio(secs("sandbox.BenchmarkClusterStart/argo=true", 1), secs("sandbox.BenchmarkClusterStart/argo=false", 1), 2),
					ratio(metric("sandbox.BenchmarkClusterStart/argo=true", "MB-rss/cluster", 0, ""), metric("sandbox.BenchmarkClusterStart/argo=false", "MB-rss/cluster", 0, ""), 2)),
				lit("same run")},
		}},
	{ID: "submit",
		Columns: []string{"engine", "ceiling: raw transactions/s, serial / 16 clients (`store.BenchmarkInsertRunnableWithAuditAndOutbox`)",
			"API: accepted submissions/s, 16 clients (`server.BenchmarkSubmit`)", "API p50 / p99 accept latency", "API / best ceiling"},
		Rows: [][]cell{
			submitRow("SQLite (WAL, synchronous=FULL)", "sqlite"),
			submitRow("PostgreSQL (default fsync)", "postgres"),
		}},
	{ID: "stream",
		Columns: []string{"figure", "value", "how"},
		Rows: [][]cell{
			{lit("one message at a time, waiting for each acknowledgement"),
				join(" ", perSec("stream.BenchmarkPublish", 0, " messages/s"), join("", lit("("), micros("stream.BenchmarkPublish", 0), lit(" each)"))),
				lit("`stream.BenchmarkPublish`")},
			{lit("pipelined batches of 100"), metric("stream.BenchmarkPublishBatch", "msgs/s", 0, " messages/s"), lit("`stream.BenchmarkPublishBatch`")},
			{lit("pipelined / one at a time"),
				ratio(metric("stream.BenchmarkPublishBatch", "msgs/s", 0, ""), perSec("stream.BenchmarkPublish", 0, ""), 2), lit("same run")},
		}},
	{ID: "syncer",
		Columns: []string{"figure", "value", "anchor"},
		Rows: [][]cell{
			{lit("converge 1,000 ConfigMap deployables onto 3 clusters"),
				join(" ", metric("syncer.BenchmarkSyncer", "s/converge", 1, " s"), join("", lit("("), metric("syncer.BenchmarkSyncer", "objects/s", 0, " objects/s"), lit(")"))),
				lit("bounded by the client limit of 50 requests/s per cluster: a new object costs a read and an apply, so 75 objects/s for three")},
			{lit("drift repair (an object edited behind purser's back), p50 / p99"),
				join(" / ", metric("syncer.BenchmarkSyncer", "ms/repair-p50", 0, " ms"), metric("syncer.BenchmarkSyncer", "ms/repair-p99", 0, " ms")),
				lit("Argo CD reconciles every 120–180 s, OCM's work agent every 4–6 min (their documentation); goal under 2 s")},
			{lit("writes per idle resync, to the clusters / to the database"),
				join(" / ", metric("syncer.BenchmarkSyncer", "kube-writes/idle-resync", 0, ""), metric("syncer.BenchmarkSyncer", "db-writes/idle-resync", 0, "")),
				lit("goal zero")},
		}},
	{ID: "syncer-poll",
		Columns: []string{"poll of 10,000 deployables", "SQLite", "PostgreSQL"},
		Rows: [][]cell{
			{lit("idle: the table's fingerprint only (every second while nothing changes)"),
				millis("syncer.BenchmarkPoll/sqlite/idle", 2), millis("syncer.BenchmarkPoll/postgres/idle", 2)},
			{lit("full: every row read and compared (after a change, and every 30th poll)"),
				millis("syncer.BenchmarkPoll/sqlite/full", 1), millis("syncer.BenchmarkPoll/postgres/full", 1)},
			{lit("full / idle, same run"),
				ratio(millis("syncer.BenchmarkPoll/sqlite/full", 1), millis("syncer.BenchmarkPoll/sqlite/idle", 2), 0),
				ratio(millis("syncer.BenchmarkPoll/postgres/full", 1), millis("syncer.BenchmarkPoll/postgres/idle", 2), 0)},
		}},
	{ID: "rollout",
		Columns: []string{"rollout in 5 waves, minSuccessSeconds 0", "one decision pass", "passes per wave", "status writes per deployable per wave"},
		Rows: [][]cell{
			{lit("1 deployable over 100 clusters"),
				metric("syncer.BenchmarkRolloutDecisions/1x100clusters", "ms/pass", 1, " ms"),
				metric("syncer.BenchmarkRolloutDecisions/1x100clusters", "passes/wave", 1, ""),
				metric("syncer.BenchmarkRolloutDecisions/1x100clusters", "writes/deployable/wave", 1, "")},
			{lit("1,000 deployables at once over 10 clusters"),
				metric("syncer.BenchmarkRolloutDecisions/1000x10clusters", "ms/pass", 0, " ms"),
				metric("syncer.BenchmarkRolloutDecisions/1000x10clusters", "passes/wave", 1, ""),
				metric("syncer.BenchmarkRolloutDecisions/1000x10clusters", "writes/deployable/wave", 1, "")},
		}},
	{ID: "outage-recovery",
		Columns: []string{"informer over", "object created right after a 20 s kube-apiserver outage, seen after"},
		Rows: [][]cell{
			{lit("the plain dynamic client (client-go's reflector backoff)"), metric("kuberetry.BenchmarkRecoveryAfterOutage", "s/plain", 2, " s")},
			{lit("`kuberetry.Dynamic` (what the agent and the syncer use)"), metric("kuberetry.BenchmarkRecoveryAfterOutage", "s/patient", 2, " s")},
		}},
	{ID: "inventory",
		Columns: []string{"figure", "SQLite", "PostgreSQL", "goal"},
		Rows: [][]cell{
			{lit("ingest, events/s (stream → batch → one transaction → ack)"),
				metric("inventory.BenchmarkIngestEvents/sqlite", "events/s", 0, ""), metric("inventory.BenchmarkIngestEvents/postgres", "events/s", 0, ""),
				lit("≥ 10,000/s on PostgreSQL")},
			{lit("ceiling: raw batched upsert of the same rows, rows/s"),
				metric("inventory.BenchmarkRawUpsert/sqlite", "rows/s", 0, ""), metric("inventory.BenchmarkRawUpsert/postgres", "rows/s", 0, ""), lit("")},
			{lit("ingest / ceiling, same run"),
				ratio(metric("inventory.BenchmarkIngestEvents/sqlite", "events/s", 0, ""), metric("inventory.BenchmarkRawUpsert/sqlite", "rows/s", 0, ""), 2),
				ratio(metric("inventory.BenchmarkIngestEvents/postgres", "events/s", 0, ""), metric("inventory.BenchmarkRawUpsert/postgres", "rows/s", 0, ""), 2),
				lit("≥ 0.5")},
			{lit("`store.Inventory.Upsert` alone, 500 new rows per transaction, rows/s"),
				metric("store.BenchmarkUpsertInventory/sqlite", "rows/s", 0, ""), metric("store.BenchmarkUpsertInventory/postgres", "rows/s", 0, ""), lit("")},
			{lit("snapshot reconciliation of 100,000 records (1,000 zombies)"),
				secs("inventory.BenchmarkReconcileSnapshot/sqlite", 2), secs("inventory.BenchmarkReconcileSnapshot/postgres", 2), lit("< 2 s")},
		}},
	{ID: "event-decode",
		Columns: []string{"event, as the design-size farm's agents publish it", "encoding/json: the event, then its object", "one pass (`stream.DecodeEvent`)", "one pass / encoding/json, same run"},
		Rows: [][]cell{
			{lit("a Job (1.4 KB), judged from its object"),
				metric("stream.BenchmarkDecodeEvent/job/encoding-json", "ns/op", 0, " ns"), metric("stream.BenchmarkDecodeEvent/job/one-pass", "ns/op", 0, " ns"),
				ratio(metric("stream.BenchmarkDecodeEvent/job/one-pass", "ns/op", 0, ""), metric("stream.BenchmarkDecodeEvent/job/encoding-json", "ns/op", 0, ""), 2)},
			{lit("a ConfigMap (2.2 KB), judged by its kind"),
				metric("stream.BenchmarkDecodeEvent/configmap/encoding-json", "ns/op", 0, " ns"), metric("stream.BenchmarkDecodeEvent/configmap/one-pass", "ns/op", 0, " ns"),
				ratio(metric("stream.BenchmarkDecodeEvent/configmap/one-pass", "ns/op", 0, ""), metric("stream.BenchmarkDecodeEvent/configmap/encoding-json", "ns/op", 0, ""), 2)},
		}},
	{ID: "inventory-design-size",
		Columns: []string{"figure (100 clusters × 10,000 objects, PostgreSQL)", "measured", "goal"},
		Rows:    inventoryDesignSizeRows(),
	},
	{ID: "agent-memory",
		Columns: []string{"informer over 2,000 ConfigMaps written by `kubectl apply`", "heap per object", "goal"},
		Rows: [][]cell{
			{lit("plain informer"), metric("agent.BenchmarkInformerMemory/untrimmed", "B/object", 0, " B"), lit("")},
			{lit("trimmed (`agent.Trim`: no managedFields, no last-applied annotation, Secret data hashed)"), metric("agent.BenchmarkInformerMemory/trimmed", "B/object", 0, " B"), lit("")},
			{lit("trimmed / plain, same run"),
				ratio(metric("agent.BenchmarkInformerMemory/trimmed", "B/object", 0, ""), metric("agent.BenchmarkInformerMemory/untrimmed", "B/object", 0, ""), 2),
				lit("≤ 0.5")},
		}},
	{ID: "agent-design-size",
		Columns: []string{"100,000 objects on one cluster", "the agent (trimmed)", "plain informer (dynamic, untrimmed)", "typed informer", "agent / plain", "goal"},
		Rows: [][]cell{
			designRow("**heap per tracked object** (after GC)", "B/object", 0, " B", lit("≤ 0.5 of plain")),
			designRow("heap of the caches", "MB-heap", 0, " MB", lit("")),
			designRow("initial sync: start to every cache listed", "sync-s", 1, " s", lit("")),
			designRow("CPU time of the process, start to synced (the agent: to every initial event published)", "cpu-s", 1, " s", lit("")),
			{lit("RSS once synced (peak)"),
				designRSS("agent"), designRSS("plain"), designRSS("typed"),
				ratio(metric(agentDesignSize, "agent-MB-rss", 0, ""), metric(agentDesignSize, "plain-MB-rss", 0, ""), 2), lit("")},
			{lit("start to every initial event acknowledged by JetStream"),
				join(" ", metric(agentDesignSize, "agent-published-s", 1, " s"), join("", lit("("), ratio(metric(agentDesignSize, "objects", 0, ""), metric(agentDesignSize, "agent-published-s", 3, ""), 0), lit(" events/s)"))),
				lit(""), lit(""), lit(""), lit("")},
			{lit("start to the first snapshot acknowledged (during the initial events)"),
				metric(agentDesignSize, "agent-first-snapshot-s", 1, " s"), lit(""), lit(""), lit(""), lit("")},
			{lit("**one full snapshot**: cache list to last chunk acknowledged, median of 3 (max)"),
				join(" ", metric(agentDesignSize, "snapshot-s", 2, " s"), join("", lit("("), metric(agentDesignSize, "snapshot-max-s", 2, " s"), lit(")"))),
				lit(""), lit(""), lit(""), lit("a few seconds (< 3 s)")},
			{lit("snapshot size"),
				join(" ", metric(agentDesignSize, "snapshot-MB", 1, " MB in"), metric(agentDesignSize, "snapshot-chunks", 0, " chunks")),
				lit(""), lit(""), lit(""), lit("")},
			{lit("objects in the caches (created at)"),
				join(" ", metric(agentDesignSize, "objects", 0, ""), join("", lit("("), metric(agentDesignSize, "created-objects/s", 0, "/s"), lit(")"))),
				lit(""), lit(""), lit(""), lit("")},
		}},
	{ID: "submitter",
		Columns: []string{"objects", "client-go direct", "through purser", "purser / direct", "accept → created p50 / p99", "API accepted"},
		Rows: [][]cell{
			{lit("1,000"),
				metric("submitter.TestBenchmarkSubmit", "direct-objects/s", 1, " objects/s"),
				metric("submitter.TestBenchmarkSubmit", "runnables/s", 1, " runnables/s"),
				join(" ", percent(metric("submitter.TestBenchmarkSubmit", "runnables/s", 1, ""), metric("submitter.TestBenchmarkSubmit", "direct-objects/s", 1, "")), lit("(goal ≥ 80 %)")),
				join(" / ", metric("submitter.TestBenchmarkSubmit", "p50-s", 2, " s"), metric("submitter.TestBenchmarkSubmit", "p99-s", 1, " s")),
				metric("submitter.TestBenchmarkSubmit", "accepted-runnables/s", 0, " runnables/s")},
		}},
	{ID: "console",
		Columns: []string{"page (call)", "SQLite", "PostgreSQL"},
		Rows: [][]cell{
			consoleRow("runnables (`limit=200`)", "runnables"),
			consoleRow("runnables by phase in a namespace", "runnables-by-phase"),
			consoleRow("inventory (`fields=meta&limit=500`)", "inventory"),
			consoleRow("inventory with a label selector (`app=web-7`: 1,000 matches among 100,000)", "inventory-selector"),
			consoleRow("history (`limit=500`)", "history"),
		}},
	{ID: "inventory-list",
		Columns: []string{"listing", "kube-apiserver", "purser, SQLite", "ratio", "purser, PostgreSQL", "ratio"},
		Rows: [][]cell{
			listRow("first page (`limit=500`)", "first-page", true),
			listRow("all 10,001, pages of 500", "all", true),
			listRow("`labelSelector=shard=7` (100 matches)", "selector", false),
			{lit("bytes per object in the answer"),
				metric("server.BenchmarkInventoryList/kube-apiserver/all", "B/object", 0, ""), metric("server.BenchmarkInventoryList/purser-sqlite/all", "B/object", 0, ""), lit(""),
				metric("server.BenchmarkInventoryList/purser-postgres/all", "B/object", 0, ""), lit("")},
		}},
	{ID: "k8s-list",
		Columns: []string{"listing, every page of 500 (`kubectl get --raw`)", "kube-apiserver", "purser `/k8s`, SQLite", "ratio"},
		Rows: [][]cell{
			k8sListRow("10,000 ConfigMaps as JSON", "json"),
			k8sListRow("10,000 ConfigMaps as a Table (what `kubectl get` asks for)", "table"),
			k8sListRow("`labelSelector=shard=7` (100 matches)", "selector"),
		}},
	{ID: "k8s-apply",
		Columns: []string{"engine", "PUT /api/v1/deployables, writes/s", "server-side apply through /k8s, writes/s", "apply / REST"},
		Rows: [][]cell{
			k8sApplyRow("SQLite (WAL, synchronous=FULL)", "sqlite"),
			k8sApplyRow("PostgreSQL (default fsync)", "postgres"),
		}},
	{ID: "k8s-watch",
		Columns: []string{"open watches of one selection", "change to its event at the last watcher, p50 / max", "database reads/s", "CPU of the process (API and watchers)"},
		Rows: [][]cell{
			k8sWatchRow("1", "watches=1"),
			k8sWatchRow("1,000", "watches=1000"),
			k8sWatchRow("1,000, the feed woken by the ingester's word on NATS", "watches=1000/pushed"),
		}},
	{ID: "k8s-watch-latency",
		Columns: []string{"`kubectl get -w` of one namespace's ConfigMaps", "member change to the line at kubectl, p50 / p99 (50 changes)"},
		Rows: [][]cell{
			k8sLatencyRow("directly on the member's kube-apiserver", "kube-apiserver"),
			k8sLatencyRow("through purser's `/k8s` (agent, NATS, ingester, SQLite, feed)", "purser"),
			{lit("purser / kube-apiserver, p50"), ratio(metric("kubeapi.BenchmarkK8sWatchLatency", "purser-ms-p50", 1, ""),
				metric("kubeapi.BenchmarkK8sWatchLatency", "kube-apiserver-ms-p50", 1, ""), 1)},
		}},
	{ID: "capacity",
		Columns: []string{"engine", "per placement"},
		Rows: [][]cell{
			{lit("SQLite"), millis("store.BenchmarkClusterCapacity/sqlite", 1)},
			{lit("PostgreSQL"), millis("store.BenchmarkClusterCapacity/postgres", 1)},
		}},
	{ID: "placement-scale",
		Columns: []string{"engine", "placed per second", "decision p50 / p99", "fullest cluster", "goal"},
		Rows: [][]cell{
			placementScaleRow("SQLite", "sqlite"),
			placementScaleRow("PostgreSQL", "postgres"),
		}},
	{ID: "kueue-baseline",
		Columns: []string{"figure", "Kueue (its rangespec: mean of 5 runs)", "purser, 1 of 5 cohorts (3,000 workloads)", "purser, the whole baseline (15,000)"},
		Rows: [][]cell{
			{lit("wall time, first creation to last finish"), lit("351.1 s"), kueueFig("1", "wall-s", 1, " s"), kueueFig("5", "wall-s", 1, " s")},
			{lit("usage: CPU time used / (nominal quota × wall time)"), lit("58.7 %"), kueueFig("1", "usage-%", 1, " %"), kueueFig("5", "usage-%", 1, " %")},
			{lit("mean time to admission, large (20 cpu, 1 s, priority 200)"), lit("6.7 s"), kueueFig("1", "large-s", 2, " s"), kueueFig("5", "large-s", 2, " s")},
			{lit("mean time to admission, medium (5 cpu, 0.5 s, priority 100)"), lit("76.8 s"), kueueFig("1", "medium-s", 2, " s"), kueueFig("5", "medium-s", 2, " s")},
			{lit("mean time to admission, small (1 cpu, 0.2 s, priority 50)"), lit("215.5 s"), kueueFig("1", "small-s", 2, " s"), kueueFig("5", "small-s", 2, " s")},
			{lit("submissions behind their schedule, p99 (the generator's own lag)"), lit(""), kueueFig("1", "lag-s", 2, " s"), kueueFig("5", "lag-s", 2, " s")},
		}},
	{ID: "karmada",
		Columns: []string{"scenario", "purser", "Karmada", "purser/Karmada", "purser right?", "Karmada right?"},
		Rows:    karmadaRows(),
	},
	{ID: "fair-share",
		Columns: []string{"time", "fair-a: share of the farm's cpu / fair share", "fair-b: share / fair share", "queued, fair-a / fair-b"},
		Rows:    fairShareRows(),
	},
	{ID: "schedules",
		Columns: []string{"engine", "tick to accepted, p50 / p99 / max", "p99 of the first tick / of the second", "a scheduler started at a tick (nothing reviewed ahead): p50 / p99", "ceiling: as many plain creates through the gate, one loop", "its p50 / p99 / max from the loop's start", "goal"},
		Rows:    [][]cell{schedulesRow("SQLite", "sqlite"), schedulesRow("PostgreSQL", "postgres")}},
	{ID: "drill",
		Columns: []string{"engine", "dry run of a DC (2,000 runnables to move): snapshot / what-if / total", "headroom of the 5 DCs on one snapshot", "goal"},
		Rows:    [][]cell{drillRow("SQLite", "sqlite"), drillRow("PostgreSQL", "postgres")}},
	{ID: "drill-flink",
		Columns: []string{"how 100 FlinkDeployments leave cluster a", "downtime per job, p50 / max", "all moved", "restored from", "jobs seen running on both clusters"},
		Rows: [][]cell{
			{lit("**a real drill of cluster a** (`POST /api/v1/drills`): cordon, planned moves in the queue's order at the eviction rate"),
				join(" / ", metric(drillFlink, "move-downtime-p50-s", 2, " s"), metric(drillFlink, "move-downtime-max-s", 2, " s")),
				join(", ", metric(drillFlink, "drill-total-s", 1, " s"), join(" ", lit("planned"), metric(drillFlink, "drill-planned-s", 1, " s"))),
				join(" ", lit("the savepoint each job's stop wrote; not from it:"), metric(drillFlink, "drill-not-from-own-savepoint", 0, "")),
				metric(drillFlink, "drill-two-running", 0, "")},
			{lit("failover of the same jobs, same run (every JobManager fails at once; tolerationSeconds 3 s)"),
				join(" / ", metric(drillFlink, "failover-downtime-p50-s", 2, " s"), metric(drillFlink, "failover-downtime-max-s", 2, " s")),
				metric(drillFlink, "failover-total-s", 1, " s"),
				join(" ", lit("each job's last completed checkpoint (what followed is reprocessed); not from it:"), metric(drillFlink, "failover-not-from-last-checkpoint", 0, "")),
				lit("")},
		}},
	{ID: "health",
		Columns: []string{"object", "interpreter", "per verdict", "allocations"},
		Rows: [][]cell{
			healthRow("Deployment", "built-in", "Deployment"),
			healthRow("FlinkDeployment (RECONCILING, image pull error)", "built-in", "FlinkDeployment"),
			healthRow("Widget", "CEL rule", "CELRule"),
			{lit("CEL rule / built-in Deployment, same run"), lit(""),
				ratio(micros("health.BenchmarkInterpret/CELRule", 2), micros("health.BenchmarkInterpret/Deployment", 2), 1), lit("")},
		}},
	{ID: "dc-accept",
		Columns: []string{"link between DCs", "PostgreSQL standby in another DC", "commits", "accepted submissions/s", "p50 / p99"},
		Rows: [][]cell{
			dcAcceptRow("5 ms round trip", "synchronous", "one per change", "sync-5ms-serial"),
			dcAcceptRow("5 ms round trip", "synchronous", "grouped", "sync-5ms-grouped"),
			dcAcceptRow("5 ms round trip", "asynchronous (a commit waits for no other DC)", "grouped", "async-5ms-grouped"),
			dcAcceptRow("no delay", "synchronous", "grouped", "sync-0ms-grouped"),
		}},
	{ID: "dc-primary-loss",
		Columns: []string{"the primary's DC loses power under a stream of writes", "time", "bound or goal"},
		Rows: [][]cell{
			{lit("**write RTO: the loss to the first write accepted in a surviving DC**"),
				metric("soak.TestDCPrimaryLoss", "rto-s", 1, " s"), lit("goal: under 12 s")},
			{lit("the loss to the synchronous standby accepting writes (Patroni: the lost primary's leader key runs out, the standby takes it and promotes)"),
				metric("soak.TestDCPrimaryLoss", "promoted-s", 1, " s"), lit("`ttl` 20 s: the leader key's lease, the shortest Patroni 3.2 and later accept")},
			{lit("the promotion to the first write accepted (the components find the new primary; the writer's next retry)"),
				metric("soak.TestDCPrimaryLoss", "reconnect-s", 1, " s"), lit("the writer retries with a backoff of up to 2 s")},
			{lit("the lost DC back (its node rejoins as a standby): the longest wait between accepted writes in the 20 s after"),
				metric("soak.TestDCPrimaryLoss", "return-gap-s", 1, " s"), lit("a write every 50 ms")},
		}},
	{ID: "failover-application",
		Columns: []string{"part", "time", "configured"},
		Rows: [][]cell{
			{lit("**unhealthy status to the new copy created, beyond `tolerationSeconds`**"),
				metric("failover.BenchmarkFailoverApplication", "created-beyond-toleration-s", 2, " s"),
				lit("goal: at most 1 s")},
			{lit("detection + eviction beyond `tolerationSeconds` (ingester sees Unhealthy; controller wakes at the toleration's end)"),
				metric("failover.BenchmarkFailoverApplication", "detect+evict-s", 2, " s"),
				join("", lit("toleration "), metric("failover.BenchmarkFailoverApplication", "toleration-s", 0, " s"))},
			{lit("placement (old copy deleted and confirmed gone, queued, placed, created)"),
				metric("failover.BenchmarkFailoverApplication", "place-s", 2, " s"), lit("")},
			{lit("running (simulated operator to RUNNING, agent, ingester to Healthy)"),
				metric("failover.BenchmarkFailoverApplication", "running-s", 2, " s"), lit("simulator start delay 0.3 s")},
			{lit("total, fault to running elsewhere"),
				metric("failover.BenchmarkFailoverApplication", "total-s", 2, " s"),
				join(" ", diff(metric("failover.BenchmarkFailoverApplication", "total-s", 2, " s"), metric("failover.BenchmarkFailoverApplication", "toleration-s", 2, "")), lit("beyond the toleration"))},
		}},
	{ID: "failover-cluster",
		Columns: []string{"runnables", "detection (first failed probe)", "first running on a", "all running on a", "pace, first to last",
			"beyond the grace", "not restored from their exact checkpoint", "configured"},
		Rows: [][]cell{
			clusterRow("1", "1", lit("3 × 200 ms probes + 2 s grace")),
			clusterRow("**1,000, as shipped**", "1000", join("", lit("same; eviction rate "),
				metric("failover.BenchmarkFailoverCluster/1000", "eviction-rate", 0, "/s"), lit(", client limit "),
				metric("failover.BenchmarkFailoverCluster/1000", "client-qps", 0, " requests/s per cluster"))),
			clusterRow("**1,000, tuned**", "1000-tuned", join("", lit("same; eviction rate "),
				metric("failover.BenchmarkFailoverCluster/1000-tuned", "eviction-rate", 0, "/s"), lit(", client limit "),
				metric("failover.BenchmarkFailoverCluster/1000-tuned", "client-qps", 0, " requests/s per cluster"))),
			clusterRow("1, purser's defaults", "defaults", lit("3 × 2 s probes + 40 s grace, failover pass 1 s")),
		}},
	{ID: "failover-application-many",
		Columns: []string{"jobs failing at once", "running Healthy on the other cluster, beyond `tolerationSeconds`: p50 / max",
			"fault to the last running", "not restored from their exact checkpoint", "configured"},
		Rows: [][]cell{
			{metric("failover.BenchmarkFailoverApplicationMany", "jobs", 0, ""),
				join(" / ", metric("failover.BenchmarkFailoverApplicationMany", "p50-beyond-toleration-s", 2, " s"),
					metric("failover.BenchmarkFailoverApplicationMany", "max-beyond-toleration-s", 2, " s")),
				metric("failover.BenchmarkFailoverApplicationMany", "all-running-s", 2, " s"),
				metric("failover.BenchmarkFailoverApplicationMany", "mismatches", 0, ""),
				join("", lit("toleration "), metric("failover.BenchmarkFailoverApplicationMany", "toleration-s", 0, " s"),
					lit(", eviction rate "), metric("failover.BenchmarkFailoverApplicationMany", "eviction-rate", 0, "/s"),
					lit(", failover pass 1 s, relay poll 1 s (the defaults)"))},
		}},
	{ID: "drain",
		Columns: []string{"how the jobs leave", "jobs", "downtime per job, p50 / max", "all moved", "restored from"},
		Rows: [][]cell{
			{lit("**`purser drain`: planned moves, one at a time**"), metric("failover.BenchmarkDrain", "jobs", 0, ""),
				join(" / ", metric("failover.BenchmarkDrain", "move-downtime-p50-s", 2, " s"), metric("failover.BenchmarkDrain", "move-downtime-max-s", 2, " s")),
				metric("failover.BenchmarkDrain", "drain-total-s", 1, " s"), lit("the savepoint each job stopped with: nothing reprocessed")},
			{lit("cluster failover (NoExecute taint), same jobs, same run"), metric("failover.BenchmarkDrain", "jobs", 0, ""),
				join(" / ", metric("failover.BenchmarkDrain", "failover-downtime-p50-s", 2, " s"), metric("failover.BenchmarkDrain", "failover-downtime-max-s", 2, " s")),
				metric("failover.BenchmarkDrain", "failover-total-s", 1, " s"), lit("each job's last completed checkpoint: what followed it is reprocessed")},
		}},
}

// drillFlink is the result of BenchmarkDrillFlink.
const drillFlink = "failover.BenchmarkDrillFlink"

// agentDesignSize is the result of BenchmarkAgentDesignSize.
const agentDesignSize = "agent.BenchmarkAgentDesignSize"

// designRow is one figure measured for each of the agent, the plain
// informer and the typed one, with agent / plain.
func designRow(label, unit string, prec int, suffix string, goal cell) []cell {
	return []cell{lit(label),
		metric(agentDesignSize, "agent-"+unit, prec, suffix), metric(agentDesignSize, "plain-"+unit, prec, suffix), metric(agentDesignSize, "typed-"+unit, prec, suffix),
		ratio(metric(agentDesignSize, "agent-"+unit, prec, ""), metric(agentDesignSize, "plain-"+unit, prec, ""), 2), goal}
}

func designRSS(role string) cell {
	return join(" ", metric(agentDesignSize, role+"-MB-rss", 0, " MB"), join("", lit("("), metric(agentDesignSize, role+"-MB-rss-peak", 0, " MB"), lit(")")))
}

// k8sApplyRow is one engine's deployables created through the REST API
// and by server-side apply through /k8s (server.BenchmarkKubeApply).
func k8sApplyRow(label, eng string) []cell {
	rest := metric("server.BenchmarkKubeApply/"+eng+"/rest", "writes/s", 0, "")
	apply := metric("server.BenchmarkKubeApply/"+eng+"/k8s-apply", "writes/s", 0, "")
	return []cell{lit(label), rest, apply, ratio(apply, rest, 2)}
}

func submitRow(label, eng string) []cell {
	serial := metric("store.BenchmarkInsertRunnableWithAuditAndOutbox/"+eng+"/serial", "ops/s", 0, "")
	parallel := metric("store.BenchmarkInsertRunnableWithAuditAndOutbox/"+eng+"/parallel", "ops/s", 0, "")
	api := metric("server.BenchmarkSubmit/"+eng, "submissions/s", 0, "")
	return []cell{lit(label), join(" / ", serial, parallel), api,
		join(" / ", metric("server.BenchmarkSubmit/"+eng, "p50-ms", 1, " ms"), metric("server.BenchmarkSubmit/"+eng, "p99-ms", 0, " ms")),
		percent(api, best(serial, parallel))}
}

func consoleRow(label, page string) []cell {
	return []cell{lit(label), millis("server.BenchmarkConsolePages/sqlite/"+page, 1), millis("server.BenchmarkConsolePages/postgres/"+page, 1)}
}

// listRow is one listing of BenchmarkInventoryList: the time of each side,
// with its objects/s when rate is set, and purser's time over the
// kube-apiserver's.
func listRow(label, listing string, rate bool) []cell {
	row := []cell{lit(label)}
	kube := millis("server.BenchmarkInventoryList/kube-apiserver/"+listing, 1)
	for i, side := range []string{"kube-apiserver", "purser-sqlite", "purser-postgres"} {
		name := "server.BenchmarkInventoryList/" + side + "/" + listing
		t := millis(name, 1)
		var c cell = t
		if rate {
			c = join(" ", t, join("", lit("("), metric(name, "objects/s", 0, "/s"), lit(")")))
		}
		row = append(row, c)
		if i > 0 {
			row = append(row, ratio(t, kube, 2))
		}
	}
	return row
}

// k8sListRow is one listing of BenchmarkK8sList: each side's time and
// objects/s, and purser's time over the kube-apiserver's.
func k8sListRow(label, listing string) []cell {
	kube := millis("kubeapi.BenchmarkK8sList/kube-apiserver/"+listing, 1)
	purser := millis("kubeapi.BenchmarkK8sList/purser/"+listing, 1)
	rate := func(side string) cell {
		return join("", lit("("), metric("kubeapi.BenchmarkK8sList/"+side+"/"+listing, "objects/s", 0, "/s"), lit(")"))
	}
	return []cell{lit(label), join(" ", kube, rate("kube-apiserver")), join(" ", purser, rate("purser")), ratio(purser, kube, 2)}
}

func k8sWatchRow(label, sub string) []cell {
	name := "kubeapi.BenchmarkK8sWatches/" + sub
	return []cell{lit(label),
		join(" / ", metric(name, "ms-p50-to-last-watcher", 1, " ms"), metric(name, "ms-max-to-last-watcher", 0, " ms")),
		metric(name, "db-reads/s", 1, ""), metric(name, "cpu-%", 0, " %")}
}

// k8sLatencyRow is one side of BenchmarkK8sWatchLatency.
func k8sLatencyRow(label, side string) []cell {
	name := "kubeapi.BenchmarkK8sWatchLatency"
	return []cell{lit(label), join(" / ", metric(name, side+"-ms-p50", 0, " ms"), metric(name, side+"-ms-p99", 0, " ms"))}
}

func healthRow(object, interpreter, sub string) []cell {
	name := "health.BenchmarkInterpret/" + sub
	return []cell{lit(object), lit(interpreter), micros(name, 2),
		join(", ", metric(name, "allocs/op", 0, " allocs"), metric(name, "B/op", 0, " B"))}
}

// dcAccept reads one configuration's line of TestBenchmarkDCAccept.
func dcAccept(label string) logMetric {
	return logMetric{regexp.MustCompile(`dc accept ` + regexp.QuoteMeta(label) + `: ([0-9.]+) submissions/s, p50 (\S+) p99 (\S+)`),
		[]string{label + "/s", label + "-p50-s", label + "-p99-s"}}
}

func dcAcceptRow(link, standby, commits, label string) []cell {
	name := "soak.TestBenchmarkDCAccept"
	ms := func(unit string) fig { return fig{name: name, unit: unit, scale: 1e3, prec: 0, suffix: " ms"} }
	return []cell{lit(link), lit(standby), lit(commits), metric(name, label+"/s", 0, ""),
		join(" / ", ms(label+"-p50-s"), ms(label+"-p99-s"))}
}

func clusterRow(label, sub string, configured cell) []cell {
	name := "failover.BenchmarkFailoverCluster/" + sub
	pace := cell(lit(""))
	if sub == "1000" || sub == "1000-tuned" {
		pace = metric(name, "runnables/s", 1, "/s")
	}
	return []cell{lit(label), metric(name, "detect-s", 2, " s"), metric(name, "first-running-s", 2, " s"),
		metric(name, "all-running-s", 2, " s"), pace, metric(name, "beyond-grace-s", 2, " s"),
		metric(name, "mismatches", 0, ""), configured}
}

// placementScale reads one engine's line of TestBenchmarkPlacementScale.
func placementScale(eng string) logMetric {
	return logMetric{regexp.MustCompile(`placement ` + eng + `: \d+ runnables over \d+ clusters: ([0-9.]+) runnables/s, decision p50 (\S+) p99 (\S+), fullest cluster ([0-9.]+)%`),
		[]string{eng + "-runnables/s", eng + "-p50-s", eng + "-p99-s", eng + "-fullest-%"}}
}

func placementScaleRow(label, eng string) []cell {
	name := "submitter.TestBenchmarkPlacementScale"
	ms := func(unit string) fig { return fig{name: name, unit: unit, scale: 1e3, prec: 1, suffix: " ms"} }
	return []cell{lit(label), metric(name, eng+"-runnables/s", 0, " runnables/s"),
		join(" / ", ms(eng+"-p50-s"), ms(eng+"-p99-s")), metric(name, eng+"-fullest-%", 0, " %"),
		lit("≥ 100 placements/s and decision p99 < 10 ms (the design size)")}
}

// kueueBaseline reads the summary line of the Kueue baseline run with
// that many cohorts.
func kueueBaseline(cohorts string) logMetric {
	return logMetric{regexp.MustCompile(`kueue baseline ` + cohorts + ` of 5 cohorts, \d+ workloads: wall ([0-9.]+)s, usage ([0-9.]+)%, ` +
		`mean time to admission large ([0-9.]+)s medium ([0-9.]+)s small ([0-9.]+)s; submissions behind schedule p99 (\S+)`),
		[]string{"wall-s", "usage-%", "large-s", "medium-s", "small-s", "lag-s"}}
}

func kueueFig(cohorts, unit string, prec int, suffix string) fig {
	name := "submitter.TestBenchmarkKueueBaselineOneCohort"
	if cohorts == "5" {
		name = "submitter.TestBenchmarkKueueBaseline"
	}
	return metric(name, unit, prec, suffix)
}

// fairShareTimes are the samples of TestBenchmarkFairShare, every 6 s.
var fairShareTimes = []string{"6", "12", "18", "24", "30", "36"}

func fairShareLogs() []logMetric {
	var out []logMetric
	for _, at := range fairShareTimes {
		out = append(out, logMetric{regexp.MustCompile(`fairness t=` + at + `s: fair-a ([0-9]+)% \(fair share ([0-9]+)%, ([0-9]+) queued\), ` +
			`fair-b ([0-9]+)% \(fair share ([0-9]+)%, ([0-9]+) queued\)`),
			[]string{at + "s-a-%", at + "s-a-fair-%", at + "s-a-queued", at + "s-b-%", at + "s-b-fair-%", at + "s-b-queued"}})
	}
	return append(out,
		logMetric{regexp.MustCompile(`fairness fair-a: \d+ runnables, time to admission mean ([0-9.]+)s p99 ([0-9.]+)s`), []string{"a-wait-mean-s", "a-wait-p99-s"}},
		logMetric{regexp.MustCompile(`fairness fair-b: \d+ runnables, time to admission mean ([0-9.]+)s p99 ([0-9.]+)s`), []string{"b-wait-mean-s", "b-wait-p99-s"}})
}

func fairShareRows() [][]cell {
	name := "submitter.TestBenchmarkFairShare"
	var rows [][]cell
	for _, at := range fairShareTimes {
		rows = append(rows, []cell{lit(at + " s"),
			join(" / ", metric(name, at+"s-a-%", 0, " %"), metric(name, at+"s-a-fair-%", 0, " %")),
			join(" / ", metric(name, at+"s-b-%", 0, " %"), metric(name, at+"s-b-fair-%", 0, " %")),
			join(" / ", metric(name, at+"s-a-queued", 0, ""), metric(name, at+"s-b-queued", 0, ""))})
	}
	return append(rows, []cell{lit("time to admission, mean / p99"),
		join(" / ", metric(name, "a-wait-mean-s", 2, " s"), metric(name, "a-wait-p99-s", 2, " s")),
		join(" / ", metric(name, "b-wait-mean-s", 2, " s"), metric(name, "b-wait-p99-s", 2, " s")), lit("")})
}

// karmadaScenarios are the rows of TestBenchmarkKarmada, by the name its
// log lines give them, with what each row measures.
var karmadaScenarios = []struct{ id, label string }{
	{"application", "(a) application failover: a FlinkDeployment turns RECONCILING (toleration 10 s, job id kept in a label); fault to the copy running on the other cluster; right: the copy's label is the job that ran"},
	{"cluster-defaults", "(b) cluster failover of a running Job, its kube-apiserver stopped, each system's default periods; stop to the Job running on the other cluster"},
	{"cluster-tuned", "(b) the same, each system's short periods"},
	{"second", "(c) second failover (Karmada #6232): the first failover's copy never runs; its creation to the third copy running; right: the third copy's label is the last job that ran"},
}

// karmadaLogs reads TestBenchmarkKarmada's line per scenario, and the
// cold build of Karmada when that run built it.
func karmadaLogs() []logMetric {
	var out []logMetric
	for _, s := range karmadaScenarios {
		out = append(out, logMetric{regexp.MustCompile(`karmada row ` + s.id + `: purser (\S+) s right (\d), karmada (\S+) s right (\d)`),
			[]string{s.id + "-purser-s", s.id + "-purser-right", s.id + "-karmada-s", s.id + "-karmada-right"}})
	}
	return append(out, logMetric{regexp.MustCompile(`built karmada-\S+ (?:\S+ )*in (\S+)$`), []string{"cold-build-s"}})
}

func karmadaRows() [][]cell {
	name := "failover.TestBenchmarkKarmada"
	var rows [][]cell
	for _, s := range karmadaScenarios {
		p, k := metric(name, s.id+"-purser-s", 2, " s"), metric(name, s.id+"-karmada-s", 2, " s")
		rows = append(rows, []cell{lit(s.label), p, k, ratio(p, k, 2), yesNo{name, s.id + "-purser-right"}, yesNo{name, s.id + "-karmada-right"}})
	}
	// The cold build is measured only by a run that found no Karmada in
	// the sandbox cache; otherwise the cell says the figure is missing.
	return append(rows, []cell{lit("Karmada built from its Go module in this run (aggregated apiserver, controller manager, scheduler, webhook; missing: it was in the cache)"),
		lit(""), metric(name, "cold-build-s", 0, " s"), lit(""), lit(""), lit("")})
}

// yesNo shows a 1/0 figure as yes or no.
type yesNo struct{ name, unit string }

func (c yesNo) text(r lookup) string {
	v, why, ok := r.value(c.name, c.unit)
	if !ok {
		return why
	}
	if v == 1 {
		return "yes"
	}
	return "no"
}

// inventoryDesignSizeLogs reads the figures TestBenchmarkInventoryDesignSize
// logs, one line each.
func inventoryDesignSizeLogs() []logMetric {
	line := func(pattern string, units ...string) logMetric {
		return logMetric{regexp.MustCompile(`inventory design size: ` + pattern), units}
	}
	return []logMetric{
		line(`published (\d+) events of (\d+) clusters in (\S+) \(([0-9.]+)/s\)`, "objects", "clusters", "publish-s", "publish-events/s"),
		line(`ingested \d+ objects in (\S+): ([0-9.]+) objects/s`, "ingest-s", "ingest-objects/s"),
		line(`ingester memory during ingest: heap in use ([0-9.]+) MB, RSS ([0-9.]+) MB`, "ingest-heap-MB", "ingest-rss-MB"),
		line(`database ([0-9.]+) MB for \d+ records: (\d+) B/record \(table and TOAST (\d+) B, indexes (\d+) B\); objects average (\d+) B`,
			"db-MB", "B/record", "table-B/record", "index-B/record", "object-B"),
		line(`churn (\d+) changes/s for (\S+) \((\d+) changes, \d+ records changed seen\): ingest lag p50 (\S+) p99 (\S+)`,
			"churn-rate", "churn-s", "changes", "lag-p50-s", "lag-p99-s"),
		line(`list one namespace \(first page of 500\): p50 (\S+) p99 (\S+) over (\d+) requests`, "ns-p50-s", "ns-p99-s", "ns-requests"),
		line(`list by label selector app \((\d+) matches on average\): p50 (\S+) p99 (\S+) over (\d+) requests`,
			"sel-matches", "sel-p50-s", "sel-p99-s", "sel-requests"),
		line(`full list of (\d+) records in (\d+) pages of 1000: (\S+), page p50 (\S+) p99 (\S+)`,
			"full-records", "full-pages", "full-s", "page-p50-s", "page-p99-s"),
		line(`snapshot reconcile per cluster \((\d+) objects, (\d+) zombies\): p50 (\S+) p99 (\S+) max (\S+) over (\d+) clusters`,
			"snap-objects", "snap-zombies", "snap-p50-s", "snap-p99-s", "snap-max-s", "snap-clusters"),
		line(`ingester memory during churn: heap in use ([0-9.]+) MB, RSS ([0-9.]+) MB`, "churn-heap-MB", "churn-rss-MB"),
	}
}

// designSize is a figure of TestBenchmarkInventoryDesignSize; ms reads one
// logged in seconds as milliseconds.
func designSize(unit string, prec int, suffix string) fig {
	return metric("scale.TestBenchmarkInventoryDesignSize", unit, prec, suffix)
}

func designSizeMs(unit string, prec int) fig {
	return fig{name: "scale.TestBenchmarkInventoryDesignSize", unit: unit, scale: 1e3, prec: prec, suffix: " ms"}
}

func inventoryDesignSizeRows() [][]cell {
	p50p99 := func(what string, prec int) cell {
		return join(" / ", designSizeMs(what+"-p50-s", prec), designSizeMs(what+"-p99-s", prec))
	}
	return [][]cell{
		{lit("load generator: the agents' ADDED events published into JetStream (nats-server, its default sync)"),
			join(" ", designSize("publish-events/s", 0, " events/s"), join("", lit("("), designSize("publish-s", 0, " s"), lit(")"))), lit("")},
		{lit("**ingest of the backlog of 1,000,000 objects**, ingester start to the last record committed"),
			join(" ", designSize("ingest-objects/s", 0, " objects/s"), join("", lit("("), designSize("ingest-s", 0, " s"), lit(")"))),
			lit("≥ 10,000/s")},
		{lit("ingester memory during ingest: Go heap in use / RSS (its own process, peak of 1 s samples)"),
			join(" / ", designSize("ingest-heap-MB", 0, " MB"), designSize("ingest-rss-MB", 0, " MB")), lit("")},
		{lit("database per record: total / table and TOAST / indexes (objects average, as JSON)"),
			join(" / ", designSize("B/record", 0, " B"), designSize("table-B/record", 0, " B"), designSize("index-B/record", 0, " B")),
			join("", lit("("), designSize("object-B", 0, " B"), lit(")"))},
		{lit("churn across the farm, changes/s"), designSize("churn-rate", 0, "/s"), lit("1,000/s for ≥ 60 s")},
		{lit("ingest lag under churn, publish to committed record, p50 / p99"),
			join(" / ", designSize("lag-p50-s", 2, " s"), designSize("lag-p99-s", 2, " s")), lit("")},
		{lit("**list one namespace under churn**, first page of 500 (`?namespace=team-N&limit=500`), p50 / p99"), p50p99("ns", 1), lit("p99 < 50 ms")},
		{join("", lit("**list by label selector across the farm under churn** (`?labelSelector=app=…`, "), designSize("sel-matches", 0, ""),
			lit(" matches), p50 / p99")), p50p99("sel", 1), lit("p99 < 50 ms")},
		{lit("full list of every record under churn, pages of 1,000: total / page p50 / page p99"),
			join(" / ", designSize("full-s", 1, " s"), designSizeMs("page-p50-s", 0), designSizeMs("page-p99-s", 0)), lit("")},
		{lit("**snapshot reconcile of one cluster under churn** (10,000 objects, 10 zombies; publish to commit), p50 / p99 / max of 100"),
			join(" / ", designSizeMs("snap-p50-s", 0), designSizeMs("snap-p99-s", 0), designSizeMs("snap-max-s", 0)), lit("< 1 s")},
		{lit("ingester memory during churn: Go heap in use / RSS"),
			join(" / ", designSize("churn-heap-MB", 0, " MB"), designSize("churn-rss-MB", 0, " MB")), lit("")},
	}
}

// schedulesLag reads the line TestBenchmarkSchedules logs per engine.
func schedulesLag(eng string) logMetric {
	return logMetric{regexp.MustCompile(`schedules ` + eng + `: \d+ schedules each minute over \d+ clusters, \d+ ticks: tick to accepted p50 (\S+) p99 (\S+) max (\S+) ` +
		`\(first tick p99 (\S+), second (\S+); a scheduler started at a tick, p50 (\S+) p99 (\S+)\); ` +
		`ceiling, \d+ plain creates through the gate in one loop: ([0-9.]+)/s, from the loop's start p50 (\S+) p99 (\S+) max (\S+)`),
		[]string{eng + "-p50-s", eng + "-p99-s", eng + "-max-s", eng + "-first-p99-s", eng + "-second-p99-s", eng + "-cold-p50-s", eng + "-cold-p99-s", eng + "-ceiling/s", eng + "-ceiling-p50-s", eng + "-ceiling-p99-s", eng + "-ceiling-max-s"}}
}

func schedulesRow(label, eng string) []cell {
	name := "scheduler.TestBenchmarkSchedules"
	s := func(unit string) fig { return fig{name: name, unit: unit, scale: 1, prec: 2, suffix: " s"} }
	return []cell{lit(label),
		join(" / ", s(eng+"-p50-s"), s(eng+"-p99-s"), s(eng+"-max-s")),
		join(" / ", s(eng+"-first-p99-s"), s(eng+"-second-p99-s")),
		join(" / ", s(eng+"-cold-p50-s"), s(eng+"-cold-p99-s")),
		metric(name, eng+"-ceiling/s", 0, " creates/s"),
		join(" / ", s(eng+"-ceiling-p50-s"), s(eng+"-ceiling-p99-s"), s(eng+"-ceiling-max-s")),
		lit("p99 < 1 s")}
}

// drillLog reads the line TestBenchmarkDrill logs per engine.
func drillLog(eng string) logMetric {
	return logMetric{regexp.MustCompile(`drill ` + eng + `: \d+ clusters, \d+ runnables, dc-0 \(\d+ to move\): snapshot (\S+) s, what-if (\S+) s, total (\S+) s; ` +
		`headroom of \d+ DCs (\S+) s`),
		[]string{eng + "-snapshot-s", eng + "-plan-s", eng + "-total-s", eng + "-headroom-s"}}
}

func drillRow(label, eng string) []cell {
	name := "drill.TestBenchmarkDrill"
	s := func(unit string) fig { return fig{name: name, unit: unit, scale: 1, prec: 2, suffix: " s"} }
	return []cell{lit(label), join(" / ", s(eng+"-snapshot-s"), s(eng+"-plan-s"), s(eng+"-total-s")), s(eng + "-headroom-s"), lit("total < 1 s")}
}
