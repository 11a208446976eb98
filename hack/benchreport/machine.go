package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx": the server's version for the machine block
)

// runInfo is one run of the tool: when, on what, at which commit.
type runInfo struct {
	Started   time.Time
	Duration  time.Duration // from the start to the last invocation's end
	Command   string        // how the tool was called
	Commit    string
	CPU       string
	Cores     int
	Procs     int // GOMAXPROCS of the benchmarks
	Memory    string
	Go        string
	OS        string
	Postgres  string
	LoadStart string // 1-minute load average at the start and at the end
	LoadEnd   string
}

// fields lists the run's header in the raw file's order.
func (r *runInfo) fields() [][2]string {
	return [][2]string{
		{"run", r.Started.UTC().Format(time.RFC3339)},
		{"duration", r.Duration.Round(time.Second).String()},
		{"called-as", r.Command},
		{"commit", r.Commit},
		{"cpu", r.CPU},
		{"cores", strconv.Itoa(r.Cores)},
		{"gomaxprocs", strconv.Itoa(r.Procs)},
		{"memory", r.Memory},
		{"go", r.Go},
		{"os", r.OS},
		{"postgres", r.Postgres},
		{"load-start", r.LoadStart},
		{"load-end", r.LoadEnd},
	}
}

// set reads one header field back; unknown keys are errors, so that a
// typo in a hand-edited file does not pass silently.
func (r *runInfo) set(key, value string) error {
	var err error
	switch key {
	case "duration":
		r.Duration, err = time.ParseDuration(value)
	case "called-as":
		r.Command = value
	case "commit":
		r.Commit = value
	case "cpu":
		r.CPU = value
	case "cores":
		r.Cores, err = strconv.Atoi(value)
	case "gomaxprocs":
		r.Procs, err = strconv.Atoi(value)
	case "memory":
		r.Memory = value
	case "go":
		r.Go = value
	case "os":
		r.OS = value
	case "postgres":
		r.Postgres = value
	case "load-start":
		r.LoadStart = value
	case "load-end":
		r.LoadEnd = value
	default:
		return fmt.Errorf("unknown field %q", key)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// describeMachine fills a run's header from the machine it runs on. What
// cannot be read is written as "unknown": the run goes on.
func describeMachine(ctx context.Context, dir string) *runInfo {
	r := &runInfo{Started: time.Now().UTC(), Cores: runtime.NumCPU(), Procs: runtime.GOMAXPROCS(0)}
	r.CPU = cpuModel()
	r.Memory = memTotal()
	r.Go = output(ctx, dir, "go", "env", "GOVERSION") + " " + runtime.GOOS + "/" + runtime.GOARCH
	r.OS = osName()
	r.Commit = commit(ctx, dir)
	r.Postgres = postgres(ctx, os.Getenv("PURSER_TEST_POSTGRES"))
	r.LoadStart = load()
	return r
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				break
			}
			return fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	return "unknown"
}

func osName() string {
	name := runtime.GOOS
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				name = strings.Trim(v, `"`)
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += ", kernel " + strings.TrimSpace(string(data))
	}
	return name
}

func load() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// commit is HEAD, and whether the tree being measured differs from it.
func commit(ctx context.Context, dir string) string {
	c := output(ctx, dir, "git", "rev-parse", "--short=12", "HEAD")
	if c == "unknown" {
		return c
	}
	if status := output(ctx, dir, "git", "status", "--porcelain", "--untracked-files=no"); status != "" && status != "unknown" {
		c += " with uncommitted changes"
	}
	return c
}

// postgres is the server's version and address, never the DSN's
// credentials; "none" without PURSER_TEST_POSTGRES, when the PostgreSQL
// halves are skipped.
func postgres(ctx context.Context, dsn string) string {
	if dsn == "" {
		return "none (PURSER_TEST_POSTGRES unset)"
	}
	where := ""
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		where = " at " + u.Host
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return "unknown" + where
	}
	defer func() { _ = db.Close() }() // only read from
	var version string
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "unreachable" + where
	}
	return version + where
}

// output runs a command for one line of text, "unknown" when it fails.
func output(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
