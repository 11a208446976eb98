package farm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The faults of a whole data center.

// Partition cuts every link between dc and the other DCs, both ways:
// clients of its API, NATS routes, PostgreSQL replication, etcd peers,
// and the control plane's connections to its member cluster and from its
// components to the others' clusters. Everything inside keeps running.
func (f *DCFarm) Partition(dc *DC) { f.WAN.Isolate(dc.Index) }

// CutOut cuts dc's links one way: the other DCs reach it, nothing it sends
// reaches them (its heartbeats, its answers, its replication). No
// connection either way completes, but the other DCs' view is that dc went
// silent while it still hears their packets.
func (f *DCFarm) CutOut(dc *DC) { f.WAN.CutFrom(dc.Index) }

// CutIn cuts dc's links the other way: what it sends reaches the other
// DCs, nothing of theirs reaches it.
func (f *DCFarm) CutIn(dc *DC) { f.WAN.CutTo(dc.Index) }

// SlowLinks slows every link of dc, both ways, and makes it lossy.
func (f *DCFarm) SlowLinks(dc *DC, lf LinkFault) { f.WAN.Impair(dc.Index, lf) }

// Heal restores dc's links: no cut either way, no slowness or loss.
func (f *DCFarm) Heal(dc *DC) { f.WAN.Rejoin(dc.Index) }

// PowerOff is a power loss of dc: its links go dark, and every process
// in it, its member cluster's too, is killed with SIGKILL at once.
func (f *DCFarm) PowerOff(dc *DC) {
	f.WAN.Isolate(dc.Index)
	dc.mu.Lock()
	dc.poweredOn, dc.workloads = false, false
	dc.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range dc.Processes() {
		wg.Go(p.Kill)
	}
	wg.Go(dc.Cluster.PowerOff)
	wg.Wait()
	// What the processes started in sessions of their own (Patroni's
	// PostgreSQL) is in the namespace still.
	killNamespace(dc.NS)
	dc.kube.Cut()
}

// PowerOn brings dc back after PowerOff, in a machine's boot order: the
// network, etcd, PostgreSQL under Patroni, NATS, the components, then the
// member cluster's control plane and the agent; the cluster's kubelets
// start once beforeWorkloads returns (nil: at once), so that a test can
// hold them until the agent has fenced what it must. It returns once the
// DC's API answers.
func (f *DCFarm) PowerOn(ctx context.Context, dc *DC, beforeWorkloads func(context.Context) error) error {
	if err := dc.kube.Restore(); err != nil {
		return err
	}
	f.WAN.Rejoin(dc.Index)
	dc.mu.Lock()
	dc.poweredOn = true
	dc.mu.Unlock()
	for _, p := range []*Process{dc.Etcd, dc.Patroni, dc.NATS} {
		if err := p.Start(); err != nil {
			return err
		}
	}
	for _, p := range dc.Components {
		if err := p.Start(); err != nil {
			return err
		}
	}
	err := dc.Cluster.PowerOn(ctx, func(ctx context.Context) error {
		if err := dc.Agent.Start(); err != nil {
			return err
		}
		if beforeWorkloads != nil {
			return beforeWorkloads(ctx)
		}
		return nil
	})
	dc.mu.Lock()
	dc.workloads = true
	dc.mu.Unlock()
	if err != nil {
		return err
	}
	return f.waitAPIs(ctx)
}

// StartIfPowered starts p, a process of dc, unless dc has lost power
// meanwhile (its power-on starts it then).
func (f *DCFarm) StartIfPowered(dc *DC, p *Process) error {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if !dc.poweredOn {
		return nil
	}
	return p.Start()
}

// EnsureRunning heals every partition, powers on what is off, starts any
// process that is down and waits until etcd, PostgreSQL (with its
// synchronous standby), NATS and every API are healthy.
func (f *DCFarm) EnsureRunning(ctx context.Context) error {
	for _, dc := range f.DCs {
		if !dc.Powered() {
			if err := f.PowerOn(ctx, dc, nil); err != nil {
				return err
			}
		}
		f.Heal(dc)
	}
	for _, p := range f.Processes() {
		if err := p.Start(); err != nil {
			return err
		}
	}
	if err := f.waitEtcd(ctx); err != nil {
		return err
	}
	if err := f.waitPostgres(ctx, 5*time.Minute); err != nil {
		return err
	}
	if err := f.WaitNATS(ctx); err != nil {
		return err
	}
	return f.waitAPIs(ctx)
}

// WaitNATS waits until the NATS servers of the powered, connected DCs
// agree on a JetStream meta leader and are current.
func (f *DCFarm) WaitNATS(ctx context.Context) error {
	n := &NATS{}
	for _, dc := range f.powered() {
		if f.WAN.Isolated(dc.Index) {
			continue
		}
		n.Nodes = append(n.Nodes, dc.NATS)
		n.monitor = append(n.monitor, fmt.Sprintf("http://%s:%d", dc.Addr, natsMonitorPort))
		n.http = append(n.http, dc.http)
	}
	return n.WaitHealthy(ctx, 3*time.Minute)
}

// namespaceInode is the inode that names ns in /proc/PID/ns/net.
func namespaceInode(ns *Namespace) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(ns.fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// inNamespace lists the pids of the processes in ns.
func inNamespace(ns *Namespace) []int {
	ino, err := namespaceInode(ns)
	if err != nil {
		return nil
	}
	want := "net:[" + strconv.FormatUint(ino, 10) + "]"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			// The test itself: a thread of it may be inside (the
			// namespace's spawner), and even the thread that names the
			// process in /proc when the runtime put the spawner there.
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && link == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killNamespace kills every process in ns with SIGKILL and waits until
// none is left (10 s at most); it returns how many it found.
func killNamespace(ns *Namespace) int {
	found := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := inNamespace(ns)
		if len(pids) == 0 || time.Now().After(deadline) {
			return len(found)
		}
		for _, pid := range pids {
			found[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: gone meanwhile, as wanted
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweepDeadRuns kills what an earlier run of a DC farm left behind when
// its test binary died without closing the farm (SIGKILL, a timeout),
// and removes its Patroni folder. The namespaces, WAN interfaces and
// routes need no sweeping: they are anonymous and went with the run. Its
// direct children went too (Pdeathsig); Patroni's PostgreSQL, started in
// a session of its own, is what may be left, recognizable by its data
// folder in a Patroni folder whose run's pid is gone; and the tmpfs of its
// NATS stores, which name the run's pid.
func sweepDeadRuns(logf func(string, ...any)) {
	sweepNATSStores(logf)
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pgRootPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), pgRootPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue // that run is alive
		}
		left := leftovers(dir)
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL) // ESRCH: gone meanwhile, as wanted
		}
		if err := os.RemoveAll(dir); err != nil {
			logf("farm: cannot remove %s, left by a run that died (pid %d), after killing %d of its processes: %v", dir, pid, len(left), err)
			continue
		}
		logf("farm: removed %s, left by a run that died (pid %d), and killed %d of its processes", dir, pid, len(left))
	}
}
