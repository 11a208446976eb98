package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRewrite(t *testing.T) {
	doc := `# Benchmarks

Prose kept.

<!-- bench:machine begin -->
old machine
<!-- bench:machine end -->

## Inventory

<!-- bench:inventory begin -->
| old | table |
<!-- bench:inventory end -->

Interpretation kept.
<!-- bench:stream begin -->
hand-written, no new block: kept
<!-- bench:stream end -->
`
	got, missing, err := rewrite(doc, map[string]string{
		"machine":   "new machine\n",
		"inventory": "| new | table |\n| --- | --- |\n",
		"health":    "nowhere to go",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `# Benchmarks

Prose kept.

<!-- bench:machine begin -->

new machine

<!-- bench:machine end -->

## Inventory

<!-- bench:inventory begin -->

| new | table |
| --- | --- |

<!-- bench:inventory end -->

Interpretation kept.
<!-- bench:stream begin -->
hand-written, no new block: kept
<!-- bench:stream end -->
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if !slices.Equal(missing, []string{"health"}) {
		t.Errorf("missing = %q", missing)
	}
	// Rewriting again changes nothing.
	again, _, err := rewrite(got, map[string]string{"machine": "new machine\n", "inventory": "| new | table |\n| --- | --- |\n"})
	if err != nil || again != got {
		t.Errorf("second rewrite differs (%v):\n%s", err, again)
	}
}

func TestRewriteRejectsBrokenMarkers(t *testing.T) {
	for _, doc := range []string{
		"<!-- bench:a begin -->\n",
		"<!-- bench:a end -->\n",
		"<!-- bench:a begin -->\n<!-- bench:b begin -->\n<!-- bench:b end -->\n<!-- bench:a end -->\n",
		"<!-- bench:a begin -->\n<!-- bench:b end -->\n",
		"<!-- bench:a begin -->\n<!-- bench:a end -->\n<!-- bench:a begin -->\n<!-- bench:a end -->\n",
	} {
		if _, _, err := rewrite(doc, map[string]string{"a": "x"}); err == nil {
			t.Errorf("accepted:\n%s", doc)
		}
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		prec int
		want string
	}{
		{0, 0, "0"},
		{999, 0, "999"},
		{1000, 0, "1,000"},
		{51620.4, 0, "51,620"},
		{1234567.891, 2, "1,234,567.89"},
		{0.523, 2, "0.52"},
		{-1500, 0, "-1,500"},
		{-0.001, 1, "0.0"},
		{3.82, 2, "3.82"},
	} {
		if got := number(tc.v, tc.prec); got != tc.want {
			t.Errorf("number(%v, %d) = %q, want %q", tc.v, tc.prec, got, tc.want)
		}
	}
}

// fixture is a run of three invocations: the ingester's (PostgreSQL half
// skipped), store's upsert (failed), and the stream's.
func fixture() ([]*runInfo, []*outcome) {
	run := &runInfo{Started: time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC), Duration: 95 * time.Second,
		Command: "go run ./hack/benchreport -only 'inventory|stream'", Commit: "0123456789ab", CPU: "AMD EPYC",
		Cores: 2, Procs: 2, Memory: "23 GiB", Go: "go1.26.8 linux/amd64", OS: "Debian GNU/Linux 12 (bookworm)",
		Postgres: "none (PURSER_TEST_POSTGRES unset)", LoadStart: "5.11", LoadEnd: "3.02"}
	ingest := `BenchmarkIngestEvents/sqlite-2         	       3	 387366452 ns/op	     51620 events/s
BenchmarkIngestEvents/postgres
    storetest.go:52: PostgreSQL half skipped: set PURSER_TEST_POSTGRES
--- SKIP: BenchmarkIngestEvents/postgres
BenchmarkRawUpsert/sqlite-2         	       3	 412000000 ns/op	     48540 rows/s
BenchmarkRawUpsert/postgres
--- SKIP: BenchmarkRawUpsert/postgres
BenchmarkReconcileSnapshot/sqlite-2         	       3	 126000000 ns/op
`
	stream := `BenchmarkPublish-2    	    5000	    227000 ns/op
BenchmarkPublishBatch-2    	      60	  17330000 ns/op	      5770 msgs/s
`
	return []*runInfo{run}, []*outcome{
		{Entry: "ingest", Run: run, Command: "go test ingest", Elapsed: 70 * time.Second, Status: "ok", Output: ingest},
		{Entry: "upsert", Run: run, Command: "go test upsert", Elapsed: 5 * time.Second, Status: "exit status 1",
			Output: "BenchmarkUpsertInventory/sqlite\n    inventory_test.go:240: disk full\n--- FAIL: BenchmarkUpsertInventory/sqlite-2\n--- FAIL: BenchmarkUpsertInventory\nFAIL\n"},
		{Entry: "stream", Run: run, Command: "go test stream", Elapsed: 20 * time.Second, Status: "ok", Output: stream},
	}
}

func TestGenerate(t *testing.T) {
	runs, outs := fixture()
	blocks := generate(runs, outs, "benchmarks.raw.txt", "docs/benchmarks.raw.txt")
	var ids []string
	for id := range blocks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Only the sections the run fed, and the summary that reads them; the
	// others keep what they hold.
	if want := []string{"inventory", "machine", "stream", "summary"}; !slices.Equal(ids, want) {
		t.Fatalf("blocks %q, want %q", ids, want)
	}
	inv := blocks["inventory"]
	for _, want := range []string{
		"| ingest, events/s (stream → batch → one transaction → ack) | 51,620 | skipped | ≥ 10,000/s on PostgreSQL |",
		"| ceiling: raw batched upsert of the same rows, rows/s | 48,540 | skipped |  |",
		"| ingest / ceiling, same run | 1.06 | skipped | ≥ 0.5 |",
		"| `store.Inventory.Upsert` alone, 500 new rows per transaction, rows/s | failed | failed |  |",
		"| snapshot reconciliation of 100,000 records (1,000 zombies) | 0.13 s | — | < 2 s |",
		"Measured by `go test ingest` (1 min 10 s) and `go test upsert` (5 s).",
		"Skipped: `inventory.BenchmarkIngestEvents/postgres` (PostgreSQL half skipped: set PURSER_TEST_POSTGRES).",
		"Skipped: `inventory.BenchmarkRawUpsert/postgres`.",
		"Failed: `store.BenchmarkUpsertInventory/sqlite` (disk full).\nFailed: `go test upsert` (exit status 1)",
	} {
		if !strings.Contains(inv, want) {
			t.Errorf("inventory block lacks %q:\n%s", want, inv)
		}
	}
	for _, want := range []string{
		"| one message at a time, waiting for each acknowledgement | 4,405 messages/s (227 µs each) | `stream.BenchmarkPublish` |",
		"| pipelined batches of 100 | 5,770 messages/s |",
		"| pipelined / one at a time | 1.31 | same run |",
	} {
		if !strings.Contains(blocks["stream"], want) {
			t.Errorf("stream block lacks %q:\n%s", want, blocks["stream"])
		}
	}
	for _, want := range []string{
		"Generated by `make bench` from one run",
		"| date | 2026-12-01 14:03 UTC, 1 min 35 s |",
		"| CPU | AMD EPYC, 2 cores, GOMAXPROCS 2 |",
		"| load average (1 min) | 5.11 at the start, 3.02 at the end |",
	} {
		if !strings.Contains(blocks["machine"], want) {
			t.Errorf("machine block lacks %q:\n%s", want, blocks["machine"])
		}
	}
}

func TestGenerateNotRun(t *testing.T) {
	// The API's half of a table without its ceiling: the ceiling says it
	// was not run, the ratio too.
	runs, _ := fixture()
	out := &outcome{Entry: "submit-api", Run: runs[0], Command: "go test submit", Status: "ok",
		Output: "BenchmarkSubmit/sqlite-2  \t    2000\t    550000 ns/op\t      1813 submissions/s\t  6.100 p50-ms\t 34.00 p99-ms\n"}
	block := generate(runs, []*outcome{out}, "r", "r")["submit"]
	if want := "| SQLite (WAL, synchronous=FULL) | not run | 1,813 | 6.1 ms / 34 ms | not run |"; !strings.Contains(block, want) {
		t.Errorf("submit block lacks %q:\n%s", want, block)
	}
}

func TestMergeKeepsOtherInvocations(t *testing.T) {
	runs, outs := fixture()
	later := *runs[0]
	later.Started = later.Started.Add(time.Hour)
	fresh := []*outcome{{Entry: "stream", Run: &later, Command: "go test stream", Status: "ok",
		Output: "BenchmarkPublish-2    	    5000	    200000 ns/op\n"}}
	mruns, mouts := merge(runs, outs, &later, fresh)
	if len(mruns) != 2 || mruns[1] != &later {
		t.Fatalf("runs: %+v", mruns)
	}
	var got []string
	for _, o := range mouts {
		got = append(got, o.Entry)
	}
	// The plan's order; the stream's outcome is the new one.
	if want := []string{"stream", "ingest", "upsert"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	if mouts[0] != fresh[0] {
		t.Errorf("stream outcome is the old one")
	}
	blocks := generate(mruns, mouts, "benchmarks.raw.txt", "docs/benchmarks.raw.txt")
	if !strings.Contains(blocks["stream"], "5,000 messages/s") || !strings.Contains(blocks["stream"], ", run 2)") {
		t.Errorf("stream block:\n%s", blocks["stream"])
	}
	if !strings.Contains(blocks["machine"], "| tables | inventory | stream |") {
		t.Errorf("machine block:\n%s", blocks["machine"])
	}

	// A run all of whose outcomes were replaced is dropped.
	all := []*outcome{
		{Entry: "ingest", Run: &later, Status: "ok"}, {Entry: "upsert", Run: &later, Status: "ok"}, fresh[0],
	}
	if mruns, _ := merge(runs, outs, &later, all); len(mruns) != 1 {
		t.Errorf("%d runs, want 1", len(mruns))
	}
}

// figures lists the results a cell reads.
func figures(c cell) []string {
	switch c := c.(type) {
	case fig:
		return []string{c.name}
	case ratioCell:
		return append(figures(c.num), figures(c.den)...)
	case bestCell:
		var out []string
		for _, q := range c.of {
			out = append(out, figures(q)...)
		}
		return out
	case diffCell:
		return []string{c.a.name, c.b.name}
	case joinCell:
		var out []string
		for _, p := range c.parts {
			out = append(out, figures(p)...)
		}
		return out
	}
	return nil
}

// TestPlan checks the tables against the invocations: every figure is
// produced by an invocation of its section, and every section has one.
func TestPlan(t *testing.T) {
	ids := map[string]bool{}
	for _, e := range plan {
		if ids[e.ID] {
			t.Errorf("entry %s twice", e.ID)
		}
		ids[e.ID] = true
		if (e.Bench == "") == (e.Test == "") {
			t.Errorf("%s: needs a -bench regexp or a test, not both", e.ID)
		}
		if e.Bench != "" {
			if _, err := regexp.Compile(e.Bench); err != nil {
				t.Errorf("%s: %v", e.ID, err)
			}
		}
		if !slices.ContainsFunc(sections, func(s section) bool { return s.ID == e.Section }) {
			t.Errorf("%s feeds %s, which is no section", e.ID, e.Section)
		}
		if e.Timeout <= 0 || e.Estimate <= 0 || e.Estimate >= e.Timeout {
			t.Errorf("%s: estimate %s, timeout %s", e.ID, e.Estimate, e.Timeout)
		}
	}
	for _, s := range sections {
		var outs []*outcome
		for _, e := range plan {
			if e.Section == s.ID {
				outs = append(outs, &outcome{Entry: e.ID, Status: "ok"})
			}
		}
		if len(outs) == 0 {
			t.Errorf("section %s: no invocation feeds it", s.ID)
		}
		ix := &index{outs: outs}
		for _, row := range s.Rows {
			if len(row) != len(s.Columns) {
				t.Errorf("section %s: a row of %d cells under %d columns", s.ID, len(row), len(s.Columns))
			}
			for _, c := range row {
				for _, name := range figures(c) {
					if ix.producer(name) == nil {
						t.Errorf("section %s: no invocation of the section runs %s", s.ID, name)
					}
				}
			}
		}
	}
}

// TestDocumentMarkers checks that docs/benchmarks.md has a well-formed
// pair of markers for every block the tool writes.
func TestDocumentMarkers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{"machine": "x"}
	for _, s := range sections {
		blocks[s.ID] = "x"
	}
	_, missing, err := rewrite(string(doc), blocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("docs/benchmarks.md has no markers for %q", missing)
	}
}

func TestArgs(t *testing.T) {
	e, _ := entryByID("inventory-list")
	if got, want := e.command(), "go test -run '^$' -bench '^BenchmarkInventoryList$' -v -timeout 40m ./internal/api/server/"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	e, _ = entryByID("submitter")
	if got, want := e.command(), "PURSER_BENCH=1 go test -count=1 -run '^TestBenchmarkSubmit$' -v -timeout 30m ./internal/control/submitter/"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	e, _ = entryByID("failover-cluster")
	if got := goDuration(e.Timeout); got != "1h" {
		t.Errorf("timeout %q", got)
	}
}

// The summary reads the other sections' results: a goal met, a goal
// missed by how much, and a figure no run gave.
func TestSummary(t *testing.T) {
	run := &runInfo{Started: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Procs: 2}
	later := &runInfo{Started: run.Started.Add(time.Hour), Procs: 2}
	ingest := func(rate int) string {
		return fmt.Sprintf("BenchmarkIngestEvents/postgres-2 \t 3\t 1000 ns/op\t %d events/s\n"+
			"BenchmarkRawUpsert/postgres-2 \t 3\t 1000 ns/op\t 20000 rows/s\n", rate)
	}
	row := func(outs ...*outcome) string {
		block := generate([]*runInfo{run, later}, outs, "raw", "raw")["summary"]
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "| inventory ingest (PostgreSQL)") {
				return line
			}
		}
		t.Fatalf("no ingest row in:\n%s", block)
		return ""
	}
	stream := &outcome{Entry: "stream", Run: run, Status: "ok", Output: "BenchmarkPublish-2 \t 10\t 1000 ns/op\n"}
	got := row(stream, &outcome{Entry: "ingest", Run: later, Status: "ok", Output: ingest(12000)})
	if want := "| inventory ingest (PostgreSQL) | 12,000/s | ≥ 10,000/s | 20,000/s raw batched upsert | 60 % | met | " +
		"[Inventory (agent and ingester)](#inventory-agent-and-ingester), run 2 |"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := row(stream, &outcome{Entry: "ingest", Run: later, Status: "ok", Output: ingest(5000)}); !strings.Contains(got, "| missed: 5,000/s against 10,000/s |") {
		t.Errorf("a missed goal: %s", got)
	}
	if got := row(stream); !strings.Contains(got, "| not run | ≥ 10,000/s | not run | not run | not run |") {
		t.Errorf("nothing measured: %s", got)
	}
}
