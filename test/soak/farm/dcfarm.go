package farm

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/sandbox"
)

// DCConfig describes a farm of data centers on one machine.
type DCConfig struct {
	// Dir holds every process's folder: logs, NATS and etcd stores,
	// credentials. Patroni's nodes live in a folder of their own that the
	// postgres user owns.
	Dir      string
	Binaries *Binaries
	// Etcd is the etcd binary that Patroni's DCS runs on (the sandbox's).
	Etcd string
	// Clusters are the member clusters, one per DC in DC order: cluster i
	// is in DC i+1 (its label dc: dc-<i+1>), reached by the control plane
	// across the WAN. A power loss of its DC kills it, and it is powered
	// on again with its DC.
	Clusters []*sandbox.Cluster
	// Extra flags of the controllers and the agents.
	ControllerArgs, AgentArgs []string
	// SteppableClocks runs each DC's PostgreSQL with a wall clock that
	// StepClock moves (clock.go; libfaketime).
	SteppableClocks bool
	Logf            func(format string, args ...any)
}

// DC is one data center of the farm.
type DC struct {
	Name  string // dc-1, dc-2, ...
	Index int    // from 0
	Addr  netip.Addr
	NS    *Namespace

	Etcd, Patroni, NATS *Process
	// Components are the purser components, one replica each, in
	// Components order.
	Components []*Process
	Agent      *Process
	Cluster    *sandbox.Cluster
	// API is this DC's API replica, reached from inside the DC.
	API *Client

	http     *http.Client // dials from inside the DC
	kube     *sandbox.Proxy
	kubeconf string // the agent's kubeconfig, inside the DC

	natsMounted bool // its NATS store is a tmpfs of its own (natsdisk.go)
	// pgBinDir: PostgreSQL's programs as Patroni runs them, when not
	// the machine's (clock.go).
	pgBinDir string

	mu        sync.Mutex
	poweredOn bool
	workloads bool // the member cluster's kubelets (kwok) run
}

// Processes are the DC's processes in the farm's start order.
func (dc *DC) Processes() []*Process {
	ps := []*Process{dc.Etcd, dc.Patroni, dc.NATS}
	ps = append(ps, dc.Components...)
	if dc.Agent != nil {
		ps = append(ps, dc.Agent)
	}
	return ps
}

// Powered reports whether the DC has power.
func (dc *DC) Powered() bool {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.poweredOn
}

// Executing reports whether the DC's member cluster runs its objects: it
// has power and its kubelets have started since. A copy of a runnable in
// a DC without power runs nowhere.
func (dc *DC) Executing() bool {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.poweredOn && dc.workloads
}

// HTTP is a client that dials from inside the DC.
func (dc *DC) HTTP() *http.Client { return dc.http }

// APIURL is the address of the DC's API replica, for dc.HTTP().
func (dc *DC) APIURL() string { return fmt.Sprintf("http://%s:%d", dc.Addr, apiPort) }

// DCFarm is purser deployed over three data centers on one machine. Each
// DC is a network namespace (Namespace) holding one member cluster's
// endpoint and agent, one NATS server of the JetStream cluster (streams
// R3), one etcd member and one PostgreSQL node under Patroni, and one
// replica of every purser component; the WAN joins the DCs, and a test
// cuts it or delays it. The member clusters themselves (sandbox clusters)
// run in the test's namespace; each is exposed inside its DC only, by a
// proxy listening there, so the control plane reaches it across the WAN
// and its agent from inside the DC.
type DCFarm struct {
	cfg  DCConfig
	dir  string
	logf func(format string, args ...any)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	WAN *WAN
	DCs []*DC
	// API reaches every DC's API replica, as users behind a global load
	// balancer would.
	API *Client
	// Token is the admin's bearer token.
	Token string

	// natsStoreSize: NATSStoreSize when 0 (a test's smaller one).
	natsStoreSize int64

	keyFile string
	pgRoot  string
	pgBin   string
	pgCred  *syscall.Credential

	mu     sync.Mutex
	closed bool
}

// DB opens the farm's database as a client in dc would: the multi-host
// DSN, to whichever node is primary, dialled from inside the DC.
func (f *DCFarm) DB(dc *DC) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(f.DSN(dc))
	if err != nil {
		return nil, err
	}
	// One dialer for every host of the DSN: pgx shares it with the
	// fallbacks.
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dc.NS.Dial(ctx, network, addr)
	}
	return stdlib.OpenDB(*cfg), nil
}

// StartDC brings the farm up: namespaces and WAN, etcd, Patroni, NATS,
// the components, then registers each member cluster and starts its
// agent; it returns once every cluster is registered.
func StartDC(ctx context.Context, cfg DCConfig) (*DCFarm, error) {
	if cfg.Dir == "" || cfg.Binaries == nil || cfg.Etcd == "" || len(cfg.Clusters) == 0 {
		return nil, errors.New("farm: DCConfig needs Dir, Binaries, Etcd and Clusters")
	}
	if err := dcPrerequisites(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	sweepDeadRuns(cfg.Logf)
	f := &DCFarm{cfg: cfg, dir: dir, logf: cfg.Logf}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			if err := f.Close(); err != nil {
				f.logf("farm: close after a failed start: %v", err)
			}
		}
	}()
	if f.Token, f.keyFile, err = writeCredentials(dir); err != nil {
		return nil, err
	}
	var nss []*Namespace
	for i, c := range cfg.Clusters {
		name := "dc-" + strconv.Itoa(i+1)
		ns, err := newNamespace(name)
		if err != nil {
			return nil, err
		}
		nss = append(nss, ns)
		dc := &DC{Name: name, Index: i, Addr: DCAddr(i + 1), NS: ns, Cluster: c, poweredOn: true, workloads: true}
		dc.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: ns.Dial, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		}}
		f.DCs = append(f.DCs, dc)
	}
	if f.WAN, err = newWAN(ctx, nss); err != nil {
		return nil, err
	}
	if err := f.preparePostgres(); err != nil {
		return nil, fmt.Errorf("farm: PostgreSQL under Patroni: %w", err)
	}
	var replicas []*client.Client
	for _, dc := range f.DCs {
		dc.Etcd = f.newProcess(dc, "etcd-"+dc.Name, cfg.Etcd, f.etcdArgs(dc)...)
		dc.Patroni = f.newProcess(dc, "patroni-"+dc.Name, "/usr/bin/patroni", f.patroniArgs(dc)...)
		dc.Patroni.workDir, dc.Patroni.cred = f.pgDir(dc), f.pgCred
		dc.NATS = f.newProcess(dc, "nats-"+dc.Name, cfg.Binaries.NATSServer, f.natsArgs(dc)...)
		if err := f.mountNATSStore(dc); err != nil {
			return nil, err
		}
		for _, component := range Components {
			name := component + "-" + dc.Name
			dc.Components = append(dc.Components, f.newProcess(dc, name, cfg.Binaries.Purser, f.dcComponentArgs(dc, component, name)...))
		}
		apiURL := fmt.Sprintf("http://%s:%d", dc.Addr, apiPort)
		replica := client.NewWithTransport(client.Config{Server: apiURL, Token: f.Token}, dc.http.Transport)
		dc.API = newClient(replica)
		replicas = append(replicas, replica)
	}
	f.API = newClient(replicas...)

	// etcd first (Patroni's DCS), then Patroni, NATS and the components;
	// the components wait for the database and the stream by themselves.
	for _, step := range []struct {
		start func(*DC) *Process
		wait  func(context.Context) error
	}{
		{func(dc *DC) *Process { return dc.Etcd }, f.waitEtcd},
		{func(dc *DC) *Process { return dc.Patroni }, func(ctx context.Context) error { return f.waitPostgres(ctx, 3*time.Minute) }},
		{func(dc *DC) *Process { return dc.NATS }, f.WaitNATS},
	} {
		for _, dc := range f.DCs {
			if err := step.start(dc).Start(); err != nil {
				return nil, err
			}
		}
		if err := step.wait(ctx); err != nil {
			return nil, err
		}
	}
	for _, dc := range f.DCs {
		if err := f.exposeCluster(dc); err != nil {
			return nil, err
		}
		for _, p := range dc.Components {
			if err := p.Start(); err != nil {
				return nil, err
			}
		}
	}
	if err := f.waitAPIs(ctx); err != nil {
		return nil, err
	}
	for _, dc := range f.DCs {
		if err := f.registerCluster(ctx, dc); err != nil {
			return nil, err
		}
		if err := dc.Agent.Start(); err != nil {
			return nil, err
		}
	}
	ok = true
	return f, nil
}

func (f *DCFarm) newProcess(dc *DC, name, bin string, args ...string) *Process {
	dir := filepath.Join(f.dir, name)
	_ = os.MkdirAll(dir, 0o755) // a failure shows when Start opens the log in it
	return &Process{
		Name: name, LogPath: filepath.Join(dir, name+".log"),
		bin: bin, args: args, sp: dc.NS.sp, logf: f.logf, ctx: f.ctx, wg: &f.wg,
	}
}

func (f *DCFarm) natsArgs(dc *DC) []string {
	var routes []string
	for _, d := range f.DCs {
		routes = append(routes, fmt.Sprintf("nats://%s:%d", d.Addr, natsClusterPort))
	}
	store := filepath.Join(f.dir, "nats-"+dc.Name, "store")
	_ = os.MkdirAll(store, 0o755) // a failure shows when nats-server starts without it
	return []string{"-a", dc.Addr.String(), "-p", strconv.Itoa(natsClientPort), "-m", strconv.Itoa(natsMonitorPort),
		"-n", "nats-" + dc.Name, "-js", "-sd", store,
		"--cluster_name", natsCluster, "--cluster", fmt.Sprintf("nats://%s:%d", dc.Addr, natsClusterPort),
		"--routes", strings.Join(routes, ",")}
}

// natsURLs lists every DC's NATS server, dc's own first.
func (f *DCFarm) natsURLs(dc *DC) string {
	urls := []string{fmt.Sprintf("nats://%s:%d", dc.Addr, natsClientPort)}
	for _, d := range f.DCs {
		if d != dc {
			urls = append(urls, fmt.Sprintf("nats://%s:%d", d.Addr, natsClientPort))
		}
	}
	return strings.Join(urls, ",")
}

// streamStore is what purser's streams may fill of each DC's NATS store:
// half of its tmpfs, so that a soak's hours of events and snapshots drop
// their oldest instead of filling it (JetStream takes 75% of it at most).
func (f *DCFarm) streamStore() string {
	return strconv.FormatInt(cmp.Or(f.natsStoreSize, NATSStoreSize)/2, 10)
}

// dcComponentArgs are the flags of a component in dc.
func (f *DCFarm) dcComponentArgs(dc *DC, component, name string) []string {
	args := []string{component, "--database", f.DSN(dc), "--key-file", f.keyFile}
	if component != "controller" {
		args = append(args, "--nats", f.natsURLs(dc), "--stream-replicas", "3", "--stream-store", f.streamStore())
	}
	switch component {
	case "api":
		// Reads from the DC's own node while the primary is out of reach.
		standby := fmt.Sprintf("postgres://purser@%s:%d/purser?sslmode=disable&connect_timeout=2", dc.Addr, postgresPort)
		args = append(args, "--listen", fmt.Sprintf("%s:%d", dc.Addr, apiPort), "--database-standby", standby,
			"--tokens", filepath.Join(f.dir, "tokens.yaml"), "--policy", filepath.Join(f.dir, "policy.yaml"),
			"--audit-key", filepath.Join(f.dir, "audit.key"))
	case "submitter":
		args = append(args, "--policy", filepath.Join(f.dir, "policy.yaml"))
	case "syncer":
		args = append(args, "--identity", name, "--policy", filepath.Join(f.dir, "policy.yaml"))
	case "controller":
		args = append(args, "--identity", name, "--dc", dc.Name)
		args = append(args, f.cfg.ControllerArgs...)
	}
	return args
}

// WaitAPIs waits until the API of every powered DC is ready.
func (f *DCFarm) WaitAPIs(ctx context.Context) error { return f.waitAPIs(ctx) }

// waitAPIs waits until the API of every powered DC is ready.
func (f *DCFarm) waitAPIs(ctx context.Context) error {
	for _, dc := range f.powered() {
		api := dc.Components[0]
		u := fmt.Sprintf("http://%s:%d/readyz", dc.Addr, apiPort)
		if err := waitFor(ctx, 3*time.Minute, api.Name+" /readyz", func(ctx context.Context) error {
			return getJSON(ctx, dc.http, u, nil)
		}, api); err != nil {
			return err
		}
	}
	return nil
}

// exposeCluster makes the DC's member cluster reachable inside the DC (a
// proxy listening there at the DC's address, port 6443, to the
// kube-apiserver in the test's namespace) and writes the kubeconfig its
// agent uses.
func (f *DCFarm) exposeCluster(dc *DC) error {
	listen := func(network, addr string) (net.Listener, error) { return dc.NS.Listen(network, addr) }
	var err error
	if dc.kube, err = sandbox.NewProxyOn(listen, fmt.Sprintf("%s:%d", dc.Addr, kubePort), dc.Cluster.APIServerAddr()); err != nil {
		return fmt.Errorf("farm: expose %s in %s: %w", dc.Cluster.Name(), dc.Name, err)
	}
	kc, err := f.kubeconfig(dc)
	if err != nil {
		return err
	}
	dc.kubeconf = filepath.Join(f.dir, "kubeconfig-"+dc.Cluster.Name())
	return os.WriteFile(dc.kubeconf, kc, 0o600)
}

// kubeconfig is the cluster's admin kubeconfig pointed at its address in
// the DC; the serving certificate names 127.0.0.1 and localhost, so the
// client verifies it as localhost.
func (f *DCFarm) kubeconfig(dc *DC) ([]byte, error) {
	data, err := dc.Cluster.Kubeconfig(fmt.Sprintf("https://%s:%d", dc.Addr, kubePort))
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	for _, c := range kc.Clusters {
		c.TLSServerName = "localhost"
	}
	return clientcmd.Write(*kc)
}

// registerCluster registers the DC's member cluster through the API, with
// its labels, and prepares its agent (one, without leader election, so
// that killing it cuts the cluster off).
func (f *DCFarm) registerCluster(ctx context.Context, dc *DC) error {
	c := dc.Cluster
	kc, err := f.kubeconfig(dc)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range c.Labels() {
		labels[k] = v
	}
	labels["dc"] = dc.Name
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindCluster,
		"metadata": map[string]any{"name": c.Name(), "labels": labels},
		"spec":     map[string]any{"kubeconfig": string(kc)},
	}
	if code, err := f.API.Do(ctx, http.MethodPost, "/api/v1/clusters", nil, body, nil); code != http.StatusCreated && code != http.StatusConflict {
		if err != nil {
			return fmt.Errorf("register cluster %s: %d: %w", c.Name(), code, err)
		}
		return fmt.Errorf("register cluster %s: %d", c.Name(), code)
	}
	name := "agent-" + c.Name()
	args := []string{"agent", "--cluster", c.Name(), "--kubeconfig", dc.kubeconf,
		"--nats", f.natsURLs(dc), "--stream-replicas", "3", "--stream-store", f.streamStore(), "--leader-elect=false", "--identity", name}
	dc.Agent = f.newProcess(dc, name, f.cfg.Binaries.Purser, append(args, f.cfg.AgentArgs...)...)
	return nil
}

// powered lists the DCs that have power.
func (f *DCFarm) powered() []*DC {
	var out []*DC
	for _, dc := range f.DCs {
		if dc.Powered() {
			out = append(out, dc)
		}
	}
	return out
}

func (f *DCFarm) etcdProcs() []*Process {
	var ps []*Process
	for _, dc := range f.DCs {
		ps = append(ps, dc.Etcd)
	}
	return ps
}

func (f *DCFarm) patroniProcs() []*Process {
	var ps []*Process
	for _, dc := range f.DCs {
		ps = append(ps, dc.Patroni)
	}
	return ps
}

// Processes returns every process of every DC.
func (f *DCFarm) Processes() []*Process {
	var out []*Process
	for _, dc := range f.DCs {
		for _, p := range dc.Processes() {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// Crashes returns every exit nobody asked for, in time order.
func (f *DCFarm) Crashes() []Crash { return crashesOf(f.Processes()) }

// Dir is the farm's folder.
func (f *DCFarm) Dir() string { return f.dir }

// Close powers every DC back on if it is off (the member clusters are
// the test binary's, to be left as found), stops every process, kills
// whatever is left in each DC's namespace, and removes the WAN, the
// namespaces and Patroni's folder.
func (f *DCFarm) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	var errs []error
	for _, dc := range f.DCs {
		if !dc.Powered() && dc.Cluster != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			if err := dc.Cluster.PowerOn(ctx, nil); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
	}
	f.cancel() // no more restarts
	stopAll := func(ps []*Process, grace time.Duration) {
		var wg sync.WaitGroup
		for _, p := range ps {
			if p != nil {
				wg.Go(func() { p.Stop(grace) })
			}
		}
		wg.Wait()
	}
	var purser, nats, patroni, etcd []*Process
	for _, dc := range f.DCs {
		purser = append(purser, dc.Components...)
		purser = append(purser, dc.Agent)
		nats = append(nats, dc.NATS)
		patroni = append(patroni, dc.Patroni)
		etcd = append(etcd, dc.Etcd)
	}
	stopAll(purser, 5*time.Second)
	stopAll(nats, 5*time.Second)
	for _, dc := range f.DCs {
		if err := f.unmountNATSStore(dc); err != nil {
			errs = append(errs, err)
		}
	}
	stopAll(patroni, 20*time.Second) // Patroni stops its PostgreSQL first
	stopAll(etcd, 5*time.Second)
	f.wg.Wait()
	for _, dc := range f.DCs {
		if n := killNamespace(dc.NS); n > 0 {
			errs = append(errs, fmt.Errorf("farm: %d processes were left in %s", n, dc.Name))
		}
		if dc.kube != nil {
			if err := dc.kube.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if f.WAN != nil {
		if err := f.WAN.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, dc := range f.DCs {
		dc.NS.close()
	}
	if f.pgRoot != "" {
		if err := os.RemoveAll(f.pgRoot); err != nil {
			errs = append(errs, fmt.Errorf("farm: remove the Patroni folders: %w", err))
		}
	}
	if left := leftovers(f.dir); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: gone meanwhile
		}
		errs = append(errs, fmt.Errorf("farm: processes outlived Close: pids %v", left))
	}
	return errors.Join(errs...)
}

// dcPrerequisites names, before anything starts, every part of the machine
// a DC farm needs that is missing, and the command that installs them all:
// a Patroni that cannot find its etcd client otherwise fails only after
// the farm is half up, with a message about its configuration.
func dcPrerequisites(ctx context.Context, cfg DCConfig) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (a network namespace per DC)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "ip, from iproute2")
	}
	if out, err := exec.CommandContext(ctx, "/usr/bin/patroni", "--version").Output(); err != nil || !strings.HasPrefix(string(out), "patroni 4.") {
		missing = append(missing, "Patroni 4 at /usr/bin/patroni")
	}
	// Patroni runs on Debian's python3; its package does not pull the etcd
	// client in when another DCS client meets its dependency.
	if err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", "import etcd").Run(); err != nil {
		missing = append(missing, "python3-etcd (Patroni's etcd client)")
	}
	if _, err := postgresBin(); err != nil {
		missing = append(missing, "PostgreSQL's server binaries")
	}
	if _, err := os.Stat(Libfaketime); err != nil && cfg.SteppableClocks {
		missing = append(missing, "libfaketime (a DC's clock stepped)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("farm: a DC farm needs %s; install them with: sudo bash hack/test-deps", strings.Join(missing, ", "))
	}
	return nil
}
