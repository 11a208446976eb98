package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// startRealAgents runs what reports the clusters' objects in production:
// NATS, purser's ingester and one real agent per cluster, each watching
// its kube-apiserver.
func (f *fixture) startRealAgents() {
	f.t.Helper()
	nats := streamtest.Start(f.t, "")
	streams := streamtest.Declared(f.t, nats.URL)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	run := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				f.t.Errorf("%s stopped: %v", name, err)
			}
		})
	}
	interp, err := health.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: f.store, Stream: streams, Health: interp, Logger: log.With("component", "ingester")})
	if err != nil {
		f.t.Fatal(err)
	}
	run("ingester", ingester.Run)
	for _, c := range f.clusters {
		sc, err := stream.Connect(ctx, nats.URL, stream.Config{Name: "agent-" + c.Name()})
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(sc.Close)
		a, err := agent.New(agent.Config{Cluster: c.Name(), RESTConfig: c.RESTConfig(), Stream: sc,
			SnapshotInterval: 5 * time.Second, HeartbeatInterval: 300 * time.Millisecond, DiscoveryInterval: time.Second,
			LeaseDuration: 6 * time.Second, Logger: log.With("component", "agent", "cluster", c.Name())})
		if err != nil {
			f.t.Fatal(err)
		}
		run("agent "+c.Name(), a.Run)
	}
}

// TestRollbackOfABrokenDeployment, with the real agents reporting: a
// deployable that is a Deployment rolls out a wave per DC; its second
// generation asks for a node no cluster has, so on dc-1's cluster the
// Deployment (strategy Recreate) loses every available replica; the gate
// sees it in what the agent reported after the generation landed, the
// rollout stops before dc-2 and, by onFailure Rollback, dc-1's Deployment
// returns to the first generation and is available again.
func TestRollbackOfABrokenDeployment(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	f.startRealAgents()
	f.start(syncerOpts{})
	deployment := func(nodeSelector map[string]any) map[string]any {
		pod := map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}}
		if nodeSelector != nil {
			pod["nodeSelector"] = nodeSelector
		}
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"replicas": 2, "strategy": map[string]any{"type": "Recreate"},
				"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}, "spec": pod}}}
	}
	available := func(cluster string, want bool) {
		t.Helper()
		sandboxtest.Eventually(t, wait, fmt.Sprintf("Deployment web on %s available=%v", cluster, want), func(ctx context.Context) error {
			d, err := f.kube[cluster].AppsV1().Deployments(f.ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok := d.Status.AvailableReplicas == 2 && d.Status.ObservedGeneration == d.Generation; ok != want {
				return fmt.Errorf("generation %d observed %d, available %d of 2", d.Generation, d.Status.ObservedGeneration, d.Status.AvailableReplicas)
			}
			return nil
		})
	}
	nodeSelector := func(cluster string) map[string]string {
		d, err := f.kube[cluster].AppsV1().Deployments(f.ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.NodeSelector
	}

	rec := f.putSpec("web", v1alpha1.DeployableSpec{Template: deployment(nil)})
	f.waitSynced(rec, s1, s2, s3)
	for _, c := range []string{s1, s2, s3} {
		available(c, true)
	}

	var waves []v1alpha1.Wave
	for _, dc := range []string{"dc-1", "dc-2", "dc-3"} {
		waves = append(waves, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
	}
	ro := &v1alpha1.Rollout{Waves: waves, MinSuccessSeconds: 20, ProgressDeadlineSeconds: 120, OnFailure: v1alpha1.OnFailureRollback,
		Gates: []v1alpha1.Gate{{Name: "web-available", APIVersion: "apps/v1", Kind: "Deployment",
			Unhealthy: "object.?status.?availableReplicas.orValue(0) < object.spec.replicas"}}}
	rec = f.putSpec("web", v1alpha1.DeployableSpec{Template: deployment(map[string]any{"purser.io/test": "no-such-node"}), Rollout: ro})
	st := f.waitRollout(rec, "rolled back on the broken Deployment", func(st *v1alpha1.RolloutStatus) bool {
		return st.State == v1alpha1.RolloutRolledBack
	})
	if !strings.Contains(st.Message, "Deployment/"+f.ns+"/web") || !strings.Contains(st.Message, "web-available") || st.Wave != "dc-1" {
		t.Fatalf("rolled back status does not say why: %+v", st)
	}
	t.Logf("rolled back: %s", st.Message)
	available(s1, true)
	if sel := nodeSelector(s1); len(sel) != 0 {
		t.Errorf("%s's Deployment after the rollback asks for nodes %v, want the first generation's (none)", s1, sel)
	}
	for _, c := range []string{s2, s3} {
		if sel := nodeSelector(c); len(sel) != 0 {
			t.Errorf("%s got the broken generation (nodeSelector %v) though the rollout stopped at dc-1", c, sel)
		}
	}
}
