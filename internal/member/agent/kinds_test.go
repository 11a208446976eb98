package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestServedKinds: the agent reports every kind its kube-apiserver serves
// with the scope discovery gives it, a cluster-scoped CRD installed later
// included; and the built-in scopes the API decides with before any report
// agree with that kube-apiserver, for every kind of every built-in group.
func TestServedKinds(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "kinds-test"
	start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, srv.URL),
		Kinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, DiscoveryInterval: time.Second})
	kv, err := sc.JetStream().KeyValue(t.Context(), stream.KindsBucket)
	if err != nil {
		t.Fatal(err)
	}
	report := func(ctx context.Context) (map[schema.GroupKind]stream.ServedKind, error) {
		e, err := kv.Get(ctx, cluster)
		if err != nil {
			return nil, err
		}
		var r stream.ServedKinds
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return nil, err
		}
		out := map[schema.GroupKind]stream.ServedKind{}
		for _, k := range r.Kinds {
			out[schema.GroupKind{Group: k.Group, Kind: k.Kind}] = k
		}
		return out, nil
	}
	var got map[schema.GroupKind]stream.ServedKind
	sandboxtest.Eventually(t, time.Minute, "the served kinds reported", func(ctx context.Context) (err error) {
		got, err = report(ctx)
		return err
	})
	for gk, namespaced := range map[schema.GroupKind]bool{
		{Kind: "ConfigMap"}:           true,
		{Kind: "Namespace"}:           false,
		{Group: "batch", Kind: "Job"}: true,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: false,
		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        true,
	} {
		if k, ok := got[gk]; !ok || k.Namespaced != namespaced || k.Version == "" {
			t.Errorf("%s reported as %+v (present %v), want namespaced=%v", gk, k, ok, namespaced)
		}
	}
	builtin := policy.BuiltinGroups()
	for gk, k := range got {
		if !builtin[gk.Group] {
			continue
		}
		want := policy.ScopeCluster
		if k.Namespaced {
			want = policy.ScopeNamespaced
		}
		if s := policy.BuiltinScope(gk); s != want {
			t.Errorf("built-in scope of %s is %q; the kube-apiserver serves it %q", gk, s, want)
		}
	}

	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.InstallScopedCRD(t, dyn, "example.purser.io", "v1", "ClusterGizmo", "clustergizmos", "Cluster")
	sandboxtest.Eventually(t, 2*time.Minute, "the cluster-scoped CRD reported", func(ctx context.Context) error {
		got, err := report(ctx)
		if err != nil {
			return err
		}
		k, ok := got[schema.GroupKind{Group: "example.purser.io", Kind: "ClusterGizmo"}]
		if !ok || k.Namespaced {
			return fmt.Errorf("ClusterGizmo: %+v (present %v)", k, ok)
		}
		return nil
	})
}
