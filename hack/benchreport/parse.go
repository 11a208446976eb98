package main

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// result is one benchmark's line of `go test -bench` output, or the
// figures a Test entry logged.
type result struct {
	Name       string // without the -GOMAXPROCS suffix: "BenchmarkIngestEvents/sqlite"
	Iterations int64
	Metrics    map[string]float64 // unit -> value: ns/op, B/op, allocs/op and every ReportMetric unit
}

// parsed is what one invocation's output says.
type parsed struct {
	Results []result
	Skipped map[string]string // name -> the reason it logged
	Failed  map[string]string // name -> its last log entry's first line
}

// benchLine matches a result line: name, iterations, then value-unit
// pairs.
var benchLine = regexp.MustCompile(`^(Benchmark\S*)\s+(\d+)\s+(.*)$`)

// parseOutput reads the output of `go test -v -bench` (or of a test run
// with -v). procs is the GOMAXPROCS of the run, whose "-N" suffix go test
// appends to result lines when it is above one. logs, with test, say which
// log lines of a Test entry carry figures and under which name.
func parseOutput(out string, procs int, test string, logs []logMetric) parsed {
	p := parsed{Skipped: map[string]string{}, Failed: map[string]string{}}
	var logged *result
	if test != "" && len(logs) > 0 {
		logged = &result{Name: test, Metrics: map[string]float64{}}
	}
	// The last log entry since the last heading: -v prints a benchmark's
	// or test's log before its "--- SKIP" or "--- FAIL" line.
	lastLog := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m := benchLine.FindStringSubmatch(line); m != nil {
			if r, ok := parseResult(m, procs); ok {
				p.Results = append(p.Results, r)
				lastLog = ""
				continue
			}
		}
		trimmed := strings.TrimSpace(line)
		if status, name, ok := heading(trimmed); ok {
			switch status {
			case "SKIP":
				p.Skipped[stripProcs(name, procs)] = lastLog
			case "FAIL":
				p.Failed[stripProcs(name, procs)] = lastLog
			}
			lastLog = ""
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil {
			lastLog = m[1]
		}
		if logged != nil {
			for _, lm := range logs {
				m := lm.Pattern.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				for i, unit := range lm.Units {
					if i+1 < len(m) {
						if v, ok := parseValue(m[i+1]); ok {
							logged.Metrics[unit] = v
						}
					}
				}
			}
		}
	}
	if logged != nil && len(logged.Metrics) > 0 {
		if _, failed := p.Failed[test]; !failed {
			logged.Iterations = 1
			p.Results = append(p.Results, *logged)
		}
	}
	return p
}

func parseResult(m []string, procs int) (result, bool) {
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return result{}, false
	}
	fields := strings.Fields(m[3])
	if len(fields) == 0 || len(fields)%2 != 0 {
		return result{}, false
	}
	r := result{Name: stripProcs(m[1], procs), Iterations: n, Metrics: map[string]float64{}}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return result{}, false
		}
		r.Metrics[fields[i+1]] = v
	}
	return r, true
}

// heading recognizes "--- SKIP: name (0.00s)" and its PASS and FAIL
// kin.
func heading(line string) (status, name string, ok bool) {
	rest, ok := strings.CutPrefix(line, "--- ")
	if !ok {
		return "", "", false
	}
	status, rest, ok = strings.Cut(rest, ": ")
	if !ok || (status != "PASS" && status != "FAIL" && status != "SKIP" && status != "BENCH") {
		return "", "", false
	}
	name, _, _ = strings.Cut(rest, " ")
	return status, name, name != ""
}

// logLine is the first line of a t.Log or b.Log entry, indented under
// its test: "    file_test.go:123: text". A multi-line entry's further
// lines are indented deeper and are not matched.
var logLine = regexp.MustCompile(`^ {4}\S+\.go:\d+: (.*)$`)

// stripProcs removes the "-N" go test appends to a benchmark's name when
// GOMAXPROCS is N > 1; with procs unknown (0), any numeric suffix.
func stripProcs(name string, procs int) string {
	if procs == 1 {
		return name
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i < strings.LastIndexByte(name, '/') {
		return name
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || (procs > 1 && n != procs) {
		return name
	}
	return name[:i]
}

// parseValue reads a logged figure: a number, or a Go duration in
// seconds.
func parseValue(s string) (float64, bool) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), true
	}
	return 0, false
}

// The raw file holds the output of every invocation behind the document,
// framed by benchfmt configuration lines ("key: value"), so that benchstat
// reads it as well:
//
//	benchreport-run: 2026-12-01T14:03:00Z      starts a run; its machine follows
//	benchreport-called-as: go run ./hack/benchreport
//	benchreport-cpu: AMD EPYC
//	...
//	benchreport-entry: ingest                  starts one invocation's output
//	benchreport-command: go test ...
//	benchreport-elapsed: 2m10s
//	benchreport-status: ok
//	<go test output>
const rawPrefix = "benchreport-"

// outcome is one invocation: its entry, its run, its output.
type outcome struct {
	Entry   string
	Run     *runInfo
	Command string
	Elapsed time.Duration
	Status  string // "ok", or why it failed ("exit status 1")
	Output  string
}

// parseRaw reads a raw file back into its runs and outcomes.
func parseRaw(text string) ([]*runInfo, []*outcome, error) {
	var runs []*runInfo
	var outs []*outcome
	var run *runInfo
	var cur *outcome
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.Output = body.String()
			outs = append(outs, cur)
		}
		cur = nil
		body.Reset()
	}
	for n, line := range strings.Split(text, "\n") {
		key, value, isKey := strings.Cut(line, ": ")
		if !isKey || !strings.HasPrefix(key, rawPrefix) || strings.Contains(key, " ") {
			if cur != nil {
				body.WriteString(line)
				body.WriteByte('\n')
			}
			continue
		}
		key = strings.TrimPrefix(key, rawPrefix)
		switch key {
		case "run":
			flush()
			t, err := time.Parse(time.RFC3339, value)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: run: %w", n+1, err)
			}
			run = &runInfo{Started: t}
			runs = append(runs, run)
		case "entry":
			flush()
			if run == nil {
				return nil, nil, fmt.Errorf("line %d: entry %s before any run", n+1, value)
			}
			cur = &outcome{Entry: value, Run: run}
		case "command", "elapsed", "status":
			if cur == nil {
				return nil, nil, fmt.Errorf("line %d: %s outside an entry", n+1, key)
			}
			switch key {
			case "command":
				cur.Command = value
			case "status":
				cur.Status = value
			case "elapsed":
				d, err := time.ParseDuration(value)
				if err != nil {
					return nil, nil, fmt.Errorf("line %d: elapsed: %w", n+1, err)
				}
				cur.Elapsed = d
			}
		default:
			if run == nil || cur != nil {
				return nil, nil, fmt.Errorf("line %d: %s outside a run's header", n+1, key)
			}
			if err := run.set(key, value); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", n+1, err)
			}
		}
	}
	flush()
	for _, o := range outs {
		o.Output = strings.TrimRight(o.Output, "\n")
		if o.Output != "" {
			o.Output += "\n"
		}
	}
	return runs, outs, nil
}

// formatRaw writes runs and their outcomes, in the order given, in the
// form parseRaw reads.
func formatRaw(runs []*runInfo, outs []*outcome) string {
	var b strings.Builder
	b.WriteString("# Raw output of hack/benchreport, the go test output behind docs/benchmarks.md.\n")
	b.WriteString("# Regenerate the document from it: go run ./hack/benchreport -from docs/benchmarks.raw.txt\n")
	b.WriteString("# Its \"key: value\" lines are benchfmt configuration lines: benchstat reads this file.\n")
	for _, run := range runs {
		b.WriteString("\n")
		for _, kv := range run.fields() {
			fmt.Fprintf(&b, "%s%s: %s\n", rawPrefix, kv[0], kv[1])
		}
		for _, o := range outs {
			if o.Run != run {
				continue
			}
			fmt.Fprintf(&b, "\n%sentry: %s\n", rawPrefix, o.Entry)
			fmt.Fprintf(&b, "%scommand: %s\n", rawPrefix, o.Command)
			fmt.Fprintf(&b, "%selapsed: %s\n", rawPrefix, o.Elapsed.Round(time.Second))
			fmt.Fprintf(&b, "%sstatus: %s\n", rawPrefix, o.Status)
			b.WriteString(o.Output)
			if o.Output != "" && !strings.HasSuffix(o.Output, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}
