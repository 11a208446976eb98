package soak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"

	"github.com/purser-io/purser/internal/backoff"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/test/soak/farm"
)

// Faults, as the summary counts them.
const (
	faultKillPurser = "kill-purser"
	faultKillNATS   = "kill-nats"
	faultAPIServer  = "apiserver-stop"
	faultAgentCut   = "agent-cut"
	faultPostgres   = "postgres-restart"
)

// injector breaks the farm while the load runs: one loop kills a random
// purser component with SIGKILL every few seconds and starts it again
// after a few more; another takes down, one at a time, a NATS node, a
// cluster's kube-apiserver, a cluster's agent or (when allowed)
// PostgreSQL, and brings it back. Every fault is undone before its loop
// goes on, also when the load stops in the middle of it.
type injector struct {
	t        *testing.T
	f        *farm.Farm
	clusters []*sandbox.Cluster
	pg       *pgRestarter // nil: no PostgreSQL restarts
	procRng  *rand.Rand
	infraRng *rand.Rand
	enabled  map[string]bool

	mu sync.Mutex
	n  map[string]int
}

func newInjector(t *testing.T, f *farm.Farm, clusters []*sandbox.Cluster, seed int64, pg *pgRestarter, kinds []string) *injector {
	enabled := map[string]bool{}
	for _, k := range kinds {
		switch k = strings.TrimSpace(k); k {
		case faultKillPurser, faultKillNATS, faultAPIServer, faultAgentCut, faultPostgres:
			enabled[k] = true
		case "":
		default:
			t.Fatalf("unknown fault %q in -soak.faults", k)
		}
	}
	if pg == nil {
		delete(enabled, faultPostgres)
	}
	return &injector{
		t: t, f: f, clusters: clusters, pg: pg, n: map[string]int{}, enabled: enabled,
		procRng:  rand.New(rand.NewPCG(uint64(seed), 3)),
		infraRng: rand.New(rand.NewPCG(uint64(seed), 4)),
	}
}

func (in *injector) run(ctx context.Context) {
	var wg sync.WaitGroup
	if in.enabled[faultKillPurser] {
		wg.Go(func() { in.killComponents(ctx) })
	}
	wg.Go(func() { in.breakInfrastructure(ctx) })
	wg.Wait()
}

func (in *injector) record(fault, format string, args ...any) {
	in.mu.Lock()
	in.n[fault]++
	in.mu.Unlock()
	in.t.Logf("%s fault %s: %s", stamp(), fault, fmt.Sprintf(format, args...))
}

func (in *injector) counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for k, v := range in.n {
		out[k] = v
	}
	return out
}

// stamp is the time of day for the soak's log lines, to read beside the
// processes' logs.
func stamp() string { return time.Now().UTC().Format("15:04:05.000") }

// between is a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func (in *injector) killComponents(ctx context.Context) {
	for {
		if !backoff.Sleep(ctx, between(in.procRng, 5*time.Second, 10*time.Second)) {
			return
		}
		procs := in.f.Components()
		p := procs[in.procRng.IntN(len(procs))]
		if !p.Running() {
			continue // crashed and waiting for its restart
		}
		down := between(in.procRng, 2*time.Second, 5*time.Second)
		in.record(faultKillPurser, "kill -9 %s (pid %d), back in %s", p.Name, p.Pid(), down.Round(100*time.Millisecond))
		p.Kill()
		backoff.Sleep(ctx, down)
		if err := p.Start(); err != nil {
			in.t.Errorf("restart %s: %v", p.Name, err)
		}
	}
}

func (in *injector) breakInfrastructure(ctx context.Context) {
	var kinds []string
	for _, k := range []string{faultKillNATS, faultAPIServer, faultAgentCut, faultPostgres} {
		if in.enabled[k] {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return
	}
	// Every kind once, in a random order, then at random.
	order := append([]string(nil), kinds...)
	in.infraRng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; ; i++ {
		if !backoff.Sleep(ctx, between(in.infraRng, 3*time.Second, 8*time.Second)) {
			return
		}
		kind := kinds[in.infraRng.IntN(len(kinds))]
		if i < len(order) {
			kind = order[i]
		}
		c := in.clusters[in.infraRng.IntN(len(in.clusters))]
		switch kind {
		case faultKillNATS:
			in.killNATS(ctx)
		case faultAPIServer:
			down := between(in.infraRng, 20*time.Second, 30*time.Second)
			in.record(kind, "stop the kube-apiserver of %s for %s", c.Name(), down.Round(time.Second))
			c.StopAPIServer()
			backoff.Sleep(ctx, down)
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := c.StartAPIServer(sctx); err != nil {
				in.t.Errorf("start the kube-apiserver of %s again: %v", c.Name(), err)
			}
			cancel()
		case faultAgentCut:
			agent := in.f.Agent(c.Name())
			down := between(in.infraRng, 20*time.Second, 45*time.Second)
			in.record(kind, "kill -9 %s for %s", agent.Name, down.Round(time.Second))
			agent.Kill()
			backoff.Sleep(ctx, down)
			if err := agent.Start(); err != nil {
				in.t.Errorf("restart %s: %v", agent.Name, err)
			}
		case faultPostgres:
			if skipped, err := in.pg.restart(context.Background()); err != nil {
				in.t.Errorf("restart PostgreSQL: %v", err)
			} else if skipped != "" {
				in.t.Logf("%s fault %s skipped: %s", stamp(), kind, skipped)
			} else {
				in.record(kind, "pg_ctlcluster %s %s restart -m fast", in.pg.version, in.pg.cluster)
			}
		}
	}
}

// killNATS kills one node, starts it again after a few seconds, and waits
// until it has caught up, so that no two nodes are ever down together
// (three nodes keep a quorum with one down, not with two).
func (in *injector) killNATS(ctx context.Context) {
	nodes := in.f.NATS.Nodes
	p := nodes[in.infraRng.IntN(len(nodes))]
	down := between(in.infraRng, 5*time.Second, 10*time.Second)
	in.record(faultKillNATS, "kill -9 %s for %s", p.Name, down.Round(100*time.Millisecond))
	p.Kill()
	backoff.Sleep(ctx, down)
	if err := p.Start(); err != nil {
		in.t.Errorf("restart %s: %v", p.Name, err)
		return
	}
	start := time.Now()
	if err := in.f.NATS.WaitHealthy(context.Background(), 2*time.Minute); err != nil {
		in.t.Errorf("NATS after restarting %s: %v", p.Name, err)
		return
	}
	in.t.Logf("%s fault %s: cluster healthy again %s after %s started", stamp(), faultKillNATS, time.Since(start).Round(100*time.Millisecond), p.Name)
}

// pgRestarter restarts the machine's PostgreSQL server, which the tests of
// other packages may be using at the same time: it only restarts when no
// database but the soak's own (and the admin database it was created
// from) has a client.
type pgRestarter struct {
	version, cluster string
	db               *sql.DB // the soak's database
	skip             []string
}

func postgresRestarter(dsn string, asked bool) (*pgRestarter, error) {
	if !asked {
		return nil, errors.New("not asked for (-soak.restart-postgres)")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("pg_ctlcluster needs root")
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		return nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("PostgreSQL at %s is not on this machine", u.Host)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	out, err := exec.Command("pg_lsclusters", "-h").Output()
	if err != nil {
		return nil, fmt.Errorf("pg_lsclusters: %w", err)
	}
	p := &pgRestarter{skip: []string{strings.TrimPrefix(u.Path, "/")}}
	for _, line := range strings.Split(string(out), "\n") {
		// version cluster port status owner data-directory log-file
		if f := strings.Fields(line); len(f) >= 4 && f[2] == port && f[3] == "online" {
			p.version, p.cluster = f[0], f[1]
		}
	}
	if p.cluster == "" {
		return nil, fmt.Errorf("pg_lsclusters lists no online cluster on port %s", port)
	}
	if admin := os.Getenv("PURSER_TEST_POSTGRES"); admin != "" {
		if au, err := url.Parse(admin); err == nil {
			p.skip = append(p.skip, strings.TrimPrefix(au.Path, "/"))
		}
	}
	if p.db, err = sql.Open("pgx", dsn); err != nil {
		return nil, err
	}
	return p, nil
}

// restart restarts the server, or says why it did not.
func (p *pgRestarter) restart(ctx context.Context) (skipped string, err error) {
	rows, err := p.db.QueryContext(ctx, `SELECT datname FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND datname IS NOT NULL AND pid <> pg_backend_pid()`)
	if err != nil {
		return "", fmt.Errorf("who uses the server: %w", err)
	}
	others := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return "", err
		}
		if !slices.Contains(p.skip, name) {
			others[name] = true
		}
	}
	rows.Close()
	if len(others) > 0 {
		names := make([]string, 0, len(others))
		for n := range others {
			names = append(names, n)
		}
		sort.Strings(names)
		return "other databases have clients: " + strings.Join(names, ", "), nil
	}
	out, err := exec.CommandContext(ctx, "pg_ctlcluster", p.version, p.cluster, "restart", "-m", "fast").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pg_ctlcluster %s %s restart: %w: %s", p.version, p.cluster, err, out)
	}
	return "", nil
}

// close releases the connection pool.
func (p *pgRestarter) close() { p.db.Close() }
