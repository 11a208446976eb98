package soak

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

// startDCFarm starts the three-DC farm on the shared clusters, one per
// DC, and waits until purser judges every cluster Ready.
func startDCFarm(ctx context.Context, t *testing.T, dir string, controllerArgs, agentArgs []string, opts ...func(*farm.DCConfig)) (*farm.DCFarm, []*sandbox.Cluster) {
	t.Helper()
	if os.Geteuid() != 0 {
		// CI runs as root: there the DC soak must run.
		if os.Getenv("CI") != "" {
			t.Fatal("the DC farm needs root (network namespaces)")
		}
		t.Skip("the DC farm needs root: network namespaces")
	}
	type built struct {
		bins *farm.Binaries
		err  error
	}
	binsc := make(chan built, 1)
	go func() {
		bins, err := farm.Build(ctx)
		binsc <- built{bins, err}
	}()
	clusters := env.Clusters(t)
	b := <-binsc
	if b.err != nil {
		t.Fatal(b.err)
	}
	start := time.Now()
	cfg := farm.DCConfig{
		Dir: dir, Binaries: b.bins, Etcd: env.Binaries(t).Path("etcd"), Clusters: clusters,
		ControllerArgs: controllerArgs, AgentArgs: agentArgs, Logf: t.Logf,
	}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := farm.StartDC(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	waitClustersReadyVia(t, f.API, clusters)
	t.Logf("dc farm: %d processes in %d DCs up in %s, logs in %s", len(f.Processes()), len(f.DCs), time.Since(start).Round(time.Second), dir)
	return f, clusters
}

// TestDCFarmCut proves that a partition cuts a DC off completely: while
// dc-2 is partitioned, no connection from another DC reaches anything
// listening in dc-2 and none from dc-2 reaches the others, inside dc-2
// everything still answers, and the WAN forwards no packet to or from
// dc-2. The WAN is the only way between DCs (the farm's TestWANNoWayOut),
// so no other path exists to check.
func TestDCFarmCut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the three-DC farm")
	}
	ctx := t.Context()
	f, _ := startDCFarm(ctx, t, keptDir(t), nil, nil)
	cut := f.DCs[1]

	listening := map[string][]netip.AddrPort{}
	for _, dc := range f.DCs {
		listening[dc.Name] = listeningPorts(t, dc)
		if len(listening[dc.Name]) < 8 {
			t.Fatalf("%s listens on only %v", dc.Name, listening[dc.Name])
		}
	}
	t.Logf("listening: %v", listening)
	reach := func(from *farm.DC, to netip.AddrPort) error {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := from.NS.Dial(dctx, "tcp", to.String())
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, from := range f.DCs {
		for _, to := range f.DCs {
			for _, ap := range listening[to.Name] {
				if err := reach(from, ap); err != nil {
					t.Fatalf("before the cut, %s cannot reach %s's %s: %v", from.Name, to.Name, ap, err)
				}
			}
		}
	}

	before := crossing(f, cut)
	f.Partition(cut)
	// Every attempt at once: one across the cut waits out its timeout.
	type probe struct {
		from, to *farm.DC
		ap       netip.AddrPort
		err      error
	}
	var probes []*probe
	var wg sync.WaitGroup
	for _, from := range f.DCs {
		for _, to := range f.DCs {
			for _, ap := range listening[to.Name] {
				p := &probe{from: from, to: to, ap: ap}
				probes = append(probes, p)
				wg.Go(func() { p.err = reach(from, ap) })
			}
		}
	}
	wg.Wait()
	for _, p := range probes {
		across := (p.from == cut) != (p.to == cut)
		switch {
		case across && p.err == nil:
			t.Errorf("during the cut, %s reached %s's %s", p.from.Name, p.to.Name, p.ap)
		case !across && p.err != nil:
			t.Errorf("during the cut, %s cannot reach %s's %s, on its side: %v", p.from.Name, p.to.Name, p.ap, p.err)
		}
	}
	// Long enough for every retrying client (NATS routes, etcd peers,
	// replication, the components) to have tried again across the cut.
	time.Sleep(5 * time.Second)
	if after := crossing(f, cut); after != before {
		t.Errorf("packets crossed the cut of %s: %d forwarded before it, %d after", cut.Name, before, after)
	}
	f.Heal(cut)
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}
}

// crossing counts the packets the WAN forwarded to and from dc.
func crossing(f *farm.DCFarm, dc *farm.DC) int64 {
	var n int64
	for _, other := range f.DCs {
		if other == dc {
			continue
		}
		a, _ := f.WAN.LinkCounts(dc.Index, other.Index)
		b, _ := f.WAN.LinkCounts(other.Index, dc.Index)
		n += a + b
	}
	return n
}

// listeningPorts lists the TCP sockets listening on the DC's address (or
// on every address) inside its namespace, read from /proc/PID/net/tcp of
// a process in it, which shows the sockets of that process's namespace.
func listeningPorts(t *testing.T, dc *farm.DC) []netip.AddrPort {
	t.Helper()
	pid := dc.NATS.Pid()
	if pid == 0 {
		t.Fatalf("%s is not running", dc.NATS.Name)
	}
	file, err := os.Open(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []netip.AddrPort
	seen := map[netip.AddrPort]bool{}
	sc := bufio.NewScanner(file)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		host, port, _ := strings.Cut(f[1], ":")
		b, err := hex.DecodeString(host)
		if err != nil || len(b) != 4 {
			continue
		}
		addr := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}) // little-endian
		p, _ := strconv.ParseUint(port, 16, 16)
		switch {
		case addr == dc.Addr:
		case addr.IsUnspecified():
			addr = dc.Addr
		default:
			continue // loopback only: not reachable from another DC anyway
		}
		ap := netip.AddrPortFrom(addr, uint16(p))
		if !seen[ap] {
			seen[ap] = true
			out = append(out, ap)
		}
	}
	return out
}

// waitClustersReadyVia waits until purser has judged every cluster Ready.
func waitClustersReadyVia(t *testing.T, api *farm.Client, clusters []*sandbox.Cluster) {
	t.Helper()
	sandboxtest.Eventually(t, 3*time.Minute, "every cluster Ready in purser", func(ctx context.Context) error {
		for _, c := range clusters {
			var cl v1alpha1.Cluster
			if code, err := api.Do(ctx, http.MethodGet, "/api/v1/clusters/"+c.Name(), nil, nil, &cl); code != http.StatusOK {
				return callError("get cluster "+c.Name(), code, err)
			}
			ready := false
			for _, cond := range cl.Status.Conditions {
				ready = ready || (cond.Type == v1alpha1.ConditionReady && cond.Status == "True")
			}
			if !ready {
				return fmt.Errorf("cluster %s is not Ready: %+v", c.Name(), cl.Status.Conditions)
			}
		}
		return nil
	})
}
