package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestLeaderElectionOnARealCluster: of two agents of one cluster only the
// leader publishes; when the leader is cut off from the kube-apiserver (it
// can no longer renew) it stops, and the other takes over once the lease
// has run out; when that one stops cleanly it hands over at once, to the
// first one, reconnected and standing by.
func TestLeaderElectionOnARealCluster(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "agent-leader"
	got := consume(t, sc, cluster)
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := "agent-leader"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The first agent reaches the kube-apiserver through a proxy the test
	// cuts: a leader that cannot renew, as after a crash.
	proxy, err := sandbox.NewProxy("127.0.0.1:0", c.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxied := c.RESTConfig()
	proxied.Host = "https://" + proxy.Addr()

	const (
		leaseNamespace = "purser-leader-test" // created by the agent
		// Renewals through a busy kube-apiserver may take seconds; a
		// leader must not lose its term to one of them before the cut.
		leaseDuration = 10 * time.Second
	)
	election := func(identity string) LeaderElection {
		return LeaderElection{Enabled: true, Namespace: leaseNamespace, Identity: identity,
			LeaseDuration: leaseDuration, RenewDeadline: 7 * time.Second, RetryPeriod: time.Second}
	}
	config := func(identity string, rc *rest.Config) Config {
		return Config{Cluster: cluster, RESTConfig: rc, Stream: streamtest.Connect(t, srv.URL),
			Kinds:            []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}},
			SnapshotInterval: time.Second, HeartbeatInterval: 300 * time.Millisecond, DiscoveryInterval: time.Second,
			LeaderElection: election(identity)}
	}
	first, _ := start(t, config("agent-first", proxied))
	waitLeader(t, sc, kc, cluster, leaseNamespace, "agent-first")
	second, stopSecond := start(t, config("agent-second", c.RESTConfig()))

	createConfigMap(t, kc, ns, "while-first-leads")
	published(t, got, ns, "while-first-leads")
	// Snapshots and heartbeats go on; the second agent, started before
	// them, never takes part.
	since := time.Now()
	sandboxtest.Eventually(t, time.Minute, "a snapshot after the second agent started", func(context.Context) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		for _, s := range got.snapshots {
			if s.TakenAt.After(since) {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	if second.leading.Load() || second.published.Load() != 0 || len(second.watches()) != 0 {
		t.Fatalf("the standby works: leading %v, published %d, watching %d kinds",
			second.leading.Load(), second.published.Load(), len(second.watches()))
	}
	if first.published.Load() == 0 {
		t.Fatalf("the leader published nothing")
	}

	cut := time.Now()
	proxy.Cut()
	waitLeader(t, sc, kc, cluster, leaseNamespace, "agent-second")
	t.Logf("the standby took over %s after the leader was cut off (lease %s)", time.Since(cut).Round(time.Millisecond), leaseDuration)
	if first.leading.Load() {
		t.Errorf("the cut-off leader still works after the other took over")
	}
	createConfigMap(t, kc, ns, "while-second-leads")
	published(t, got, ns, "while-second-leads")
	if second.published.Load() == 0 {
		t.Errorf("the new leader published nothing")
	}

	// A clean stop releases the lease: the first agent, reconnected and
	// campaigning, leads again without waiting for the lease to run out.
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	before := first.published.Load()
	stopSecond()
	waitLeader(t, sc, kc, cluster, leaseNamespace, "agent-first")
	createConfigMap(t, kc, ns, "while-first-leads-again")
	published(t, got, ns, "while-first-leads-again")
	if first.published.Load() == before {
		t.Errorf("the first agent, leading again, published nothing")
	}
}

// waitLeader waits until identity holds the Lease, works, and heartbeats.
func waitLeader(t *testing.T, sc *stream.Client, kc kubernetes.Interface, cluster, leaseNamespace, identity string) {
	t.Helper()
	sandboxtest.Eventually(t, 2*time.Minute, identity+" leads", func(ctx context.Context) error {
		l, err := kc.CoordinationV1().Leases(leaseNamespace).Get(ctx, DefaultLeaderElectionName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity {
			return fmt.Errorf("lease held by %v", l.Spec.HolderIdentity)
		}
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		if hb.Identity != identity {
			return fmt.Errorf("heartbeat from %s", hb.Identity)
		}
		return nil
	})
}

func createConfigMap(t *testing.T, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func published(t *testing.T, got *consumed, ns, name string) {
	t.Helper()
	sandboxtest.Eventually(t, 2*time.Minute, name+" published", func(context.Context) error {
		if !got.find(func(ev stream.Event) bool {
			return ev.Namespace == ns && ev.Name == name && ev.Type == stream.EventAdded
		}) {
			return fmt.Errorf("no event")
		}
		return nil
	})
}

// TestNewChecksDurations: leases that would let an agent fence while it
// heartbeats, or let two leaders work at once, are refused.
func TestNewChecksDurations(t *testing.T) {
	base := Config{Cluster: "c", RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Stream: &stream.Client{}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"defaults with leader election", func(c *Config) { c.LeaderElection.Enabled = true }, true},
		{"long heartbeats lengthen the default lease", func(c *Config) { c.HeartbeatInterval = time.Minute }, true},
		{"lease of three heartbeats", func(c *Config) { c.HeartbeatInterval, c.LeaseDuration = time.Second, 3*time.Second }, true},
		{"lease under three heartbeats", func(c *Config) { c.HeartbeatInterval, c.LeaseDuration = time.Second, 2*time.Second }, false},
		{"leader lease within renew deadline and retry", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, LeaseDuration: 12 * time.Second}
		}, false},
		{"renew deadline within retry", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, RenewDeadline: 2 * time.Second}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			a, err := New(cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want ok %v", err, tc.ok)
			}
			if err == nil && a.cfg.LeaseDuration < 3*a.cfg.HeartbeatInterval {
				t.Errorf("lease %s, heartbeat %s", a.cfg.LeaseDuration, a.cfg.HeartbeatInterval)
			}
		})
	}
}
