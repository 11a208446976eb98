package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestStreamOutageWithHubLease: with the stream cut off but the hub
// renewing its Lease in the cluster (a real observer of the controller,
// which probes and renews through the cluster's API server), the agent
// fences nothing for twice its lease; once the renewals stop too, it
// fences within the lease.
func TestStreamOutageWithHubLease(t *testing.T) {
	if hubLeaseName != clusters.HubLeaseName || DefaultLeaderElectionNamespace != clusters.HubLeaseNamespace {
		t.Fatalf("the agent reads %s/%s, the hub renews %s/%s", DefaultLeaderElectionNamespace, hubLeaseName,
			clusters.HubLeaseNamespace, clusters.HubLeaseName)
	}
	c := env.Clusters(t)[0]
	ctx := t.Context()
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := sandbox.NewProxy("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "agent-hub-lease"
	for _, n := range []string{ns, clusters.HubLeaseNamespace} {
		if err := c.EnsureNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	createJob(t, kc, ns, "kept", map[string]string{v1alpha1.LabelConsistency: v1alpha1.ConsistencyAtMostOne, v1alpha1.LabelRunnableUID: "r-kept"})

	// The hub: a controller's observer, renewing every 300 ms.
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	kubeconfig, err := c.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "agent-hub-lease"
	clusterstest.Register(t, st, sealer, store.Cluster{Name: cluster}, kubeconfig)
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	var hubErr error
	go func() {
		defer close(hubDone)
		hubErr = clusters.NewObserver(clusters.Config{Store: st, Sealer: sealer, Interval: 300 * time.Millisecond,
			ProbeTimeout: time.Second}).Run(hubCtx)
	}()
	t.Cleanup(func() { stopHub(); <-hubDone })

	const (
		heartbeat = 500 * time.Millisecond
		lease     = 4 * time.Second
	)
	a, _ := start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, "nats://"+proxy.Addr()),
		HeartbeatInterval: heartbeat, LeaseDuration: lease, SnapshotInterval: 5 * time.Second, DiscoveryInterval: time.Second})
	sandboxtest.Eventually(t, time.Minute, "a heartbeat that says the hub renews its Lease", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		if hb.HubLease == nil || !hb.HubLease.Renewing {
			return fmt.Errorf("heartbeat's hub lease %+v", hb.HubLease)
		}
		return nil
	})

	// The stream is out: the hub's renewals alone keep the lease.
	proxy.Cut()
	for deadline := time.Now().Add(2 * lease); time.Now().Before(deadline); time.Sleep(heartbeat) {
		if n := a.fenced.Load(); n != 0 {
			t.Fatalf("the agent fenced %d objects with the stream out while the hub renewed its Lease", n)
		}
		if err := jobSuspended(ctx, kc, ns, "kept", false); err != nil {
			t.Fatalf("with the stream out while the hub renewed its Lease: %v", err)
		}
	}
	if left := a.leaseLeft(); left <= 0 {
		t.Fatalf("lease left %s after 2 leases without the stream", left)
	}

	// Now the hub is gone too: the cluster is cut off, and fences.
	stopHub()
	stopped := time.Now()
	<-hubDone
	if hubErr != nil && !errors.Is(hubErr, context.Canceled) {
		t.Fatal(hubErr)
	}
	sandboxtest.Eventually(t, time.Minute, "the AtMostOne Job suspended once both paths are silent", func(ctx context.Context) error {
		return jobSuspended(ctx, kc, ns, "kept", true)
	})
	if took := time.Since(stopped); took < lease-time.Second {
		t.Errorf("fenced %s after the last renewal could be seen, sooner than the lease %s", took, lease)
	}
	t.Logf("fenced %s after the hub stopped renewing (lease %s)", time.Since(stopped).Round(time.Millisecond), lease)
	_ = kc.BatchV1().Jobs(ns).Delete(context.Background(), "kept", metav1.DeleteOptions{})
}
