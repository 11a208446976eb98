package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/rollout"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

func TestDriftPaths(t *testing.T) {
	cur := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "7", "labels": map[string]any{LabelDeployable: "u"}},
		"data": map[string]any{"k": "old", "same": "x"}}
	would := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "8"},
		"data": map[string]any{"k": "new", "same": "x", "added": "y"}}
	if got := rollout.Drift(cur, would); !slices.Equal(got, []string{"data.added", "data.k"}) {
		t.Fatalf("drift %v", got)
	}
	if got := rollout.Drift(cur, cur); len(got) != 0 {
		t.Fatalf("no drift expected, got %v", got)
	}
}

// TestOverridesAndObserve: one deployable gives each DC its own value
// (a merge patch, a JSON patch), drift is repaired to each cluster's own
// object; a deployable in mode Observe reports drift by field and never
// writes (the object's resourceVersion does not move).
func TestOverridesAndObserve(t *testing.T) {
	eng := storetest.Engines()[0]
	f := newFixture(t, eng.NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	// A short resync: an object made by hand carries no label, so only a
	// resync looks at it.
	f.start(syncerOpts{resync: 2 * time.Second})
	dc := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"dc": v}}
	}
	rec := f.putSpec("endpoints", v1alpha1.DeployableSpec{
		Template: configMapTemplate(map[string]any{"endpoint": "default.example"}),
		Overrides: []v1alpha1.Override{
			{ClusterSelector: dc("dc-2"), Patch: json.RawMessage(`{"data":{"endpoint":"dc2.example"}}`)},
			{ClusterSelector: dc("dc-3"), Patch: json.RawMessage(`[{"op":"replace","path":"/data/endpoint","value":"dc3.example"}]`)},
		},
	})
	f.waitSynced(rec, s1, s2, s3)
	f.waitConfigMapData(s1, "endpoints", "endpoint", "default.example")
	f.waitConfigMapData(s2, "endpoints", "endpoint", "dc2.example")
	f.waitConfigMapData(s3, "endpoints", "endpoint", "dc3.example")

	ctx := context.Background()
	cm, err := f.configMap(ctx, s2, "endpoints")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["endpoint"] = "tampered"
	if _, err := f.kube[s2].CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitConfigMapData(s2, "endpoints", "endpoint", "dc2.example")

	// Observe: nothing is created; an object made by hand is compared.
	obs := f.putSpec("watched", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"key": "want"}), Mode: v1alpha1.ModeObserve})
	waitMessage := func(cluster, want string) {
		t.Helper()
		sandboxtest.Eventually(t, wait, cluster+": "+want, func(ctx context.Context) error {
			sts, err := f.statuses(ctx, obs.UID)
			if err != nil {
				return err
			}
			if st := sts[cluster]; st == nil || !strings.Contains(st.Message, want) {
				return fmt.Errorf("status %+v", st)
			}
			return nil
		})
	}
	waitMessage(s1, "missing on the cluster")
	if _, err := f.configMap(ctx, s1, "watched"); err == nil {
		t.Fatal("mode Observe created the object")
	}
	made, err := f.kube[s1].CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: f.ns}, Data: map[string]string{"key": "other"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitMessage(s1, "observed drift, not repaired (mode Observe): data.key")
	made.Data["key"] = "want"
	if made, err = f.kube[s1].CoreV1().ConfigMaps(f.ns).Update(ctx, made, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMessage(s1, "observed: in sync")
	after, err := f.configMap(ctx, s1, "watched")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != made.ResourceVersion || after.Labels[LabelDeployable] != "" {
		t.Fatalf("mode Observe wrote the object: resourceVersion %s -> %s, labels %v", made.ResourceVersion, after.ResourceVersion, after.Labels)
	}
}
