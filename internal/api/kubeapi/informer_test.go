package kubeapi_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// clusterKey keys an object of the farm by its cluster, namespace and
// name: what a multi-cluster informer's store must use, since the same
// name lives in several clusters.
func clusterKey(obj any) (string, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetAnnotations()[kubeapi.ClusterAnnotation] + "/" + m.GetNamespace() + "/" + m.GetName(), nil
}

// noWatchList is a ListerWatcher that says it does not support WatchList,
// so that the reflector lists then watches.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestInformer runs client-go's reflector (the informer's engine) against
// /k8s, in its two ways: list then watch, and WatchList (sendInitialEvents,
// the default of client-go 1.35 on), against each cluster's part. Through inserts, updates and
// deletions on two clusters, same names in both, its store always comes
// to hold exactly what the inventory holds; after the deletions a watch
// would resume from were forgotten, it gets 410 and lists again.
func TestInformer(t *testing.T) {
	for _, eng := range storetest.Engines() {
		for _, mode := range []string{"ListWatch", "WatchList"} {
			t.Run(eng.Name+"/"+mode, func(t *testing.T) {
				testInformer(t, eng, mode)
			})
		}
	}
}

func testInformer(t *testing.T, eng storetest.Engine, mode string) {
	f := newFarm(t, eng)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	want := map[string]string{} // key -> the member's resourceVersion
	put := func(o object) {
		want[o.cluster+"/"+o.namespace+"/"+o.name] = f.put(o)
	}
	remove := func(cluster, ns, name string) {
		f.del(cluster, cluster+"-"+ns+"-"+name)
		delete(want, cluster+"/"+ns+"/"+name)
	}
	// Before the informer starts: the same names in both clusters.
	for _, c := range []string{"c1", "c2"} {
		for i := range 3 {
			put(configMap(c, "team-a", fmt.Sprint("cm-", i), map[string]string{"k": "v"}, map[string]string{"app": "x"}))
		}
	}
	// Objects of another kind and a system object are not ConfigMaps of
	// the selection.
	f.put(object{cluster: "c1", apiVersion: "batch/v1", kind: "Job", namespace: "team-a", name: "cm-0"})
	f.put(configMap("c1", "kube-system", "cm-sys", nil, nil))

	// List then watch reads the farm at /k8s into one store keyed by
	// cluster. WatchList keys its initial events by namespace and name in a
	// store of client-go's own (reflector.go, watchList's temporaryStore),
	// which would fold the same name of two clusters into one: a
	// farm-wide WatchList informer runs one reflector per cluster.
	paths := []string{kubeapi.Prefix}
	if mode == "WatchList" {
		paths = []string{kubeapi.PrefixCluster + "c1", kubeapi.PrefixCluster + "c2"}
	}
	var stores []cache.Store
	var running []chan struct{}
	for _, path := range paths {
		cs, err := kubernetes.NewForConfig(f.config("admin", path))
		if err != nil {
			t.Fatal(err)
		}
		lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", "", fields.Everything())
		var lister cache.ListerWatcher = lw
		if mode == "ListWatch" {
			lister = noWatchList{lw}
		}
		st := cache.NewStore(clusterKey)
		stores = append(stores, st)
		r := cache.NewReflectorWithOptions(lister, &corev1.ConfigMap{}, st, cache.ReflectorOptions{Name: "farm-configmaps " + path})
		done := make(chan struct{})
		running = append(running, done)
		go func() { defer close(done); r.RunWithContext(ctx) }()
	}
	defer func() {
		cancel()
		for _, done := range running {
			<-done
		}
	}()

	inSync := func(what string) {
		t.Helper()
		sandboxtest.Eventually(t, 20*time.Second, what, func(context.Context) error {
			got := map[string]string{}
			for _, st := range stores {
				for _, o := range st.List() {
					cm := o.(*corev1.ConfigMap)
					got[cm.Annotations[kubeapi.ClusterAnnotation]+"/"+cm.Namespace+"/"+cm.Name] = cm.Annotations[kubeapi.ClusterResourceVersionAnnotation]
				}
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("the informer holds %v, the inventory %v", sortedPairs(got), sortedPairs(want))
			}
			return nil
		})
	}
	inSync("the first sync")
	lists, watchLists := f.count("list"), f.count("watchlist")
	switch {
	case mode == "WatchList" && (watchLists == 0 || lists != 0):
		t.Fatalf("WatchList: %d watch-lists and %d lists; want the initial events of a watch and no list", watchLists, lists)
	case mode == "ListWatch" && lists == 0:
		t.Fatalf("ListWatch: no list")
	}

	// Changes at different rates on the two clusters.
	put(configMap("c1", "team-a", "cm-0", map[string]string{"k": "v2"}, nil))
	for i := range 5 {
		put(configMap("c2", "team-a", fmt.Sprint("new-", i), nil, nil))
	}
	remove("c2", "team-a", "cm-1")
	put(configMap("c1", "team-b", "cm-0", nil, nil))
	inSync("inserts, updates and a deletion")
	remove("c1", "team-a", "cm-0")
	put(configMap("c2", "team-a", "cm-0", map[string]string{"k": "v3"}, nil))
	inSync("a deletion in one cluster, an update of the same name in the other")

	// A watch resuming from before forgotten deletions is 410 Gone: the
	// reflector lists again. Watches are held off while a deletion is made
	// and forgotten, so that the reflector's next watch starts from before
	// it.
	f.blockWatches.Store(true)
	f.srv.CloseClientConnections()
	before := f.count("watch") + f.count("watchlist")
	sandboxtest.Eventually(t, 20*time.Second, "the reflector trying to watch again", func(context.Context) error {
		if f.count("watch")+f.count("watchlist") == before {
			return fmt.Errorf("no watch yet")
		}
		return nil
	})
	remove("c1", "team-a", "cm-2")
	put(configMap("c1", "team-a", "after-gone", nil, nil))
	f.tx(func(tx *store.Tx) error {
		_, err := tx.Inventory().PruneTombstones(context.Background(), time.Now().Add(time.Hour))
		return err
	})
	relisted := f.count("list") + f.count("watchlist")
	f.blockWatches.Store(false)
	inSync("after 410 Gone")
	if f.count("gone") == 0 || f.count("list")+f.count("watchlist") == relisted {
		t.Errorf("in sync after %d answers 410 and %d lists since: want the reflector sent 410 and listing again",
			f.count("gone"), f.count("list")+f.count("watchlist")-relisted)
	}
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"@"+m[k])
	}
	return out
}
