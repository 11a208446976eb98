package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/purser-io/purser/internal/platform/localport"
)

// Config describes one sandbox cluster.
type Config struct {
	Name     string    // also the kubeconfig's cluster, user and context name
	Dir      string    // the cluster's folder: data, keys, logs, kubeconfig
	Binaries *Binaries // from Ensure
	Nodes    int       // kwok nodes; default 1
	Argo     bool      // install the Argo Workflows CRDs and run its controller
	Labels   map[string]string
	// ControlPlaneOnly makes the cluster the API of another control plane
	// (Karmada's): no nodes, kwok or scheduler; the controller manager
	// runs only what keeps API objects tidy (namespace deletion, garbage
	// collection); the kube-apiserver can proxy aggregated APIs.
	ControlPlaneOnly bool
}

// Cluster is a running sandbox cluster.
type Cluster struct {
	cfg   Config
	state clusterState
	pki   pki

	mu    sync.Mutex
	procs map[string]*process
}

// clusterState is what a cluster keeps across restarts in cluster.json, so
// that the same folder comes back at the same endpoint with the same token.
type clusterState struct {
	EtcdClientPort int    `json:"etcdClientPort"`
	EtcdPeerPort   int    `json:"etcdPeerPort"`
	APIServerPort  int    `json:"apiServerPort"`
	Token          string `json:"token"`
}

// Timeouts for each step of a start; generous because two cores may be
// busy building or testing something else at the same time.
const (
	etcdStartTimeout      = 60 * time.Second
	apiServerStartTimeout = 120 * time.Second
	nodesReadyTimeout     = 60 * time.Second
	stopGrace             = 10 * time.Second
	// kube-apiserver stops listening at once on SIGTERM but then waits up
	// to its request timeout (60 s) for open watches; nothing it holds is
	// lost by cutting that short.
	apiServerStopGrace = 2 * time.Second
	executorImage      = "quay.io/argoproj/argoexec:" + ArgoVersion
)

// Start starts a cluster in cfg.Dir, reusing the data, keys, token and
// ports (when free) of an earlier run in the same folder, and returns once
// its API server is ready and its nodes are Ready.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Name == "" || cfg.Dir == "" || cfg.Binaries == nil {
		return nil, errors.New("sandbox: Config needs Name, Dir and Binaries")
	}
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	c := &Cluster{cfg: cfg, pki: pki{dir: filepath.Join(dir, "pki")}, procs: map[string]*process{}}
	if err := c.prepare(); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", cfg.Name, err)
	}
	if err := c.startAll(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("sandbox %s: %w", cfg.Name, err)
	}
	return c, nil
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.cfg.Name }

// Dir is the cluster's folder.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Labels are the labels the cluster was configured with.
func (c *Cluster) Labels() map[string]string { return c.cfg.Labels }

// KubeconfigPath is the path of the admin kubeconfig; it verifies the
// serving certificate against the cluster's own CA.
func (c *Cluster) KubeconfigPath() string { return filepath.Join(c.cfg.Dir, "kubeconfig") }

// APIServerAddr is host:port of the kube-apiserver.
func (c *Cluster) APIServerAddr() string {
	return "127.0.0.1:" + strconv.Itoa(c.state.APIServerPort)
}

// Server is the kube-apiserver's URL.
func (c *Cluster) Server() string { return "https://" + c.APIServerAddr() }

// RESTConfig returns a fresh admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Server(),
		BearerToken:     c.state.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.pki.caCert()},
		QPS:             50,
		Burst:           100,
		Timeout:         30 * time.Second,
	}
}

// Client returns an admin clientset.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// Kubeconfig returns the admin kubeconfig text, pointed at server (empty:
// the cluster's own endpoint), e.g. to reach the cluster through a Proxy.
func (c *Cluster) Kubeconfig(server string) ([]byte, error) {
	if server == "" {
		server = c.Server()
	}
	ca, err := os.ReadFile(c.pki.caCert())
	if err != nil {
		return nil, err
	}
	name := c.cfg.Name
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: c.state.Token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

// EnsureNamespace creates a namespace if it is missing and waits for its
// default service account, without which pods cannot be created in it.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	return ensureNamespace(ctx, client, name)
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return waitUntil(ctx, 30*time.Second, "service account default in namespace "+name, func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// prepare writes keys, token, ports and kubeconfig, reusing earlier ones.
func (c *Cluster) prepare() error {
	if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
		return err
	}
	if err := c.pki.ensure(c.cfg.Name); err != nil {
		return err
	}
	if c.cfg.ControlPlaneOnly {
		if err := c.pki.ensureFrontProxy(); err != nil {
			return err
		}
	}
	statePath := filepath.Join(c.cfg.Dir, "cluster.json")
	if data, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(data, &c.state); err != nil {
			return fmt.Errorf("read %s: %w", statePath, err)
		}
	}
	if c.state.Token == "" {
		b := make([]byte, 24)
		rand.Read(b)
		c.state.Token = hex.EncodeToString(b)
	}
	// Ports from localport: a kube-apiserver stopped by a test must be able
	// to start again on its port.
	taken := map[int]bool{}
	for _, port := range []*int{&c.state.EtcdClientPort, &c.state.EtcdPeerPort, &c.state.APIServerPort} {
		if *port != 0 && !taken[*port] && portFree(context.Background(), *port) == nil {
			taken[*port] = true
			continue
		}
		*port = 0
		for *port == 0 || taken[*port] {
			p, err := localport.Free()
			if err != nil {
				return err
			}
			*port = p
		}
		taken[*port] = true
	}
	data, _ := json.MarshalIndent(c.state, "", "  ")
	if err := writeFileAtomic(statePath, data, 0o600); err != nil {
		return err
	}
	tokens := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", c.state.Token)
	if err := writeFileAtomic(c.tokenFile(), []byte(tokens), 0o600); err != nil {
		return err
	}
	kc, err := c.Kubeconfig("")
	if err != nil {
		return err
	}
	return writeFileAtomic(c.KubeconfigPath(), kc, 0o600)
}

func (c *Cluster) tokenFile() string { return filepath.Join(c.cfg.Dir, "pki", "tokens.csv") }
func (c *Cluster) etcdDir() string   { return filepath.Join(c.cfg.Dir, "etcd") }

// startAll starts every process in dependency order and waits for each.
func (c *Cluster) startAll(ctx context.Context) error {
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	return c.startWorkloads(ctx)
}

// startControlPlane starts etcd and the kube-apiserver: the cluster
// answers, but nothing runs its objects yet.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	return c.startAPIServer(ctx)
}

// startWorkloads starts what runs the objects: the controller manager,
// the scheduler, kwok (the nodes' kubelets) and Argo's controller.
func (c *Cluster) startWorkloads(ctx context.Context) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	kc := c.KubeconfigPath()
	common := []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"}
	kcm := append([]string{"--controllers", "*", "--service-account-private-key-file", c.pki.saKey(),
		"--root-ca-file", c.pki.caCert(), "--use-service-account-credentials=false"}, common...)
	if c.cfg.ControlPlaneOnly {
		kcm[1] = "namespace,garbagecollector,serviceaccount,serviceaccount-token"
		return c.start(binControllerManager, kcm, nil)
	}
	if err := c.start(binControllerManager, kcm, nil); err != nil {
		return err
	}
	if err := c.start(binScheduler, common, nil); err != nil {
		return err
	}
	kwok := []string{"--kubeconfig", kc, "--config", c.cfg.Binaries.KwokStages(),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip", "10.0.0.1", "--cidr", "10.0.0.1/24", "--node-lease-duration-seconds", "40",
		"--server-address", ""}
	if err := c.start(binKwok, kwok, nil); err != nil {
		return err
	}
	if err := ensureNodes(ctx, client, c.cfg.Nodes); err != nil {
		return err
	}
	if err := waitUntil(ctx, nodesReadyTimeout, "kwok nodes Ready", func(ctx context.Context) error {
		return nodesReady(ctx, client, c.cfg.Nodes)
	}, c.processes(binKwok)...); err != nil {
		return err
	}
	if c.cfg.Argo {
		if err := c.startArgo(ctx, client); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) start(name string, args, env []string) error {
	return c.startProgram(name, c.cfg.Binaries.Path(name), args, env)
}

// startProgram starts a program that is not one of the sandbox's own
// binaries (Karmada's), as one of the cluster's processes: Stop stops it
// before the kube-apiserver.
func (c *Cluster) startProgram(name, bin string, args, env []string) error {
	p, err := startProcess(name, c.cfg.Dir, bin, args, env)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return nil
}

func (c *Cluster) processes(names ...string) []*process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []*process
	for _, n := range names {
		if p := c.procs[n]; p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", c.state.EtcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.state.EtcdPeerPort)
	args := []string{"--name", "default", "--data-dir", c.etcdDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default=" + peer,
		// A sandbox trades durability on power loss for speed; a process
		// crash still loses nothing.
		"--unsafe-no-fsync"}
	if err := c.start(binEtcd, args, nil); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return waitUntil(ctx, etcdStartTimeout, "etcd", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", http.NoBody)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
		}
		return nil
	}, c.processes(binEtcd)...)
}

func (c *Cluster) apiServerArgs() []string {
	args := []string{
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", c.state.EtcdClientPort),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(c.state.APIServerPort),
		"--cert-dir", filepath.Join(c.cfg.Dir, "pki", "apiserver-certs"),
		"--tls-cert-file", c.pki.servingCert(),
		"--tls-private-key-file", c.pki.servingKey(),
		"--client-ca-file", c.pki.caCert(),
		"--service-account-key-file", c.pki.saPub(),
		"--service-account-signing-key-file", c.pki.saKey(),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--token-auth-file", c.tokenFile(),
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.96.0.0/16",
		// The loopback address cannot be published as the kubernetes
		// service's endpoint, and nothing in the sandbox needs it.
		"--endpoint-reconciler-type", "none",
		// Stop at once when asked: there are no clients to drain, and a
		// graceful shutdown hangs once etcd is gone.
		"--shutdown-delay-duration", "0s",
		"--shutdown-watch-termination-grace-period", "0s",
		"--shutdown-send-retry-after=false",
		"--profiling=false",
	}
	if c.cfg.ControlPlaneOnly {
		// The front proxy's identity, with which the kube-apiserver
		// forwards requests for an aggregated API (Karmada's clusters),
		// and the headers that name the user it forwards for.
		args = append(args,
			"--proxy-client-cert-file", c.pki.frontProxyCert(),
			"--proxy-client-key-file", c.pki.frontProxyKey(),
			"--requestheader-client-ca-file", c.pki.caCert(),
			"--requestheader-allowed-names", frontProxyName,
			"--requestheader-username-headers", "X-Remote-User",
			"--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-")
	}
	return args
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	// A kube-apiserver that was just stopped can hold its port a little
	// longer; binding before it is free fails with "address already in use".
	if err := waitUntil(ctx, 60*time.Second, fmt.Sprintf("port %d to be free", c.state.APIServerPort), func(ctx context.Context) error {
		return portFree(ctx, c.state.APIServerPort)
	}); err != nil {
		return err
	}
	if err := c.start(binAPIServer, c.apiServerArgs(), nil); err != nil {
		return err
	}
	return c.waitAPIServerReady(ctx)
}

func (c *Cluster) waitAPIServerReady(ctx context.Context) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	return waitUntil(ctx, apiServerStartTimeout, "kube-apiserver /readyz", func(ctx context.Context) error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}, c.processes(binAPIServer, binEtcd)...)
}

// StopAPIServer stops the kube-apiserver alone; requests to the cluster then
// fail, while etcd keeps its data and the other components wait for it.
func (c *Cluster) StopAPIServer() {
	for _, p := range c.processes(binAPIServer) {
		p.stop(apiServerStopGrace)
	}
}

// StartAPIServer starts a stopped kube-apiserver again on the same port.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if ps := c.processes(binAPIServer); len(ps) == 1 && !ps[0].exited() {
		return nil
	}
	if err := c.startAPIServer(ctx); err != nil {
		return fmt.Errorf("sandbox %s: %w", c.cfg.Name, err)
	}
	return nil
}

// Wipe rebuilds the cluster empty behind the same endpoint and credentials,
// as a cluster reinstalled from scratch would be.
func (c *Cluster) Wipe(ctx context.Context) error {
	c.Stop()
	if err := os.RemoveAll(c.etcdDir()); err != nil {
		return fmt.Errorf("sandbox %s: wipe: %w", c.cfg.Name, err)
	}
	if err := c.startAll(ctx); err != nil {
		c.Stop()
		return fmt.Errorf("sandbox %s: restart after wipe: %w", c.cfg.Name, err)
	}
	return nil
}

// PowerOff kills every process of the cluster at once with SIGKILL, as a
// power cut does, and waits until they are gone. The folder stays:
// PowerOn brings the cluster back with what etcd had written.
func (c *Cluster) PowerOff() {
	ps := c.processes(stopOrder...)
	for _, p := range ps {
		if !p.exited() {
			// A group that exits meanwhile (ESRCH) is what is wanted.
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	for _, p := range ps {
		<-p.done
	}
	c.mu.Lock()
	clear(c.procs)
	c.mu.Unlock()
}

// PowerOn starts a cluster after PowerOff (or Stop) in its boot order:
// etcd and the kube-apiserver, then beforeWorkloads (nil: nothing), then
// what runs the objects. A hook that waits there is a machine that starts
// its agent before its kubelets.
func (c *Cluster) PowerOn(ctx context.Context, beforeWorkloads func(context.Context) error) error {
	if err := c.startControlPlane(ctx); err != nil {
		return fmt.Errorf("sandbox %s: power on: %w", c.cfg.Name, err)
	}
	if beforeWorkloads != nil {
		if err := beforeWorkloads(ctx); err != nil {
			return fmt.Errorf("sandbox %s: power on: %w", c.cfg.Name, err)
		}
	}
	if err := c.startWorkloads(ctx); err != nil {
		return fmt.Errorf("sandbox %s: power on: %w", c.cfg.Name, err)
	}
	return nil
}

// stopOrder lists processes dependents first: etcd must outlive the API
// server, and the API server everything that talks to it.
var stopOrder = []string{BinKarmadaControllerManager, BinKarmadaScheduler, BinKarmadaWebhook, BinKarmadaAggregatedAPIServer,
	binWorkflowController, binKwok, binScheduler, binControllerManager, binAPIServer, binEtcd}

// Stop stops every process of the cluster and waits for each to exit. The
// folder stays, so the cluster can be started again with its data.
func (c *Cluster) Stop() {
	for _, p := range c.processes(stopOrder...) {
		grace := stopGrace
		if p.name == binAPIServer {
			grace = apiServerStopGrace
		}
		p.stop(grace)
	}
	c.mu.Lock()
	clear(c.procs)
	c.mu.Unlock()
}
