// Package up runs every purser component in one process, with an
// embedded NATS server and SQLite database under one data folder: what
// `purser up` is. With Sandbox > 0 it also starts local Kubernetes clusters
// and registers them, so that a newcomer has a working farm in one command.
// The components are built by internal/compose, as the split subcommands
// build theirs; up owns only what one process on one machine adds: the
// data folder and its credentials, the embedded server, the sandbox (with
// Flink, the operator simulators and their S3 store; its control socket),
// one agent per registered cluster, and the client's context.
package up

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/dirlock"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/internal/sandbox"
)

// Config is what `purser up` takes.
type Config struct {
	DataDir string
	Listen  string // host:port of the API; port 0 picks a free one
	Sandbox int    // local clusters to start and register
	// Flink adds to each sandbox cluster the FlinkDeployment CRD and the
	// Flink operator simulator, and to the sandbox an S3-compatible store
	// for their checkpoints and savepoints, which the failover controller
	// reads.
	Flink        bool
	ClientConfig string // the client config to add this server's context to; empty: client.DefaultConfigPath
	Out          io.Writer
	// Terminal: Out is a terminal, where the console link may carry the
	// admin token; never into a file or a pipe, whose contents others
	// read later.
	Terminal bool
	Logger   *slog.Logger
	// OIDC, when its issuer is set, accepts that provider's ID tokens
	// beside the tokens file.
	OIDC auth.OIDCConfig
	// KubeWatchesPerUser and KubeRequestsPerUser are the API's caps per
	// user under /k8s (compose.APIConfig); zero: the defaults.
	KubeWatchesPerUser  int
	KubeRequestsPerUser int
}

// Files under the data folder.
const (
	AdminTokenFile = "admin.token"
	TokensFile     = "tokens.yaml"
	PolicyFile     = "policy.yaml"
	KeyFile        = "secret.key"
	AuditKeyFile   = "audit.key"
	DatabaseFile   = "purser.db"
	NATSDir        = "nats"
	SandboxDir     = "sandbox"
	adminUser      = "admin"
)

// Compose is what up builds its components from, for the data folder
// dataDir: its files, an SQLite database, and the settings the split
// subcommands take by default. The stream is the embedded server Run
// starts (HubConfig.Embedded).
func Compose(cfg Config, dataDir string) compose.Config {
	file := func(name string) string { return filepath.Join(dataDir, name) }
	// The API wakes the scheduler of this process when it writes a
	// schedule, so that a first tick close to its writing is not late.
	written := make(chan struct{}, 1)
	wake := func() {
		select {
		case written <- struct{}{}:
		default:
		}
	}
	return compose.Config{
		Hub: compose.HubConfig{Name: "up", Database: file(DatabaseFile), KeyFile: file(KeyFile), Logger: cfg.Logger},
		API: compose.APIConfig{Listen: cfg.Listen, TokensFile: file(TokensFile), PolicyFile: file(PolicyFile), OIDC: cfg.OIDC,
			AuditKeyFile: file(AuditKeyFile), GroupCommit: true,
			KubeWatchesPerUser: cfg.KubeWatchesPerUser, KubeRequestsPerUser: cfg.KubeRequestsPerUser, ScheduleWritten: wake},
		Submitter:  compose.SubmitterConfig{PolicyFile: file(PolicyFile)},
		Controller: compose.ControllerConfig{PolicyFile: file(PolicyFile), ScheduleWritten: written},
		Syncer:     compose.SyncerConfig{Identity: "purser-up", PolicyFile: file(PolicyFile)},
	}
}

// Run starts everything, prints "purser is ready at http://ADDR" once
// /readyz answers 200, and runs until ctx is done; then it stops everything
// it started, clusters included, and says so in a last line.
func Run(ctx context.Context, cfg Config) error {
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	if err := run(ctx, cfg, out); err != nil {
		return err
	}
	fmt.Fprintln(out, "purser stopped; everything it started has stopped")
	return nil
}

// run holds the data folder and opens the hub in it; serve does the rest.
func run(ctx context.Context, cfg Config, out io.Writer) error {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := restrictDataDir(dataDir); err != nil {
		return err
	}
	lock, err := dirlock.Acquire(dataDir, "purser")
	if errors.Is(err, dirlock.ErrHeld) {
		return fmt.Errorf("purser up is already running with data dir %s (pid %d); stop it first or use another --data-dir",
			dataDir, dirlock.HolderPid(dataDir, "purser"))
	}
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	defer lock.Release()
	adminToken, err := ensureFiles(dataDir)
	if err != nil {
		return err
	}

	// Every component runs in this process, agents included, so the
	// server listens on no port: nobody else can publish or delete.
	nats, err := stream.StartEmbedded(ctx, stream.EmbeddedConfig{Dir: filepath.Join(dataDir, NATSDir), NoListen: true})
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	defer nats.Shutdown()
	c := Compose(cfg, dataDir)
	c.Hub.Embedded = nats
	hub, err := compose.OpenHub(ctx, c.Hub)
	if err != nil {
		return err
	}
	defer hub.Close()
	return serve(ctx, cfg, out, dataDir, adminToken, hub, c)
}

// serve runs the API, the sandbox and the other components until ctx is
// done. They stop in the reverse order of their start: the components
// first, so that none works against a cluster that is shutting down, then
// the clusters, then the API.
func serve(ctx context.Context, cfg Config, out io.Writer, dataDir, adminToken string, hub *compose.Hub, c compose.Config) error {
	log := hub.Logger
	api, err := compose.API(ctx, hub, c.API)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { runComponent(ctx, log, "api", api) })
	url := "http://" + api.Addr()
	if err := waitReady(ctx, url); err != nil {
		return err
	}
	var sb *sandboxRun
	if cfg.Sandbox > 0 {
		sb, err = startSandbox(ctx, dataDir, cfg.Sandbox, cfg.Flink, out, client.New(client.Config{Server: url, Token: adminToken}), log)
		if err != nil {
			return err
		}
		defer sb.stop()
		if sb.flink != nil {
			c.Controller.CheckpointStore = sb.flink.checkpointStore()
		}
	}
	stop, agents, err := startComponents(ctx, hub, c, api.NotifyOutbox)
	if err != nil {
		return err
	}
	defer stop()
	if sb != nil {
		stopControl, err := sb.serveControl(ctx, agents, out, log)
		if err != nil {
			// The farm works without it; only sandbox stop and start do not.
			fmt.Fprintf(out, "warning: %v; purser sandbox stop/start will not reach this purser\n", err)
		} else {
			defer stopControl()
		}
	}

	clientConfig := cfg.ClientConfig
	if clientConfig == "" {
		if clientConfig, err = client.DefaultConfigPath(); err != nil {
			return err
		}
	}
	var contextName, current string
	var made bool
	if err := client.EditFile(clientConfig, func(f *client.File) error {
		contextName, made = client.SaveUpContext(f, client.Context{DataDir: dataDir, Server: url, Token: adminToken, AuditKey: api.AuditKey()},
			func(c client.Context) bool { return dirlock.Held(c.DataDir, "purser") })
		current = f.CurrentContext
		return nil
	}); err != nil {
		return fmt.Errorf("write client config: %w", err)
	}
	if made {
		fmt.Fprintf(out, "admin token in %s; client config in %s, context %s (now the current one)\n",
			filepath.Join(dataDir, AdminTokenFile), clientConfig, contextName)
	} else {
		fmt.Fprintf(out, "admin token in %s; client config in %s, context %s; the current context stays %s, whose purser up is running: `purser config use-context %s` switches, or pass --context %s\n",
			filepath.Join(dataDir, AdminTokenFile), clientConfig, contextName, current, contextName, contextName)
	}
	fmt.Fprintf(out, "audit anchors signed by %s (key in %s)\n", api.AuditKey(), filepath.Join(dataDir, AuditKeyFile))
	if cfg.Terminal {
		// In the fragment, which the browser never sends to the server nor
		// as a Referer; the console reads it and drops it.
		fmt.Fprintf(out, "web console: %s/#token=%s\n", url, adminToken)
	} else {
		fmt.Fprintf(out, "web console: %s (log in with the token in %s)\n", url, filepath.Join(dataDir, AdminTokenFile))
	}
	fmt.Fprintf(out, "purser is ready at %s\n", url)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping purser ...")
	return nil
}

// ensureFiles creates, on first start, the key that opens sealed values,
// the key that signs the audit anchors and the credentials; it returns
// the admin token.
func ensureFiles(dataDir string) (string, error) {
	if _, err := seal.EnsureKeyFile(filepath.Join(dataDir, KeyFile)); err != nil {
		return "", err
	}
	if _, err := anchor.EnsureKeyFile(filepath.Join(dataDir, AuditKeyFile)); err != nil {
		return "", err
	}
	return ensureCredentials(dataDir)
}

// waitReady waits until the API's /readyz answers 200.
func waitReady(ctx context.Context, url string) error {
	const timeout = 30 * time.Second
	var last error
	pollCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := reconcile.Poll(pollCtx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", http.NoBody)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = errors.New(resp.Status)
			return false, nil
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case last == nil:
		return fmt.Errorf("API at %s not ready after %s: %w", url, timeout, err)
	}
	return fmt.Errorf("API at %s not ready after %s (last: %w)", url, timeout, last)
}

// sandboxRun is the sandbox up runs: its clusters, their supervisor and,
// with --flink, the Flink operator simulators and their storage.
type sandboxRun struct {
	ctx   context.Context
	fleet *sandbox.Fleet
	flink *flinkFarm
	stop  func() // the supervisor, the simulators, then the clusters
}

// startSandbox starts n local clusters, with flink the Flink operator
// simulators and their storage, registers the clusters through the API
// and supervises their kube-apiservers: one killed by hand or crashed is
// said and started again (one stopped through the control socket is
// not).
func startSandbox(ctx context.Context, dataDir string, n int, flink bool, out io.Writer, admin *client.Client, log *slog.Logger) (*sandboxRun, error) {
	bins, err := sandbox.Ensure(ctx, sandbox.BuildConfig{Progress: out})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "starting %d sandbox cluster(s) ...\n", n)
	fleet, err := sandbox.StartFleet(ctx, sandbox.FleetConfig{
		Dir: filepath.Join(dataDir, SandboxDir), Clusters: n, Argo: true, Binaries: bins, Progress: out,
	})
	if err != nil {
		return nil, err
	}
	stopFleet := func() {
		fmt.Fprintln(out, "stopping sandbox clusters ...")
		fleet.Stop()
	}
	sb := &sandboxRun{ctx: ctx, fleet: fleet}
	if flink {
		if sb.flink, err = startFlink(ctx, dataDir, fleet, out, log); err != nil {
			stopFleet()
			return nil, err
		}
	}
	stopFlink := func() {
		if sb.flink != nil {
			sb.flink.stop()
		}
	}
	if err := registerClusters(ctx, admin, fleet); err != nil {
		stopFlink()
		stopFleet()
		return nil, err
	}
	ctx, stopSupervisor := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		fleet.SuperviseAPIServers(ctx, func(e sandbox.SupervisorEvent) {
			fmt.Fprintln(out, e)
			log.Warn("sandbox kube-apiserver", "event", e.String())
		})
	})
	sb.stop = func() {
		stopSupervisor()
		wg.Wait()
		stopFlink()
		stopFleet()
	}
	return sb, nil
}

// serveControl serves the sandbox's control socket, DIR/sandbox/control.sock
// (purser sandbox stop, start, status and flink fail), until stop.
func (sb *sandboxRun) serveControl(ctx context.Context, ag *agents, out io.Writer, log *slog.Logger) (stop func(), err error) {
	return sandbox.ServeControl(ctx, sb.fleet.Dir(), &sandboxControl{ctx: sb.ctx, fleet: sb.fleet, flink: sb.flink, agents: ag,
		out: out, log: log, stopped: map[string]bool{}})
}

// restrictDataDir makes the data folder the owner's alone (0700) and its
// secrets and database files readable by the owner only (0600), whatever
// modes a folder made by hand, an older version or a restored backup had:
// it holds the admin token, the tokens, the key that opens every sealed
// value, and the database.
func restrictDataDir(dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	for _, name := range []string{AdminTokenFile, TokensFile, PolicyFile, KeyFile, AuditKeyFile, DatabaseFile,
		DatabaseFile + "-wal", DatabaseFile + "-shm", "purser.log"} {
		err := os.Chmod(filepath.Join(dataDir, name), 0o600)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}

// ensureCredentials creates, on first start, an admin token (in clear in
// admin.token for the local client, hashed in tokens.yaml) and a policy
// making that user admin. Later starts keep whatever is there, so an
// operator can edit both files.
func ensureCredentials(dataDir string) (string, error) {
	tokenPath := filepath.Join(dataDir, AdminTokenFile)
	if data, err := os.ReadFile(tokenPath); err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	token := auth.NewToken()
	tokens, err := yaml.Marshal(auth.TokensFile{Tokens: []auth.TokenEntry{{User: adminUser, SHA256: auth.HashToken(token)}}})
	if err != nil {
		return "", err
	}
	pol, err := yaml.Marshal(policy.PolicyFile{Admins: []string{adminUser}})
	if err != nil {
		return "", err
	}
	for path, data := range map[string][]byte{
		filepath.Join(dataDir, TokensFile): tokens,
		filepath.Join(dataDir, PolicyFile): pol,
	} {
		if _, err := os.Stat(path); err == nil {
			continue // an operator's file wins
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", err
		}
	}
	// Written last: its presence means the set is complete.
	if err := os.WriteFile(tokenPath, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	return token, nil
}

// registerClusters registers every sandbox cluster through the API, as an
// admin would, so that it is audited. After a restart a cluster is already
// registered: only its kubeconfig is put again (which writes nothing when
// it did not change), with the labels and taints it has now, so that what
// a user set (purser label, taint, cordon) survives the restart.
func registerClusters(ctx context.Context, admin *client.Client, fleet *sandbox.Fleet) error {
	for _, c := range fleet.Clusters() {
		kubeconfig, err := c.Kubeconfig("")
		if err != nil {
			return err
		}
		obj := v1alpha1.Cluster{
			TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindCluster},
			Metadata: v1alpha1.ObjectMeta{Name: c.Name(), Labels: c.Labels()},
			Spec:     v1alpha1.ClusterSpec{Kubeconfig: string(kubeconfig)},
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = admin.Do(ctx, http.MethodPost, "/api/v1/clusters", nil, body, "application/json", nil)
		if client.IsConflict(err) {
			_, _, err = admin.EditCluster(ctx, c.Name(), func(cl *v1alpha1.Cluster) (bool, error) {
				cl.Spec.Kubeconfig = string(kubeconfig)
				return true, nil
			})
		}
		if err != nil {
			return fmt.Errorf("register cluster %s: %w", c.Name(), err)
		}
	}
	return nil
}
