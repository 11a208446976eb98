package scale_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/platform/localport"
)

// The ingester runs in a process of its own, as `purser ingester` does,
// so that its memory is its own and not the load generator's, the NATS
// server's or the API's. The child is this test binary again, told by
// ingesterEnv to run the ingester instead of the tests.
const ingesterEnv = "PURSER_SCALE_INGESTER"

// TestMain runs the ingester when this binary is the child, the tests
// otherwise.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(ingesterEnv); cfg != "" {
		if err := runIngester(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "ingester:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ingesterConfig is what the parent hands the child, as JSON-free
// key=value pairs separated by spaces: database, nats, key file and
// metrics address, the flags of `purser ingester`.
type ingesterConfig struct {
	Database, NATS, KeyFile, MetricsListen string
}

func (c ingesterConfig) encode() string {
	return strings.Join([]string{"database=" + c.Database, "nats=" + c.NATS, "key=" + c.KeyFile, "metrics=" + c.MetricsListen}, " ")
}

func decodeIngesterConfig(s string) ingesterConfig {
	var c ingesterConfig
	for _, kv := range strings.Fields(s) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "database":
			c.Database = v
		case "nats":
			c.NATS = v
		case "key":
			c.KeyFile = v
		case "metrics":
			c.MetricsListen = v
		}
	}
	return c
}

// runIngester is `purser ingester` (cmd/purser's runComponent): the hub
// opened from its flags and the ingester component built on it, until
// SIGTERM.
func runIngester(encoded string) error {
	cfg := decodeIngesterConfig(encoded)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// PURSER_BENCH_CPUPROFILE names a file for the ingester's CPU profile,
	// written when it stops: where its time goes at design size.
	if path := os.Getenv("PURSER_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := compose.OpenHub(ctx, compose.HubConfig{Name: "ingester", Database: cfg.Database, NATS: cfg.NATS,
		KeyFile: cfg.KeyFile, MetricsListen: cfg.MetricsListen, Logger: log})
	if err != nil {
		return err
	}
	defer h.Close()
	c, err := compose.Ingester(h, compose.IngesterConfig{})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// ingesterProcess is the running child.
type ingesterProcess struct {
	cmd     *exec.Cmd
	metrics string // URL of its /metrics
	done    chan error
	stderr  *tailBuffer
}

// startIngester starts the child on dsn and natsURL; it is stopped when
// the test ends, if not before.
func startIngester(t testing.TB, dsn, natsURL string) *ingesterProcess {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	if _, err := seal.EnsureKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := ingesterConfig{Database: dsn, NATS: natsURL, KeyFile: keyFile, MetricsListen: addr}
	p := &ingesterProcess{metrics: "http://" + addr + "/metrics", done: make(chan error, 1), stderr: &tailBuffer{max: 64 << 10}}
	// Its life is the test's, ended by stop (SIGTERM, then SIGKILL), not
	// by a context.
	p.cmd = exec.CommandContext(context.Background(), os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), ingesterEnv+"="+cfg.encode())
	p.cmd.Stderr = io.MultiWriter(p.stderr, os.Stderr)
	// The child dies with this process even if the test is killed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	// Ready once it serves its metrics (OpenHub serves them first) and
	// the ingester is built; the first fetch does the rest.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := p.sample(context.Background()); err == nil {
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("the ingester exited: %v\n%s", err, p.stderr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ingester serves no metrics after a minute\n%s", p.stderr)
		}
	}
}

func (p *ingesterProcess) stop(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var exited error
	select {
	case exited = <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		exited = <-p.done
		t.Logf("the ingester did not stop within 30 s of SIGTERM; killed")
	}
	// Stopped by a signal, its exit status says nothing more.
	_ = exited
}

// memory is one reading of the child's memory.
type memory struct {
	heapInUse, rss float64 // bytes
}

// sample reads the child's Go heap in use from its /metrics and its
// resident set from /proc (the same figure as process_resident_memory_bytes,
// without waiting for a scrape to compute it).
func (p *ingesterProcess) sample(ctx context.Context) (memory, error) {
	var m memory
	req, err := http.NewRequestWithContext(ctx, "GET", p.metrics, http.NoBody)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			m.heapInUse, _ = strconv.ParseFloat(v, 64)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			m.rss = kb * 1024
		}
	}
	return m, nil
}

// peakMemory samples the child every interval until ctx is done and
// returns the largest readings.
func (p *ingesterProcess) peakMemory(ctx context.Context, interval time.Duration) func() memory {
	var (
		mu   sync.Mutex
		peak memory
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if m, err := p.sample(ctx); err == nil {
				mu.Lock()
				peak.heapInUse, peak.rss = max(peak.heapInUse, m.heapInUse), max(peak.rss, m.rss)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() memory {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// tailBuffer keeps the last max bytes written to it, for a failure's
// message.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
