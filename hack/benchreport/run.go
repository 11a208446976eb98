package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// args are the go command's arguments for e. Benchmarks run with -v so
// that skips and failures are named in the output.
func (e entry) args() []string {
	timeout := goDuration(e.Timeout)
	if e.Test != "" {
		return []string{"test", "-count=1", "-run", "^" + e.Test + "$", "-v", "-timeout", timeout, e.Pkg}
	}
	a := []string{"test", "-run", "^$", "-bench", e.Bench}
	if e.Benchtime != "" {
		a = append(a, "-benchtime", e.Benchtime)
	}
	return append(a, "-v", "-timeout", timeout, e.Pkg)
}

// goDuration prints whole minutes and hours as one would type them,
// "40m" rather than "40m0s".
func goDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// command is e as one would type it in a shell.
func (e entry) command() string {
	words := append([]string(nil), e.Env...)
	words = append(words, "go")
	for _, a := range e.args() {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;()<>*?[]{}~!#^") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runner runs the plan's invocations one after another in the module's
// folder, telling progress on w.
type runner struct {
	dir     string
	w       io.Writer
	verbose bool // copy all of go test's output to w, not only results
}

// run runs e, the i-th of n, and returns its outcome; the outcome's
// Status says whether go test succeeded.
func (r runner) run(ctx context.Context, e entry, i, n int, run *runInfo) *outcome {
	tag := fmt.Sprintf("[%d/%d] %s", i, n, e.ID)
	what := e.Bench
	if e.Test != "" {
		what = e.Test
	}
	if e.Benchtime != "" {
		what += " -benchtime " + e.Benchtime
	}
	fmt.Fprintf(r.w, "%s: %s %s (about %s)\n", tag, strings.TrimSuffix(strings.TrimPrefix(e.Pkg, "./"), "/"), what, duration(e.Estimate))
	o := &outcome{Entry: e.ID, Run: run, Command: e.command()}
	start := time.Now()
	output, err := r.exec(ctx, e, tag, start)
	o.Elapsed = time.Since(start)
	o.Output = output
	switch {
	case err == nil:
		o.Status = "ok"
	case strings.Contains(output, "panic: test timed out after"):
		o.Status = "timed out after " + goDuration(e.Timeout)
	case ctx.Err() != nil:
		o.Status = "interrupted"
	default:
		o.Status = err.Error()
	}
	fmt.Fprintf(r.w, "%s: %s, %s\n", tag, o.Status, duration(o.Elapsed))
	return o
}

// exec runs go test and collects its output, stdout and stderr as one
// stream, as go test itself prints them.
func (r runner) exec(ctx context.Context, e entry, tag string, start time.Time) (string, error) {
	cmd := exec.CommandContext(ctx, "go", e.args()...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), e.Env...)
	// An interrupt lets go test stop its test binary, which stops its
	// sandbox clusters; a kill would leave them running.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return "", err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var out strings.Builder
	var waitErr error
	done := false
	var grace <-chan time.Time
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if !done {
					waitErr = <-exited
				}
				return out.String(), waitErr
			}
			out.WriteString(line)
			out.WriteByte('\n')
			r.echo(tag, e, line)
		case waitErr = <-exited:
			done = true
			// A process the test started and left behind may still
			// hold the pipe; what go test wrote is read by now.
			grace = time.After(5 * time.Second)
		case <-grace:
			pr.Close()
		case <-tick.C:
			fmt.Fprintf(r.w, "%s: running, %s\n", tag, duration(time.Since(start)))
		}
	}
}

// echo shows the lines that tell progress: each benchmark as it starts
// and ends, skips, failures, a test's figures.
func (r runner) echo(tag string, e entry, line string) {
	if r.verbose {
		fmt.Fprintln(r.w, line)
		return
	}
	trimmed := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "Benchmark") && !strings.ContainsAny(line, " \t"):
		fmt.Fprintf(r.w, "    %s ...\n", line)
	case benchLine.MatchString(line):
		fmt.Fprintf(r.w, "    %s\n", strings.Join(strings.Fields(line), " "))
	case strings.HasPrefix(trimmed, "--- SKIP") || strings.HasPrefix(trimmed, "--- FAIL") ||
		strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:"):
		fmt.Fprintf(r.w, "    %s\n", trimmed)
	default:
		for _, lm := range e.Logs {
			if lm.Pattern.MatchString(line) {
				fmt.Fprintf(r.w, "    %s\n", trimmed)
			}
		}
	}
}
