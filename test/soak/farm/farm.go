// Package farm runs purser as it is deployed beyond one machine, on one
// machine: a NATS JetStream cluster of separate nats-server processes,
// PostgreSQL, and every purser component as separate `purser` processes
// with replicas (api, submitter, syncer, ingester, controller) plus one
// agent per member cluster. A test kills any of them with SIGKILL and
// starts it again; whatever the farm did not stop on purpose is restarted
// after a backoff, as a kubelet would, and reported as a crash. Each
// process logs to DIR/<name>/<name>.log; nothing outlives the test binary.
package farm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/platform/localport"
	"github.com/purser-io/purser/internal/sandbox"
)

// Components are the replicated purser components, in start order.
var Components = []string{"api", "submitter", "syncer", "ingester", "controller"}

// Config describes a farm.
type Config struct {
	// Dir holds every process's folder: logs, NATS stores, credentials.
	Dir      string
	Binaries *Binaries
	// Database is the DSN every component uses (PostgreSQL); empty, the
	// farm starts a PostgreSQL server of its own (Postgres).
	Database string
	// NATSNodes is the size of the NATS cluster: 3 when zero.
	NATSNodes int
	// Replicas of each component in Components: 2 when zero.
	Replicas int
	// StreamReplicas of every stream and bucket: NATSNodes when zero.
	StreamReplicas int
	// Extra flags of the controllers and the agents.
	ControllerArgs, AgentArgs []string
	// Logf receives the farm's own messages (crashes, restarts).
	Logf func(format string, args ...any)
}

// Farm is a running split deployment.
type Farm struct {
	cfg  Config
	dir  string
	bins *Binaries
	logf func(format string, args ...any)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sp     *spawner

	// NATS is the stream's cluster.
	NATS *NATS
	// Postgres is the farm's own database server, nil when Config named
	// a database.
	Postgres *Postgres
	// API reaches every API replica, retrying.
	API *Client
	// Token is the admin's bearer token.
	Token string

	apiURLs []string
	keyFile string

	mu     sync.Mutex
	procs  []*Process // purser processes, agents last
	agents map[string]*Process
	closed bool
}

// Start brings the NATS cluster and every component up, and returns once
// every API replica is ready. Clusters are added with AddCluster.
func Start(ctx context.Context, cfg Config) (*Farm, error) {
	if cfg.Dir == "" || cfg.Binaries == nil {
		return nil, errors.New("farm: Config needs Dir and Binaries")
	}
	if cfg.NATSNodes <= 0 {
		cfg.NATSNodes = 3
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 2
	}
	if cfg.StreamReplicas <= 0 {
		cfg.StreamReplicas = cfg.NATSNodes
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	f := &Farm{cfg: cfg, dir: dir, bins: cfg.Binaries, logf: cfg.Logf, sp: newSpawner(), agents: map[string]*Process{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			if err := f.Close(); err != nil {
				f.logf("farm: close after a failed start: %v", err)
			}
		}
	}()

	if err := f.writeCredentials(); err != nil {
		return nil, err
	}
	if f.cfg.Database == "" {
		f.Postgres, err = f.startPostgres(ctx)
		if err != nil {
			return nil, fmt.Errorf("farm: own PostgreSQL: %w", err)
		}
		f.cfg.Database = f.Postgres.DSN
	}
	if f.NATS, err = f.startNATS(ctx, cfg.NATSNodes); err != nil {
		return nil, err
	}
	ports, err := localport.FreeN(cfg.Replicas)
	if err != nil {
		return nil, err
	}
	for _, port := range ports {
		f.apiURLs = append(f.apiURLs, "http://127.0.0.1:"+strconv.Itoa(port))
	}
	// Every replica starts at once, as a Deployment's would: the
	// migrations take a lock, and the components wait for the stream.
	f.API = NewClient(f.apiURLs, f.Token)
	for _, component := range Components {
		for i := range cfg.Replicas {
			name := component + "-" + strconv.Itoa(i+1)
			p := f.newProcess(name, f.bins.Purser, f.componentArgs(component, name, i)...)
			f.procs = append(f.procs, p)
			if err := p.Start(); err != nil {
				return nil, err
			}
		}
	}
	for i, u := range f.apiURLs {
		api := f.procs[i] // the APIs started first
		if err := waitFor(ctx, 2*time.Minute, api.Name+" /readyz", func(ctx context.Context) error {
			return getJSON(ctx, http.DefaultClient, u+"/readyz", nil)
		}, api); err != nil {
			return nil, err
		}
	}
	ok = true
	return f, nil
}

// writeCredentials writes what `purser up` would: an admin token with its
// hashed entry, a policy making it admin, and the sealing key.
func (f *Farm) writeCredentials() (err error) {
	f.Token, f.keyFile, err = writeCredentials(f.dir)
	return err
}

// writeCredentials writes into dir an admin token (admin.token) with its
// hashed entry (tokens.yaml), a policy making it admin (policy.yaml), and
// the sealing key (secret.key, whose path it returns).
func writeCredentials(dir string) (token, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	token = auth.NewToken()
	tokens, err := yaml.Marshal(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		return "", "", err
	}
	pol, err := yaml.Marshal(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		return "", "", err
	}
	for name, data := range map[string][]byte{"tokens.yaml": tokens, "policy.yaml": pol, "admin.token": []byte(token + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", "", err
		}
	}
	keyFile = filepath.Join(dir, "secret.key")
	if _, err = seal.EnsureKeyFile(keyFile); err != nil {
		return "", "", err
	}
	_, err = anchor.EnsureKeyFile(filepath.Join(dir, "audit.key"))
	return token, keyFile, err
}

// componentArgs are the flags of replica i of a component.
func (f *Farm) componentArgs(component, name string, i int) []string {
	args := []string{component, "--database", f.cfg.Database}
	args = append(args, "--key-file", f.keyFile)
	if component != "controller" { // the only one that never uses the stream
		args = append(args, "--nats", f.NATS.URLs(), "--stream-replicas", strconv.Itoa(f.cfg.StreamReplicas))
	}
	switch component {
	case "api":
		args = append(args, "--listen", strings.TrimPrefix(f.apiURLs[i], "http://"),
			"--tokens", filepath.Join(f.dir, "tokens.yaml"), "--policy", filepath.Join(f.dir, "policy.yaml"),
			"--audit-key", filepath.Join(f.dir, "audit.key"))
	case "submitter":
		args = append(args, "--policy", filepath.Join(f.dir, "policy.yaml"))
	case "syncer":
		args = append(args, "--identity", name, "--policy", filepath.Join(f.dir, "policy.yaml"))
	case "controller":
		args = append(args, "--identity", name)
		args = append(args, f.cfg.ControllerArgs...)
	}
	return args
}

func (f *Farm) newProcess(name, bin string, args ...string) *Process {
	dir := filepath.Join(f.dir, name)
	_ = os.MkdirAll(dir, 0o755) // a failure shows when Start opens the log in it
	return &Process{
		Name: name, LogPath: filepath.Join(dir, name+".log"),
		bin: bin, args: args, sp: f.sp, logf: f.logf, ctx: f.ctx, wg: &f.wg,
	}
}

// AddCluster registers a sandbox cluster through the API, with its
// labels, and starts its agent, without leader election: one agent per
// cluster, so that killing it cuts the cluster off.
func (f *Farm) AddCluster(ctx context.Context, c *sandbox.Cluster) error {
	kc, err := c.Kubeconfig("")
	if err != nil {
		return err
	}
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindCluster,
		"metadata": map[string]any{"name": c.Name(), "labels": c.Labels()},
		"spec":     map[string]any{"kubeconfig": string(kc)},
	}
	if code, err := f.API.Do(ctx, http.MethodPost, "/api/v1/clusters", nil, body, nil); code != http.StatusCreated && code != http.StatusConflict {
		if err != nil {
			return fmt.Errorf("register cluster %s: %d: %w", c.Name(), code, err)
		}
		return fmt.Errorf("register cluster %s: %d", c.Name(), code)
	}
	name := "agent-" + c.Name()
	args := []string{"agent", "--cluster", c.Name(), "--kubeconfig", c.KubeconfigPath(),
		"--nats", f.NATS.URLs(), "--stream-replicas", strconv.Itoa(f.cfg.StreamReplicas),
		"--leader-elect=false", "--identity", name}
	p := f.newProcess(name, f.bins.Purser, append(args, f.cfg.AgentArgs...)...)
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.agents[c.Name()] = p
	f.mu.Unlock()
	return p.Start()
}

// Process returns the purser process of that name (api-1, agent-sandbox-2,
// ...), or nil.
func (f *Farm) Process(name string) *Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Components returns the component processes, without the agents.
func (f *Farm) Components() []*Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Process
	for _, p := range f.procs {
		if !strings.HasPrefix(p.Name, "agent-") {
			out = append(out, p)
		}
	}
	return out
}

// Agent returns the agent of a cluster, or nil.
func (f *Farm) Agent(cluster string) *Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agents[cluster]
}

// Processes returns every process: NATS nodes, components, agents.
func (f *Farm) Processes() []*Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Process
	if f.NATS != nil {
		out = append(out, f.NATS.Nodes...)
	}
	return append(out, f.procs...)
}

// Crashes returns every exit nobody asked for, in time order.
func (f *Farm) Crashes() []Crash { return crashesOf(f.Processes()) }

// EnsureRunning starts whatever is down (after a test's fault, or a crash
// waiting for its restart) and waits for the NATS cluster and the APIs.
func (f *Farm) EnsureRunning(ctx context.Context) error {
	for _, p := range f.Processes() {
		if err := p.Start(); err != nil {
			return err
		}
	}
	if err := f.NATS.WaitHealthy(ctx, 2*time.Minute); err != nil {
		return err
	}
	for _, u := range f.apiURLs {
		if err := waitFor(ctx, 2*time.Minute, u+"/readyz", func(ctx context.Context) error {
			return getJSON(ctx, http.DefaultClient, u+"/readyz", nil)
		}); err != nil {
			return err
		}
	}
	return nil
}

// Dir is the farm's folder.
func (f *Farm) Dir() string { return f.dir }

// Close stops every process (components and agents first, NATS last) and
// reports any process of the farm still alive afterwards, which it kills.
func (f *Farm) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	procs := slices.Clone(f.procs)
	f.mu.Unlock()
	f.cancel() // no more restarts
	stopAll := func(ps []*Process) {
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Go(func() { p.Stop(5 * time.Second) })
		}
		wg.Wait()
	}
	stopAll(procs)
	if f.NATS != nil {
		stopAll(f.NATS.Nodes)
	}
	var errs []error
	if f.Postgres != nil {
		if err := f.Postgres.close(); err != nil {
			errs = append(errs, err)
		}
	}
	f.wg.Wait()
	f.sp.close()
	if left := leftovers(f.dir); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: gone meanwhile
		}
		errs = append(errs, fmt.Errorf("farm: processes outlived Close: pids %v", left))
	}
	return errors.Join(errs...)
}

// leftovers lists live processes whose command line names a file under
// dir or whose working directory is under it: every process of the farm
// runs in its own folder there.
func leftovers(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := dir + string(filepath.Separator)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if bytes.Contains(cmdline, []byte(prefix)) || strings.HasPrefix(cwd+string(filepath.Separator), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}
