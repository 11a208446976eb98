package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/syncer"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

func TestLabelDeployableIsTheSyncers(t *testing.T) {
	if labelDeployable != syncer.LabelDeployable {
		t.Fatalf("the agent selects %q, the syncer labels %q", labelDeployable, syncer.LabelDeployable)
	}
}

func TestLabelledResources(t *testing.T) {
	all := []string{"get", "list", "watch", "create", "delete"}
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Verbs: all},
			{Name: "services", Kind: "Service", Verbs: all},
			{Name: "services/status", Kind: "Service", Verbs: []string{"get", "patch"}},
			{Name: "events", Kind: "Event", Verbs: all},
			{Name: "bindings", Kind: "Binding", Verbs: []string{"create"}},
			{Name: "nodes", Kind: "Node", Verbs: all},
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "events", Kind: "Event", Verbs: all},
		}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{
			{Name: "jobs", Kind: "Job", Verbs: all},
			{Name: "cronjobs", Kind: "CronJob", Verbs: all},
		}},
		{GroupVersion: "metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "PodMetrics", Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "flink.apache.org/v1beta2", APIResources: []metav1.APIResource{
			{Name: "flinkdeployments", Kind: "FlinkDeployment", Verbs: all},
		}},
		{GroupVersion: "example.purser.io/v2", APIResources: []metav1.APIResource{
			{Name: "gadgets", Kind: "Gadget", Verbs: all},
		}},
	}
	configured := []schema.GroupVersionKind{
		{Version: "v1", Kind: "ConfigMap"},
		{Group: "batch", Version: "v1", Kind: "Job"},
		// Configured in another version than the one served: still
		// tracked in full once served, so never watched for labels.
		{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"},
	}
	got := labelledResources(lists, configured)
	want := map[schema.GroupKind]resource{
		{Kind: "Service"}: {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Service"},
			gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}},
		{Kind: "Node"}: {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Node"},
			gvr: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}},
		{Group: "batch", Kind: "CronJob"}: {gvk: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"},
			gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}},
		{Group: "example.purser.io", Kind: "Gadget"}: {gvk: schema.GroupVersionKind{Group: "example.purser.io", Version: "v2", Kind: "Gadget"},
			gvr: schema.GroupVersionResource{Group: "example.purser.io", Version: "v2", Resource: "gadgets"}},
	}
	if len(got) != len(want) {
		t.Errorf("got %d kinds, want %d: %v", len(got), len(want), got)
	}
	for gk, w := range want {
		if got[gk] != w {
			t.Errorf("%s: got %+v, want %+v", gk, got[gk], w)
		}
	}
}

// TestLabelledObjectsOnARealCluster: objects of kinds that are not
// configured are tracked when they carry either of purser's labels, and
// only then; an object that loses one of two labels stays tracked, one
// that loses its last is reported deleted; a CRD installed after the start
// counts.
func TestLabelledObjectsOnARealCluster(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "agent-labelled"
	got := consume(t, sc, cluster)
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := "agent-labelled"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sa := func(name string, labels map[string]string) *corev1.ServiceAccount {
		s, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	runnable := sa("runnable", map[string]string{v1alpha1.LabelRunnableUID: "r-1"})
	plain := sa("plain", map[string]string{"app": "x"})
	both := sa("both", map[string]string{v1alpha1.LabelRunnableUID: "r-2", labelDeployable: "d-2"})

	a, _ := start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, srv.URL),
		Kinds:            []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}},
		SnapshotInterval: time.Second, HeartbeatInterval: 500 * time.Millisecond, DiscoveryInterval: time.Second})

	event := func(what string, pred func(stream.Event) bool) {
		t.Helper()
		sandboxtest.Eventually(t, 2*time.Minute, what, func(context.Context) error {
			if !got.find(pred) {
				return fmt.Errorf("no such event")
			}
			return nil
		})
	}
	event("the labelled ServiceAccount published", func(ev stream.Event) bool {
		return ev.Kind == "ServiceAccount" && ev.Type == stream.EventAdded && ev.UID == string(runnable.UID)
	})
	event("the ServiceAccount with both labels published", func(ev stream.Event) bool {
		return ev.Kind == "ServiceAccount" && ev.Type == stream.EventAdded && ev.UID == string(both.UID)
	})
	// A snapshot lists the labelled ones, once each, and not the other.
	sandboxtest.Eventually(t, time.Minute, "a snapshot of the labelled ServiceAccounts", func(context.Context) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		last := fmt.Errorf("no snapshot of ServiceAccounts among %d chunks", len(got.snapshots))
		for _, s := range got.snapshots {
			for _, l := range s.Kinds {
				if l.Kind != "ServiceAccount" {
					continue
				}
				n := map[string]int{}
				for _, it := range l.Items {
					n[it[0]]++
				}
				if n[string(runnable.UID)] == 1 && n[string(both.UID)] == 1 && n[string(plain.UID)] == 0 &&
					len(l.Items) == 2 && l.ListResourceVersion != "" {
					return nil
				}
				last = fmt.Errorf("snapshot at %s lists %v", l.ListResourceVersion, l.Items)
			}
		}
		return last
	})
	if got.find(func(ev stream.Event) bool { return ev.UID == string(plain.UID) }) {
		t.Errorf("the unlabelled ServiceAccount was published")
	}
	if a.count("v1/ServiceAccount") != 2 {
		t.Errorf("the agent counts %d ServiceAccounts, want 2", a.count("v1/ServiceAccount"))
	}

	// Losing one label of two: still tracked, modified, not deleted.
	patch := func(name, p string) string {
		t.Helper()
		s, err := kc.CoreV1().ServiceAccounts(ns).Patch(ctx, name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.ResourceVersion
	}
	rv := patch("both", `{"metadata":{"labels":{"`+v1alpha1.LabelRunnableUID+`":null}}}`)
	event("the ServiceAccount that lost one label modified", func(ev stream.Event) bool {
		return ev.UID == string(both.UID) && ev.Type == stream.EventModified && ev.ResourceVersion == rv
	})
	// Another change after it, so that a Deleted event of the first one
	// would have been queued before this one is seen.
	rv = patch("both", `{"metadata":{"annotations":{"touched":"yes"}}}`)
	event("the ServiceAccount modified again", func(ev stream.Event) bool {
		return ev.UID == string(both.UID) && ev.Type == stream.EventModified && ev.ResourceVersion == rv
	})
	if got.find(func(ev stream.Event) bool { return ev.UID == string(both.UID) && ev.Type == stream.EventDeleted }) {
		t.Errorf("a ServiceAccount that kept one of purser's labels was reported deleted")
	}
	// Losing the last label: no longer purser's, reported deleted.
	patch("both", `{"metadata":{"labels":{"`+labelDeployable+`":null}}}`)
	event("the ServiceAccount that lost both labels deleted", func(ev stream.Event) bool {
		return ev.UID == string(both.UID) && ev.Type == stream.EventDeleted
	})

	// A CRD installed after the start: its labelled objects count.
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.InstallCRD(t, dyn, "example.purser.io", "v1", "Gadget", "gadgets")
	gadgets := dyn.Resource(schema.GroupVersionResource{Group: "example.purser.io", Version: "v1", Resource: "gadgets"}).Namespace(ns)
	for _, g := range []struct {
		name   string
		labels map[string]any
	}{{"mine", map[string]any{labelDeployable: "d-3"}}, {"theirs", nil}} {
		sandboxtest.Eventually(t, 2*time.Minute, "a Gadget created once its CRD is served", func(ctx context.Context) error {
			_, err := gadgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.purser.io/v1", "kind": "Gadget",
				"metadata": map[string]any{"name": g.name, "labels": g.labels}}}, metav1.CreateOptions{})
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				return err
			}
			return nil
		})
	}
	event("the labelled Gadget published", func(ev stream.Event) bool {
		return ev.Kind == "Gadget" && ev.Name == "mine" && ev.Type == stream.EventAdded
	})
	if got.find(func(ev stream.Event) bool { return ev.Kind == "Gadget" && ev.Name == "theirs" }) {
		t.Errorf("the unlabelled Gadget was published")
	}
}

// count is the number of cached objects of the kind named as in
// heartbeats.
func (a *Agent) count(kind string) int {
	for _, w := range a.watches() {
		if kindKey(w.gvk.GroupVersion().String(), w.gvk.Kind) == kind {
			return w.count()
		}
	}
	return -1
}
