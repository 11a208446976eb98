// Package up runs every purser component in one process, with an
// embedded NATS server and SQLite database under one data folder: what
// `purser up` is. With Sandbox > 0 it also starts local Kubernetes clusters
// and registers them, so that a newcomer has a working farm in one command.
package up

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/dirlock"
	"github.com/purser-io/purser/internal/sandbox"
)

// Config is what `purser up` takes.
type Config struct {
	DataDir      string
	Listen       string // host:port of the API; port 0 picks a free one
	Sandbox      int    // local clusters to start and register
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

func run(ctx context.Context, cfg Config, out io.Writer) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
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

	sealer, err := seal.EnsureKeyFile(filepath.Join(dataDir, KeyFile))
	if err != nil {
		return err
	}
	adminToken, err := ensureCredentials(dataDir)
	if err != nil {
		return err
	}
	idCfg := auth.IdentitiesConfig{TokensFile: filepath.Join(dataDir, TokensFile), PolicyFile: filepath.Join(dataDir, PolicyFile), Logger: log}
	if cfg.OIDC.Enabled() {
		if idCfg.OIDC, err = auth.NewOIDC(cfg.OIDC, log); err != nil {
			return err
		}
	}
	identities, err := auth.LoadIdentities(idCfg)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
	}()

	auditKey, err := anchor.EnsureKeyFile(filepath.Join(dataDir, AuditKeyFile))
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
	streams, err := nats.Connect(ctx, stream.Options{Name: "purser-up"})
	if err != nil {
		return err
	}
	defer streams.Close()
	if err := streams.Declare(ctx); err != nil {
		return err
	}

	db, err := store.Open(ctx, filepath.Join(dataDir, DatabaseFile))
	if err != nil {
		return err
	}
	defer db.Close()

	relay := outbox.NewRelay(outbox.StoreSource(db), streams, outbox.RelayOptions{Logger: log})
	wg.Add(1)
	go func() {
		defer wg.Done()
		relay.Run(ctx)
	}()

	anchors, err := anchor.New(anchor.Config{Store: db, Stream: streams, Key: auditKey, Logger: log})
	if err != nil {
		return err
	}
	db.OnAuditCommit(anchors.Notify)
	if err := anchors.Init(ctx); err != nil {
		return err
	}
	wg.Go(func() { _ = anchors.Run(ctx) })
	wg.Go(func() { _ = identities.Run(ctx) })

	metrics := prometheus.NewRegistry()
	api := server.New(server.Config{
		Store: db, Stream: streams, Outbox: relay, Registry: metrics,
		Identities: identities, Sealer: sealer, Logger: log, Anchors: anchors,
	})
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	httpServer := &http.Server{Handler: api}
	server.ConfigureHTTPServer(httpServer)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := httpServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("API server stopped", "err", err)
		}
	}()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		httpServer.Shutdown(sctx)
	}()
	url := "http://" + ln.Addr().String()
	admin := client.New(client.Config{Server: url, Token: adminToken})
	if err := waitReady(ctx, url); err != nil {
		return err
	}

	if cfg.Sandbox > 0 {
		fleet, err := startSandbox(ctx, dataDir, cfg.Sandbox, out)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(out, "stopping sandbox clusters ...")
			fleet.Stop()
		}()
		if err := registerClusters(ctx, admin, fleet); err != nil {
			return err
		}
		// A kube-apiserver killed by hand or crashed is said and started
		// again; the supervisors stop before the clusters do (defers run
		// last in, first out).
		supCtx, stopSupervisor := context.WithCancel(ctx)
		supervised := make(chan struct{})
		go func() {
			defer close(supervised)
			fleet.SuperviseAPIServers(supCtx, func(e sandbox.SupervisorEvent) {
				fmt.Fprintln(out, e)
				log.Warn("sandbox kube-apiserver", "event", e.String())
			})
		}()
		defer func() {
			stopSupervisor()
			<-supervised
		}()
	}

	// Started after the clusters and stopped before them (defers run last
	// in, first out), so that no component works against a cluster that
	// is shutting down.
	compCtx, stopComponents := context.WithCancel(ctx)
	var components sync.WaitGroup
	defer func() {
		stopComponents()
		components.Wait()
	}()
	if err := startComponents(compCtx, &components, db, sealer, streams, identities, metrics, log, relay.Notify); err != nil {
		return err
	}

	clientConfig := cfg.ClientConfig
	if clientConfig == "" {
		if clientConfig, err = client.DefaultConfigPath(); err != nil {
			return err
		}
	}
	var contextName string
	if err := client.EditFile(clientConfig, func(f *client.File) error {
		contextName = client.SaveUpContext(f, client.Context{DataDir: dataDir, Server: url, Token: adminToken, AuditKey: anchors.KeyString()})
		return nil
	}); err != nil {
		return fmt.Errorf("write client config: %w", err)
	}
	fmt.Fprintf(out, "admin token in %s; client config in %s, context %s (now the current one)\n",
		filepath.Join(dataDir, AdminTokenFile), clientConfig, contextName)
	fmt.Fprintf(out, "audit anchors signed by %s (key in %s)\n", anchors.KeyString(), filepath.Join(dataDir, AuditKeyFile))
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
	policy, err := yaml.Marshal(auth.PolicyFile{Admins: []string{adminUser}})
	if err != nil {
		return "", err
	}
	for path, data := range map[string][]byte{
		filepath.Join(dataDir, TokensFile): tokens,
		filepath.Join(dataDir, PolicyFile): policy,
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

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("API at %s not ready after 30s (last: %w)", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func startSandbox(ctx context.Context, dataDir string, n int, out io.Writer) (*sandbox.Fleet, error) {
	bins, err := sandbox.Ensure(ctx, sandbox.BuildOptions{Progress: out})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "starting %d sandbox cluster(s) ...\n", n)
	return sandbox.StartFleet(ctx, sandbox.FleetConfig{
		Dir: filepath.Join(dataDir, SandboxDir), Clusters: n, Argo: true, Binaries: bins, Progress: out,
	})
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
