package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// index answers a section's lookups from the outcomes of one or more runs.
type index struct {
	results map[string]result // "store.BenchmarkClusterCapacity/sqlite"
	skipped map[string]string // same names -> reason
	failed  map[string]string
	outs    []*outcome
	parsed  map[*outcome]parsed
	runs    []*runInfo // the runs the document holds, oldest first
}

func newIndex(outs []*outcome) *index {
	ix := &index{results: map[string]result{}, skipped: map[string]string{}, failed: map[string]string{},
		outs: outs, parsed: map[*outcome]parsed{}}
	for _, o := range outs {
		e, ok := entryByID(o.Entry)
		if !ok {
			continue
		}
		p := parseOutput(o.Output, o.Run.Procs, e.Test, e.Logs)
		ix.parsed[o] = p
		prefix := e.short() + "."
		for _, r := range p.Results {
			ix.results[prefix+r.Name] = r
		}
		for name, why := range p.Skipped {
			ix.skipped[prefix+name] = why
		}
		for name, why := range p.Failed {
			ix.failed[prefix+name] = why
		}
	}
	return ix
}

func (ix *index) value(name, unit string) (float64, string, bool) {
	if r, ok := ix.results[name]; ok {
		if v, ok := r.Metrics[unit]; ok {
			return v, "", true
		}
		return 0, "—", false
	}
	// A skipped or failed benchmark, or its parent.
	for n := name; ; {
		if _, ok := ix.skipped[n]; ok {
			return 0, "skipped", false
		}
		if _, ok := ix.failed[n]; ok {
			return 0, "failed", false
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			break
		}
		n = n[:i]
	}
	// Or the invocation that should have produced it.
	o := ix.producer(name)
	switch {
	case o == nil:
		return 0, "not run", false
	case o.Status != "ok":
		return 0, "failed", false
	}
	return 0, "—", false
}

// producer is the outcome whose entry runs the named benchmark.
func (ix *index) producer(name string) *outcome {
	pkg, rest, _ := strings.Cut(name, ".")
	top, _, _ := strings.Cut(rest, "/")
	for _, o := range ix.outs {
		e, ok := entryByID(o.Entry)
		if !ok || e.short() != pkg {
			continue
		}
		if e.Test == top || (e.Bench != "" && regexp.MustCompile(e.Bench).MatchString(top)) {
			return o
		}
	}
	return nil
}

// runOf names the run that measured a result, "run 3", when the document
// holds more than one.
func (ix *index) runOf(name string) string {
	o := ix.producer(name)
	if o == nil || len(ix.runs) < 2 {
		return ""
	}
	return fmt.Sprintf("run %d", slices.Index(ix.runs, o.Run)+1)
}

func entryByID(id string) (entry, bool) {
	for _, e := range plan {
		if e.ID == id {
			return e, true
		}
	}
	return entry{}, false
}

// generate renders every block the outcomes can fill: "machine" and each
// section that at least one of its entries has an outcome for. rawLink is
// the raw file's path relative to the document, rawPath relative to the
// module.
func generate(runs []*runInfo, outs []*outcome, rawLink, rawPath string) map[string]string {
	blocks := map[string]string{}
	ix := newIndex(outs)
	used := usedRuns(runs, outs)
	ix.runs = used
	if len(used) > 0 {
		blocks["machine"] = machineBlock(used, outs, rawLink, rawPath)
		blocks[summary.ID] = summary.markdown(ix)
	}
	for _, s := range sections {
		var mine []*outcome
		for _, o := range outs {
			if e, ok := entryByID(o.Entry); ok && e.Section == s.ID {
				mine = append(mine, o)
			}
		}
		if len(mine) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString(s.markdown(ix))
		b.WriteString("\n")
		b.WriteString(provenance(mine, used))
		for _, o := range mine {
			e, _ := entryByID(o.Entry)
			skipped := ix.parsed[o].Skipped
			for _, n := range sortedKeys(skipped) {
				fmt.Fprintf(&b, "\nSkipped: `%s.%s`%s.", e.short(), n, reason(skipped[n]))
			}
		}
		for _, o := range mine {
			e, _ := entryByID(o.Entry)
			failed := ix.parsed[o].Failed
			for _, n := range sortedKeys(failed) {
				if failed[n] != "" {
					fmt.Fprintf(&b, "\nFailed: `%s.%s`%s.", e.short(), n, reason(failed[n]))
				}
			}
			if o.Status != "ok" {
				fmt.Fprintf(&b, "\nFailed: `%s` (%s); its output is in the raw file.", o.Command, o.Status)
			}
		}
		b.WriteString("\n")
		blocks[s.ID] = b.String()
	}
	return blocks
}

func reason(why string) string {
	if why == "" {
		return ""
	}
	if len(why) > 120 {
		why = why[:strings.LastIndexByte(why[:120], ' ')] + " …"
	}
	return " (" + strings.ReplaceAll(why, "`", "'") + ")"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// usedRuns are the runs that still have an outcome, oldest first.
func usedRuns(runs []*runInfo, outs []*outcome) []*runInfo {
	var used []*runInfo
	for _, r := range runs {
		if slices.ContainsFunc(outs, func(o *outcome) bool { return o.Run == r }) {
			used = append(used, r)
		}
	}
	slices.SortStableFunc(used, func(a, b *runInfo) int { return a.Started.Compare(b.Started) })
	return used
}

// provenance says which commands gave a table, how long each took and,
// when the document holds more than one run, which run.
func provenance(outs []*outcome, runs []*runInfo) string {
	var parts []string
	for _, o := range outs {
		p := "`" + o.Command + "` (" + duration(o.Elapsed)
		if len(runs) > 1 {
			p += fmt.Sprintf(", run %d", slices.Index(runs, o.Run)+1)
		}
		parts = append(parts, p+")")
	}
	return "Measured by " + strings.Join(parts, " and ") + "."
}

// machineBlock describes each run: the machine, the tree, the load.
func machineBlock(runs []*runInfo, outs []*outcome, rawLink, rawPath string) string {
	var b strings.Builder
	if len(runs) == 1 {
		fmt.Fprintf(&b, "Generated by `make bench` from one run; the raw `go test` output is in [%s](%s), and\n", rawLink, rawLink)
	} else {
		fmt.Fprintf(&b, "Generated by `make bench` from %d runs (a later run with `-only` replaced some tables); the raw\n`go test` output is in [%s](%s), and\n", len(runs), rawLink, rawLink)
	}
	fmt.Fprintf(&b, "`go run ./hack/benchreport -from %s` regenerates the tables from it.\n\n", rawPath)
	head := []string{""}
	if len(runs) == 1 {
		head = append(head, "run")
	} else {
		for i := range runs {
			head = append(head, fmt.Sprintf("run %d", i+1))
		}
	}
	rows := [][]string{head, slices.Repeat([]string{"---"}, len(head))}
	add := func(label string, f func(r *runInfo) string) {
		row := []string{label}
		for _, r := range runs {
			row = append(row, f(r))
		}
		rows = append(rows, row)
	}
	if len(runs) > 1 {
		add("tables", func(r *runInfo) string {
			var ids []string
			for _, o := range outs {
				if e, ok := entryByID(o.Entry); o.Run == r && ok && !slices.Contains(ids, e.Section) {
					ids = append(ids, e.Section)
				}
			}
			return strings.Join(ids, ", ")
		})
	}
	add("date", func(r *runInfo) string {
		return r.Started.UTC().Format("2006-01-02 15:04 UTC") + ", " + duration(r.Duration)
	})
	add("command", func(r *runInfo) string { return "`" + r.Command + "`" })
	add("commit", func(r *runInfo) string { return r.Commit })
	add("CPU", func(r *runInfo) string {
		return fmt.Sprintf("%s, %d cores, GOMAXPROCS %d", r.CPU, r.Cores, r.Procs)
	})
	add("memory", func(r *runInfo) string { return r.Memory })
	add("Go", func(r *runInfo) string { return r.Go })
	add("OS", func(r *runInfo) string { return r.OS })
	add("PostgreSQL", func(r *runInfo) string { return r.Postgres })
	add("load average (1 min)", func(r *runInfo) string {
		return r.LoadStart + " at the start, " + r.LoadEnd + " at the end"
	})
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	return b.String()
}

// duration prints a duration the way the document does: "2 min 10 s",
// "38 s".
func duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d >= time.Minute:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d s", int(d.Seconds()))
}

// rewrite replaces the text between each <!-- bench:ID begin --> and
// <!-- bench:ID end --> for which blocks has an ID, keeping every other
// line as written. It returns the IDs of blocks the document has no
// markers for; unmatched, nested or repeated markers are errors, and then
// nothing is rewritten.
func rewrite(doc string, blocks map[string]string) (string, []string, error) {
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	seen := map[string]bool{}
	open := ""
	for n, line := range lines {
		id, kind := marker(line)
		switch {
		case kind == "" && open != "" && blocks[open] != "":
			continue // old generated text
		case kind == "":
			out.WriteString(line)
			continue
		case kind == "begin" && open != "":
			return "", nil, fmt.Errorf("line %d: bench:%s begins inside bench:%s", n+1, id, open)
		case kind == "begin" && seen[id]:
			return "", nil, fmt.Errorf("line %d: bench:%s appears twice", n+1, id)
		case kind == "begin":
			open, seen[id] = id, true
			out.WriteString(line)
			if text, ok := blocks[id]; ok && text != "" {
				out.WriteString("\n" + strings.TrimRight(text, "\n") + "\n\n")
			}
		case kind == "end" && open != id:
			return "", nil, fmt.Errorf("line %d: bench:%s ends without its begin", n+1, id)
		default:
			open = ""
			out.WriteString(line)
		}
	}
	if open != "" {
		return "", nil, fmt.Errorf("bench:%s has no end", open)
	}
	var missing []string
	for id := range blocks {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	return out.String(), missing, nil
}

var markerLine = regexp.MustCompile(`^\s*<!--\s*bench:([A-Za-z0-9_.-]+)\s+(begin|end)\s*-->\s*$`)

func marker(line string) (id, kind string) {
	m := markerLine.FindStringSubmatch(line)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}
