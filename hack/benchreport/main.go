// Command benchreport runs every benchmark behind docs/benchmarks.md and
// regenerates the document's tables from that one run, so that each figure
// stands next to its ceiling or peer measured in the same run, on a machine
// the document names. `make bench` runs it.
//
// The invocations are the table plan (plan.go); each feeds one table,
// written between <!-- bench:ID begin --> and <!-- bench:ID end --> in the
// document, whose other text is kept as written. The raw go test output is
// kept beside the document (docs/benchmarks.raw.txt) so that the tables can
// be audited and regenerated with -from. A run with -only replaces the
// outcomes of its invocations in the raw file and keeps the others, so the
// document stays whole and says which run gave which table.
//
//	go run ./hack/benchreport                 everything, about 15 minutes
//	go run ./hack/benchreport -only 'stream|capacity'
//	go run ./hack/benchreport -dry            the plan, nothing run
//	go run ./hack/benchreport -from docs/benchmarks.raw.txt
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type options struct {
	only    *regexp.Regexp
	dry     bool
	from    string
	doc     string
	raw     string
	verbose bool
	command string // how the tool was called, for the document
}

func parseFlags(args []string, w io.Writer) (options, error) {
	fl := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fl.SetOutput(w)
	only := fl.String("only", "", "run only the invocations whose id, section or package matches this regexp")
	dry := fl.Bool("dry", false, "print the plan and run nothing")
	from := fl.String("from", "", "regenerate the document from this raw file, running nothing")
	doc := fl.String("doc", "docs/benchmarks.md", "the document, relative to the module's folder")
	raw := fl.String("raw", "docs/benchmarks.raw.txt", "where the raw output of a run is kept, relative to the module's folder")
	verbose := fl.Bool("v", false, "show all of go test's output, not only the results")
	if err := fl.Parse(args); err != nil {
		return options{}, err
	}
	if fl.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	o := options{dry: *dry, from: *from, doc: *doc, raw: *raw, verbose: *verbose}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return options{}, fmt.Errorf("-only: %w", err)
		}
		o.only = re
	}
	words := []string{"go run ./hack/benchreport"}
	fl.Visit(func(f *flag.Flag) {
		if f.Name != "v" {
			words = append(words, "-"+f.Name+" "+shellQuote(f.Value.String()))
		}
	})
	o.command = strings.Join(words, " ")
	return o, nil
}

func run(ctx context.Context, args []string, w io.Writer) error {
	opts, err := parseFlags(args, w)
	if err != nil {
		return err
	}
	selected := selectEntries(opts.only)
	if len(selected) == 0 {
		return fmt.Errorf("-only %s matches no invocation; -dry lists them", opts.only)
	}
	if opts.dry {
		printPlan(w, selected)
		return nil
	}
	dir, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	docPath, rawPath := inModule(dir, opts.doc), inModule(dir, opts.raw)
	if opts.from != "" {
		runs, outs, err := readRaw(opts.from)
		if err != nil {
			return err
		}
		return writeDoc(w, dir, docPath, opts.from, runs, outs)
	}

	oldRuns, oldOuts, err := readRaw(rawPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if os.Getenv("PURSER_TEST_POSTGRES") == "" {
		fmt.Fprintln(w, "PURSER_TEST_POSTGRES is unset: the PostgreSQL halves will be skipped (see the README)")
	}
	info := describeMachine(ctx, dir)
	info.Command = opts.command
	fmt.Fprintf(w, "%d invocations, about %s; raw output to %s\n", len(selected), duration(estimate(selected)), opts.raw)

	r := runner{dir: dir, w: w, verbose: opts.verbose}
	var fresh []*outcome
	var failed []string
	for i, e := range selected {
		if ctx.Err() != nil {
			break
		}
		o := r.run(ctx, e, i+1, len(selected), info)
		if o.Status == "interrupted" {
			break
		}
		fresh = append(fresh, o)
		if o.Status != "ok" {
			failed = append(failed, e.ID)
		}
		info.Duration, info.LoadEnd = time.Since(info.Started), load()
		runs, outs := merge(oldRuns, oldOuts, info, fresh)
		if err := os.WriteFile(rawPath, []byte(formatRaw(runs, outs)), 0o644); err != nil {
			return fmt.Errorf("write raw output: %w", err)
		}
	}
	if len(fresh) > 0 {
		runs, outs := merge(oldRuns, oldOuts, info, fresh)
		if err := writeDoc(w, dir, docPath, rawPath, runs, outs); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%d of %d invocations in %s\n", len(fresh), len(selected), duration(time.Since(info.Started)))
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted after %d of %d invocations; the document holds those", len(fresh), len(selected))
	case len(failed) > 0:
		return fmt.Errorf("failed: %s (their output is in %s)", strings.Join(failed, ", "), opts.raw)
	}
	return nil
}

func selectEntries(only *regexp.Regexp) []entry {
	var out []entry
	for _, e := range plan {
		if e.Long && (only == nil || !only.MatchString(e.ID)) {
			continue // run only when -only names it
		}
		if only == nil || only.MatchString(e.ID) || only.MatchString(e.Section) || only.MatchString(e.Pkg) {
			out = append(out, e)
		}
	}
	return out
}

func estimate(es []entry) time.Duration {
	var total time.Duration
	for _, e := range es {
		total += e.Estimate
	}
	return total
}

func printPlan(w io.Writer, es []entry) {
	for i, e := range es {
		fmt.Fprintf(w, "%2d. %-21s -> %-21s about %-11s %s\n", i+1, e.ID, e.Section, duration(e.Estimate), e.command())
	}
	fmt.Fprintf(w, "total: about %s, plus building the test binaries\n", duration(estimate(es)))
}

// merge puts a run's fresh outcomes in place of the older outcomes of the
// same invocations; the result is in the plan's order.
func merge(oldRuns []*runInfo, oldOuts []*outcome, run *runInfo, fresh []*outcome) ([]*runInfo, []*outcome) {
	outs := slices.Clone(fresh)
	for _, o := range oldOuts {
		if _, known := entryByID(o.Entry); !known {
			continue
		}
		if !slices.ContainsFunc(fresh, func(f *outcome) bool { return f.Entry == o.Entry }) {
			outs = append(outs, o)
		}
	}
	order := func(o *outcome) int {
		return slices.IndexFunc(plan, func(e entry) bool { return e.ID == o.Entry })
	}
	slices.SortStableFunc(outs, func(a, b *outcome) int { return order(a) - order(b) })
	return usedRuns(append(slices.Clone(oldRuns), run), outs), outs
}

func readRaw(path string) ([]*runInfo, []*outcome, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	runs, outs, err := parseRaw(string(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return runs, outs, nil
}

// writeDoc regenerates the document's tables from the outcomes.
func writeDoc(w io.Writer, dir, docPath, rawPath string, runs []*runInfo, outs []*outcome) error {
	for _, o := range outs {
		if _, ok := entryByID(o.Entry); !ok {
			fmt.Fprintf(w, "the raw output of %q is ignored: no such invocation in the plan\n", o.Entry)
		}
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	text, missing, err := rewrite(string(doc), generate(runs, outs, relative(filepath.Dir(docPath), rawPath), relative(dir, rawPath)))
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	for _, id := range missing {
		fmt.Fprintf(w, "%s has no <!-- bench:%s begin --> marker: that table is not written\n", docPath, id)
	}
	if err := os.WriteFile(docPath, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", docPath)
	return nil
}

// relative is path from dir when it can be said, else path as given.
func relative(dir, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

func inModule(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// moduleDir is the main module's folder, where go test runs and the
// document lives.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the purser repository")
	}
	return filepath.Dir(mod), nil
}
