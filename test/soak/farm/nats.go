package farm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/purser-io/purser/internal/platform/localport"
)

// NATS is a JetStream cluster of separate nats-server processes on
// loopback, each with its own store folder and ports, which a restart
// keeps.
type NATS struct {
	Nodes   []*Process
	clients []string // nats://HOST:PORT of each node
	monitor []string // http://HOST:PORT of each node's monitoring
	// http reaches each node's monitoring (nil: http.DefaultClient), from
	// inside its DC in a DC farm.
	http []*http.Client
}

// natsCluster is the cluster's name; nodes are named nats-1 .. nats-N.
const natsCluster = "purser"

func (f *Farm) startNATS(ctx context.Context, n int) (*NATS, error) {
	ports, err := localport.FreeN(3 * n)
	if err != nil {
		return nil, err
	}
	nc := &NATS{}
	var routes []string
	for i := range n {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3*i+1]))
	}
	for i := range n {
		name := "nats-" + strconv.Itoa(i+1)
		client, cluster, monitor := ports[3*i], ports[3*i+1], ports[3*i+2]
		store := filepath.Join(f.dir, name, "store")
		if err := os.MkdirAll(store, 0o755); err != nil {
			return nil, err
		}
		p := f.newProcess(name, f.bins.NATSServer,
			"-a", "127.0.0.1", "-p", strconv.Itoa(client), "-m", strconv.Itoa(monitor),
			"-n", name, "-js", "-sd", store,
			"--cluster_name", natsCluster, "--cluster", "nats://127.0.0.1:"+strconv.Itoa(cluster),
			"--routes", strings.Join(routes, ","))
		nc.Nodes = append(nc.Nodes, p)
		nc.clients = append(nc.clients, "nats://127.0.0.1:"+strconv.Itoa(client))
		nc.monitor = append(nc.monitor, "http://127.0.0.1:"+strconv.Itoa(monitor))
	}
	for _, p := range nc.Nodes {
		if err := p.Start(); err != nil {
			return nc, err // Close stops those that started
		}
	}
	if err := nc.WaitHealthy(ctx, 2*time.Minute); err != nil {
		return nc, err
	}
	return nc, nil
}

// URLs lists the nodes' client URLs, comma separated, for --nats.
func (n *NATS) URLs() string { return strings.Join(n.clients, ",") }

// WaitHealthy waits until every running node knows the JetStream meta
// leader, all agree on it, and each answers /healthz (its streams and
// consumers are current), so that a node that was just restarted has
// caught up before the next fault.
func (n *NATS) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return waitFor(ctx, timeout, "the NATS cluster to have a JetStream meta leader and current nodes", n.healthy, n.Nodes...)
}

func (n *NATS) healthy(ctx context.Context) error {
	leader := ""
	for i, p := range n.Nodes {
		if !p.Running() {
			continue
		}
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
				Size   int    `json:"cluster_size"`
			} `json:"meta_cluster"`
		}
		if err := getJSON(ctx, n.client(i), n.monitor[i]+"/jsz", &jsz); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if jsz.Meta == nil || jsz.Meta.Leader == "" {
			return fmt.Errorf("%s knows no meta leader", p.Name)
		}
		if leader != "" && jsz.Meta.Leader != leader {
			return fmt.Errorf("%s says the meta leader is %s, another node says %s", p.Name, jsz.Meta.Leader, leader)
		}
		leader = jsz.Meta.Leader
		if err := getJSON(ctx, n.client(i), n.monitor[i]+"/healthz", nil); err != nil {
			return fmt.Errorf("%s /healthz: %w", p.Name, err)
		}
	}
	if leader == "" {
		return fmt.Errorf("no NATS node is running")
	}
	return nil
}

// client is the HTTP client of node i's monitoring.
func (n *NATS) client(i int) *http.Client {
	if i < len(n.http) && n.http[i] != nil {
		return n.http[i]
	}
	return http.DefaultClient
}

func getJSON(ctx context.Context, hc *http.Client, url string, out any) error {
	return callJSON(ctx, hc, http.MethodGet, url, nil, out)
}

// postJSON posts in as JSON and decodes the answer into out.
func postJSON(ctx context.Context, hc *http.Client, url string, in, out any) error {
	return callJSON(ctx, hc, http.MethodPost, url, in, out)
}

func callJSON(ctx context.Context, hc *http.Client, method, url string, in, out any) error {
	body := io.Reader(http.NoBody)
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Error string `json:"error"`
		}
		// A body that is not NATS's JSON error leaves only the status.
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return fmt.Errorf("%s: %s %s", url, resp.Status, body.Error)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
