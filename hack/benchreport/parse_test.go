package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// benchOutput is `go test -v -bench` output as go1.26 prints it with
// GOMAXPROCS 2: a logged sub-benchmark, a skipped one, a failed one,
// custom units, and a line a test wrote in between.
const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/purser-io/purser/internal/member/inventory
cpu: AMD EPYC
BenchmarkIngestEvents
BenchmarkIngestEvents/sqlite
    bench_test.go:80: inventory holds 20000 rows
BenchmarkIngestEvents/sqlite-2         	       3	 387366452 ns/op	     51620 events/s	     162 B/op	       1 allocs/op
BenchmarkIngestEvents/postgres
    storetest.go:52: PostgreSQL half skipped: set PURSER_TEST_POSTGRES to a DSN whose role may CREATE DATABASE
--- SKIP: BenchmarkIngestEvents/postgres
BenchmarkClusterStart/argo=false-2     	       3	2203000000 ns/op	       540.2 MB-rss/cluster
BenchmarkFailoverCluster/500-2         	       3	         1.000 ns/op	         0.4400 detect-s	        27.90 all-running-s
time=2026-12-01T14:03:00Z level=WARN msg="not a result" BenchmarkX 3 4 ns/op
BenchmarkReconcileSnapshot
    bench_test.go:229: reconcile: {Removed:0} boom
        etcd is running; last lines of its log:
        {"level":"info","msg":"db file is flocked by another process"}
--- FAIL: BenchmarkReconcileSnapshot
FAIL
exit status 1
FAIL	github.com/purser-io/purser/internal/member/inventory	12.3s
`

func TestParseOutput(t *testing.T) {
	p := parseOutput(benchOutput, 2, "", nil)
	want := []result{
		{Name: "BenchmarkIngestEvents/sqlite", Iterations: 3, Metrics: map[string]float64{
			"ns/op": 387366452, "events/s": 51620, "B/op": 162, "allocs/op": 1}},
		{Name: "BenchmarkClusterStart/argo=false", Iterations: 3, Metrics: map[string]float64{
			"ns/op": 2203000000, "MB-rss/cluster": 540.2}},
		{Name: "BenchmarkFailoverCluster/500", Iterations: 3, Metrics: map[string]float64{
			"ns/op": 1, "detect-s": 0.44, "all-running-s": 27.9}},
	}
	if !reflect.DeepEqual(p.Results, want) {
		t.Errorf("results:\n got %+v\nwant %+v", p.Results, want)
	}
	if got := p.Skipped; !reflect.DeepEqual(got, map[string]string{
		"BenchmarkIngestEvents/postgres": "PostgreSQL half skipped: set PURSER_TEST_POSTGRES to a DSN whose role may CREATE DATABASE"}) {
		t.Errorf("skipped: %q", got)
	}
	if got := p.Failed; !reflect.DeepEqual(got, map[string]string{"BenchmarkReconcileSnapshot": "reconcile: {Removed:0} boom"}) {
		t.Errorf("failed: %q", got)
	}
}

func TestParseOutputOneProc(t *testing.T) {
	// With GOMAXPROCS 1 go test appends nothing, so a name that ends in a
	// number keeps it.
	out := "BenchmarkFailoverCluster/1 \t       1\t      1122 ns/op\t         2.000 grace-s\n"
	p := parseOutput(out, 1, "", nil)
	if len(p.Results) != 1 || p.Results[0].Name != "BenchmarkFailoverCluster/1" || p.Results[0].Metrics["grace-s"] != 2 {
		t.Fatalf("got %+v", p.Results)
	}
}

func TestParseOutputTestLogs(t *testing.T) {
	e, _ := entryByID("submitter")
	out := `=== RUN   TestBenchmarkSubmit
    bench_test.go:150: direct client-go: 55.5 objects/s; API accepted 290.1 runnables/s
    bench_test.go:151: through purser:   55.6 runnables/s (100% of direct), accept->created p50 7.2s p99 16.6s
--- PASS: TestBenchmarkSubmit (75.20s)
PASS
ok  	github.com/purser-io/purser/internal/control/submitter	76.1s
`
	p := parseOutput(out, 2, e.Test, e.Logs)
	want := []result{{Name: "TestBenchmarkSubmit", Iterations: 1, Metrics: map[string]float64{
		"direct-objects/s": 55.5, "accepted-runnables/s": 290.1, "runnables/s": 55.6, "p50-s": 7.2, "p99-s": 16.6}}}
	if !reflect.DeepEqual(p.Results, want) {
		t.Errorf("got %+v\nwant %+v", p.Results, want)
	}

	// A failed test gives no figures, even those it logged first.
	failed := strings.Replace(out, "--- PASS", "--- FAIL", 1)
	if p := parseOutput(failed, 2, e.Test, e.Logs); len(p.Results) != 0 || p.Failed["TestBenchmarkSubmit"] == "" {
		t.Errorf("failed test: %+v", p)
	}
	// Latencies under a second are printed in ms by time.Duration.
	fast := strings.Replace(out, "p50 7.2s", "p50 520ms", 1)
	if p := parseOutput(fast, 2, e.Test, e.Logs); p.Results[0].Metrics["p50-s"] != 0.52 {
		t.Errorf("p50 of 520ms: %v", p.Results[0].Metrics["p50-s"])
	}
}

func TestStripProcs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs int
		want  string
	}{
		{"BenchmarkA-2", 2, "BenchmarkA"},
		{"BenchmarkA/sqlite-16", 16, "BenchmarkA/sqlite"},
		{"BenchmarkA/500-2", 2, "BenchmarkA/500"},
		{"BenchmarkA/500", 1, "BenchmarkA/500"},
		{"BenchmarkA/p-99", 2, "BenchmarkA/p-99"}, // not the run's GOMAXPROCS
		{"BenchmarkA/p-99", 0, "BenchmarkA/p"},    // unknown: any number
		{"BenchmarkA/kube-apiserver/all-2", 2, "BenchmarkA/kube-apiserver/all"},
		{"BenchmarkA/kube-apiserver/all", 2, "BenchmarkA/kube-apiserver/all"},
		{"BenchmarkA-1/x", 1, "BenchmarkA-1/x"},
		{"BenchmarkA-2/x", 2, "BenchmarkA-2/x"}, // the suffix is on the last element only
	} {
		if got := stripProcs(tc.name, tc.procs); got != tc.want {
			t.Errorf("stripProcs(%q, %d) = %q, want %q", tc.name, tc.procs, got, tc.want)
		}
	}
}

func TestRawRoundTrip(t *testing.T) {
	r1 := &runInfo{Started: time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC), Duration: 31 * time.Minute,
		Command: "go run ./hack/benchreport", Commit: "0123456789ab with uncommitted changes", CPU: "AMD EPYC",
		Cores: 2, Procs: 2, Memory: "23 GiB", Go: "go1.26.8 linux/amd64", OS: "Debian GNU/Linux 12 (bookworm), kernel 6.1",
		Postgres: "15.8 at 127.0.0.1:5432", LoadStart: "5.11", LoadEnd: "3.02"}
	r2 := *r1
	r2.Started = r1.Started.Add(time.Hour)
	r2.Command = "go run ./hack/benchreport -only stream"
	outs := []*outcome{
		{Entry: "ingest", Run: r1, Command: "go test -bench x ./internal/member/inventory/", Elapsed: 130 * time.Second, Status: "ok", Output: benchOutput},
		{Entry: "capacity", Run: r1, Command: "go test -bench y ./internal/hub/store/", Elapsed: time.Second, Status: "exit status 1", Output: "FAIL\n\n"},
		{Entry: "stream", Run: &r2, Command: "go test -bench z ./internal/hub/stream/", Elapsed: 20 * time.Second, Status: "ok", Output: "no newline at the end"},
	}
	text := formatRaw([]*runInfo{r1, &r2}, outs)
	runs, got, err := parseRaw(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || !reflect.DeepEqual(*runs[0], *r1) || !reflect.DeepEqual(*runs[1], r2) {
		t.Fatalf("runs: %+v", runs)
	}
	outs[1].Output = "FAIL\n" // trailing blank lines are not kept
	outs[2].Output += "\n"
	if len(got) != len(outs) {
		t.Fatalf("%d outcomes, want %d", len(got), len(outs))
	}
	for i := range outs {
		want := *outs[i]
		want.Run = runs[0]
		if i == 2 {
			want.Run = runs[1]
		}
		if !reflect.DeepEqual(*got[i], want) {
			t.Errorf("outcome %d:\n got %+v\nwant %+v", i, *got[i], want)
		}
	}
	// Written again, the same bytes.
	if again := formatRaw(runs, got); again != formatRaw([]*runInfo{r1, &r2}, outs) {
		t.Errorf("not stable:\n%s", again)
	}
}

func TestParseRawErrors(t *testing.T) {
	for _, text := range []string{
		"benchreport-entry: ingest\n",                                  // no run
		"benchreport-run: yesterday\n",                                 // bad time
		"benchreport-run: 2026-12-01T14:03:00Z\nbenchreport-cpux: x\n", // unknown field
		"benchreport-run: 2026-12-01T14:03:00Z\nbenchreport-entry: a\nbenchreport-elapsed: soon\n",
		"benchreport-run: 2026-12-01T14:03:00Z\nbenchreport-entry: a\nbenchreport-cpu: x\n", // run field in an entry
	} {
		if _, _, err := parseRaw(text); err == nil {
			t.Errorf("parseRaw(%q) accepted", text)
		}
	}
}
