package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// An agent whose kube-apiserver dies says so in its heartbeats, which go
// on, and sends no snapshot of its orphaned caches until the
// kube-apiserver is back; then it says its caches are current again.
func TestHeartbeatSaysWhenTheKubeAPIIsGone(t *testing.T) {
	c := env.Dedicated(t, false)
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "kubeapi-test"
	got := consume(t, sc, cluster)
	start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, srv.URL),
		Kinds:            []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}},
		SnapshotInterval: time.Second, HeartbeatInterval: 300 * time.Millisecond, DiscoveryInterval: time.Second})
	beat := func(what string, ok func(hb *stream.Heartbeat) error) *stream.Heartbeat {
		var last *stream.Heartbeat
		sandboxtest.Eventually(t, 2*time.Minute, what, func(ctx context.Context) error {
			hb, err := heartbeatOf(ctx, sc, cluster)
			if err != nil {
				return err
			}
			last = hb
			return ok(hb)
		})
		return last
	}
	current := func(hb *stream.Heartbeat) error {
		if k := hb.KubeAPI; k == nil || !k.Connected || !k.Synced || k.LastContact == nil {
			return fmt.Errorf("report %+v", hb.KubeAPI)
		}
		return nil
	}
	beat("a heartbeat saying the caches are current", current)
	snapshots := func() int {
		got.mu.Lock()
		defer got.mu.Unlock()
		return len(got.snapshots)
	}
	sandboxtest.Eventually(t, time.Minute, "a first snapshot", func(context.Context) error {
		if snapshots() == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})

	c.StopAPIServer()
	down := beat("a heartbeat saying the kube-apiserver does not answer", func(hb *stream.Heartbeat) error {
		if k := hb.KubeAPI; k == nil || k.Connected || k.Error == "" || !k.Synced {
			return fmt.Errorf("report %+v", hb.KubeAPI)
		}
		return nil
	})
	t.Logf("while down: %+v", *down.KubeAPI)
	// The beat that said so was sent after the probe that failed, which
	// came after any snapshot taken before it: from the next beat on, no
	// snapshot may be sent. Several more beats show the agent alive, and
	// give a snapshot every chance to slip out.
	before := snapshots()
	for range 5 {
		prev := down.Time
		down = beat("another heartbeat while down", func(hb *stream.Heartbeat) error {
			if !hb.Time.After(prev) {
				return fmt.Errorf("no new beat")
			}
			if hb.KubeAPI == nil || hb.KubeAPI.Connected {
				return fmt.Errorf("report %+v while down", hb.KubeAPI)
			}
			return nil
		})
	}
	// One snapshot may have been in flight (its probe passed before the
	// kube-apiserver stopped) when the beat was read; no more.
	if n := snapshots(); n > before+1 {
		t.Errorf("snapshots sent while the kube-apiserver was down: %d before, %d after", before, n)
	}

	if err := c.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	beat("a heartbeat saying the caches are current again", current)
	n := snapshots()
	sandboxtest.Eventually(t, time.Minute, "snapshots again", func(context.Context) error {
		if snapshots() <= n {
			return fmt.Errorf("none since the kube-apiserver is back")
		}
		return nil
	})
}
