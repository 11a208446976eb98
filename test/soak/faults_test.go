package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"

	"github.com/purser-io/purser/internal/platform/reconcile"
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
	procRng  *rand.Rand
	infraRng *rand.Rand
	enabled  map[string]bool

	mu sync.Mutex
	n  map[string]int
}

func newInjector(t *testing.T, f *farm.Farm, clusters []*sandbox.Cluster, seed int64, kinds []string) *injector {
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
	if f.Postgres == nil {
		delete(enabled, faultPostgres) // the database is not the farm's to restart
	}
	return &injector{
		t: t, f: f, clusters: clusters, n: map[string]int{}, enabled: enabled,
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
		if !reconcile.Sleep(ctx, between(in.procRng, 5*time.Second, 10*time.Second)) {
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
		reconcile.Sleep(ctx, down)
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
		if !reconcile.Sleep(ctx, between(in.infraRng, 3*time.Second, 8*time.Second)) {
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
			reconcile.Sleep(ctx, down)
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
			reconcile.Sleep(ctx, down)
			if err := agent.Start(); err != nil {
				in.t.Errorf("restart %s: %v", agent.Name, err)
			}
		case faultPostgres:
			in.restartPostgres(ctx)
		}
	}
}

// restartPostgres stops the farm's PostgreSQL server, by a fast shutdown
// or by kill -9 of the whole server (then it recovers from its WAL), and
// starts it again a few seconds later.
func (in *injector) restartPostgres(ctx context.Context) {
	pg := in.f.Postgres
	down := between(in.infraRng, 2*time.Second, 6*time.Second)
	if in.infraRng.IntN(2) == 0 {
		in.record(faultPostgres, "fast shutdown of PostgreSQL, down %s", down.Round(100*time.Millisecond))
		pg.Server.Stop(30 * time.Second)
	} else {
		in.record(faultPostgres, "kill -9 PostgreSQL, down %s", down.Round(100*time.Millisecond))
		pg.Server.Kill()
	}
	reconcile.Sleep(ctx, down)
	if err := pg.Server.Start(); err != nil {
		in.t.Errorf("start PostgreSQL again: %v", err)
		return
	}
	start := time.Now()
	if err := pg.WaitReady(context.Background()); err != nil {
		in.t.Errorf("PostgreSQL after its restart: %v", err)
		return
	}
	in.t.Logf("%s fault %s: accepting connections %s after its start", stamp(), faultPostgres, time.Since(start).Round(100*time.Millisecond))
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
	reconcile.Sleep(ctx, down)
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
