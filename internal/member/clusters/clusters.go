// Package clusters is purser's one way to reach a registered member
// cluster: it turns a store.Cluster row (its sealed kubeconfig) into a
// client configuration. Every component that talks to a member cluster's
// kube-apiserver (the syncer, the submitter, the controller's health
// probes) builds its clients here, so that limits and timeouts are
// decided once.
//
// It also owns cluster health: Policy.Step, a pure state machine, turns
// probes of a cluster's kube-apiserver and its agent's heartbeats into the
// Ready condition and the taints purser puts on the cluster
// (status.taints), with hysteresis; HealthMonitor runs it for
// `purser controller` and writes the result, audited, to the store.
package clusters

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/tcpconn"
)

// Client limits. A member cluster's API server is shared with its own
// users, so purser stays well under the defaults of kubectl-like bursts,
// but high enough that converging thousands of objects does not crawl.
const (
	QPS   = 50
	Burst = 100
	// Timeout bounds one request, so that a black-holed cluster ties up a
	// worker for seconds, not minutes. Watches are not bounded by it.
	Timeout = 15 * time.Second
	// LandsWithin bounds how long after it is sent a write can take
	// effect on the cluster: the caller gives it Timeout, and what it
	// wrote to the connection by then is acknowledged or dropped by the
	// kernel within Timeout more (TCP_USER_TIMEOUT, set by tcpconn).
	LandsWithin = 2 * Timeout
)

// Limits are the rate limit of purser's clients of one member cluster
// (client-go's QPS and Burst, per client). The zero value is purser's
// (QPS, Burst); a field left zero keeps purser's value. Raising them is
// for a farm whose clusters are purser's alone, or sized for the bursts
// of a whole cluster's failover (docs/benchmarks.md, Failover).
type Limits struct {
	QPS   float32
	Burst int
}

// apply sets l on cfg, purser's values where l has none.
func (l Limits) apply(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = QPS, Burst
	if l.QPS > 0 {
		cfg.QPS = l.QPS
	}
	if l.Burst > 0 {
		cfg.Burst = l.Burst
	}
}

// RESTConfig opens the cluster's sealed kubeconfig and returns a client
// configuration for it with purser's limits. The plaintext kubeconfig
// lives only in memory for the duration of the call.
func RESTConfig(c *store.Cluster, sealer *seal.Sealer) (*rest.Config, error) {
	if len(c.Kubeconfig) == 0 {
		return nil, fmt.Errorf("cluster %s: no kubeconfig registered", c.Name)
	}
	plain, err := sealer.Open(c.Kubeconfig, seal.KubeconfigBinding(c.Name))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: open kubeconfig: %w", c.Name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(plain)
	clear(plain)
	if err != nil {
		// The parse error may quote the kubeconfig (tokens included), so
		// it is not wrapped.
		return nil, fmt.Errorf("cluster %s: kubeconfig does not parse", c.Name)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = QPS, Burst, Timeout
	// A request sent into a partition is dropped by the kernel once
	// unacknowledged for Timeout, not delivered when the partition heals:
	// a create the submitter gave up on must not land long after its
	// attempt was moved elsewhere (tcpconn).
	cfg.Dial = tcpconn.DialContext(Timeout, Timeout)
	cfg.UserAgent = "purser"
	return cfg, nil
}

// Cache keeps one configuration per cluster and rebuilds it only when the
// row's kubeconfig changes, so that polling loops do not decrypt and parse
// every kubeconfig on every pass.
type Cache struct {
	sealer *seal.Sealer
	// Limits are those of every configuration the cache builds; set them
	// before its first use. The zero value is purser's.
	Limits Limits

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	sealed string // the sealed kubeconfig the config was built from
	cfg    *rest.Config
}

// NewCache returns an empty cache opening kubeconfigs with sealer.
func NewCache(sealer *seal.Sealer) *Cache {
	return &Cache{sealer: sealer, entries: map[string]cacheEntry{}}
}

// NewLimitedCache is NewCache whose configurations have limits.
func NewLimitedCache(sealer *seal.Sealer, limits Limits) *Cache {
	c := NewCache(sealer)
	c.Limits = limits
	return c
}

// RESTConfig returns a copy of the cached configuration of c, building it
// when c's kubeconfig differs from the one it was built from. A copy,
// because callers set their own fields (timeouts, rate limiters).
func (k *Cache) RESTConfig(c *store.Cluster) (*rest.Config, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.entries[c.Name]; ok && e.sealed == string(c.Kubeconfig) {
		return rest.CopyConfig(e.cfg), nil
	}
	cfg, err := RESTConfig(c, k.sealer)
	if err != nil {
		return nil, err
	}
	k.Limits.apply(cfg)
	k.entries[c.Name] = cacheEntry{sealed: string(c.Kubeconfig), cfg: cfg}
	return rest.CopyConfig(cfg), nil
}

// Forget drops the entry of a cluster that was removed.
func (k *Cache) Forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.entries, name)
}
