package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// sandboxes holds the one cluster of BenchmarkInventoryList; nothing starts
// unless that benchmark runs.
var sandboxes = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(sandboxes.Run(m)) }

// The objects of BenchmarkInventoryList: benchObjects ConfigMaps in one
// namespace, labelled shard=0..benchShards-1, so that the selector
// shard=7 matches 1 % of them.
const (
	benchNamespace = "inventory-bench"
	benchObjects   = 10_000
	benchShards    = 100
	benchSelector  = "shard=7"
	benchPage      = 500
)

// BenchmarkInventoryList lists the same ConfigMaps from a kube-apiserver
// and from purser's inventory API, in one run. A sandbox cluster gets
// 10,000 ConfigMaps; the real agent and ingester bring them into a fresh
// database of each engine (and must agree with the kube-apiserver on
// every uid and resourceVersion before anything is timed); then each side
// answers, over HTTP with JSON:
//
//   - first-page: one page of 500 (limit=500), what kubectl get asks for
//     first;
//   - all: every page of 500, following the continue token;
//   - selector: labelSelector=shard=7 (100 matches), limit=500.
//
// The client reads every answer whole and decodes it as far as the
// continue token, the same for both sides. The setup, a few minutes, is
// here rather than in TestMain so that only -bench pays for it.
func BenchmarkInventoryList(b *testing.B) {
	c := sandboxes.Clusters(b)[0]
	seedConfigMaps(b, c)
	kube := kubeLister(b, c)
	// The bench's objects and the namespace's kube-root-ca.crt.
	want := kube.versions(b)
	b.Run("kube-apiserver", func(b *testing.B) { kube.bench(b, len(want)) })
	for _, eng := range storetest.Engines() {
		b.Run("purser-"+eng.Name, func(b *testing.B) {
			h := newHarness(b, eng)
			start := time.Now()
			ingest(b, h, c, want)
			b.Logf("%s: inventory holds the %d objects after %s", eng.Name, len(want), time.Since(start).Round(time.Millisecond))
			analyzeInventory(b, h, eng.Name)
			purserLister(h).bench(b, len(want))
		})
	}
}

// lister lists the bench namespace's ConfigMaps from one side.
type lister struct {
	client *http.Client
	header http.Header
	// url is the address of a page: selector and continue token may be
	// empty.
	url func(selector, cont string) string
}

func kubeLister(b *testing.B, c *sandbox.Cluster) *lister {
	client, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	base := c.Server() + "/api/v1/namespaces/" + benchNamespace + "/configmaps"
	return &lister{
		client: client,
		header: http.Header{"Accept": {"application/json"}},
		url: func(selector, cont string) string {
			return base + "?" + pageQuery(selector, cont).Encode()
		},
	}
}

func purserLister(h *harness) *lister {
	return &lister{
		client: http.DefaultClient,
		header: http.Header{"Authorization": {"Bearer " + h.tokens["admin"]}},
		url: func(selector, cont string) string {
			q := pageQuery(selector, cont)
			q.Set("kind", "ConfigMap")
			q.Set("namespace", benchNamespace)
			return h.url + "/api/v1/inventory?" + q.Encode()
		},
	}
}

func pageQuery(selector, cont string) url.Values {
	q := url.Values{"limit": {fmt.Sprint(benchPage)}}
	if selector != "" {
		q.Set("labelSelector", selector)
	}
	if cont != "" {
		q.Set("continue", cont)
	}
	return q
}

// page is what both sides answer, as far as the client reads it: the
// kube-apiserver puts the continue token under metadata, purser at the
// top.
type page struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Continue string            `json:"continue"`
	Items    []json.RawMessage `json:"items"`
	size     int               // bytes of the answer
}

func (l *lister) get(ctx context.Context, address string) (*page, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", address, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header = l.header.Clone()
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", address, resp.StatusCode, body)
	}
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("GET %s: %w", address, err)
	}
	if p.Continue == "" {
		p.Continue = p.Metadata.Continue
	}
	p.size = len(body)
	return &p, nil
}

// list fetches pages until there is no continue token, or only the
// first; it returns the items and the bytes received.
func (l *lister) list(ctx context.Context, selector string, firstOnly bool) ([]json.RawMessage, int, error) {
	var items []json.RawMessage
	size := 0
	cont := ""
	for {
		p, err := l.get(ctx, l.url(selector, cont))
		if err != nil {
			return nil, 0, err
		}
		items = append(items, p.Items...)
		size += p.size
		if firstOnly || p.Continue == "" {
			return items, size, nil
		}
		cont = p.Continue
	}
}

// bench runs the three listings as sub-benchmarks; total is the number of
// objects in the namespace.
func (l *lister) bench(b *testing.B, total int) {
	for _, lc := range []struct {
		name      string
		selector  string
		firstOnly bool
		want      int
	}{
		{"first-page", "", true, benchPage},
		{"all", "", false, total},
		{"selector", benchSelector, false, benchObjects / benchShards},
	} {
		b.Run(lc.name, func(b *testing.B) {
			ctx := b.Context()
			objects, size := 0, 0
			for b.Loop() {
				items, n, err := l.list(ctx, lc.selector, lc.firstOnly)
				if err != nil {
					b.Fatal(err)
				}
				if len(items) != lc.want {
					b.Fatalf("%d objects, want %d", len(items), lc.want)
				}
				objects += len(items)
				size += n
			}
			b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "objects/s")
			b.ReportMetric(float64(size)/float64(objects), "B/object")
		})
	}
}

// versions returns uid -> resourceVersion of every listed object.
func (l *lister) versions(b *testing.B) map[string]string {
	items, _, err := l.list(b.Context(), "", false)
	if err != nil {
		b.Fatal(err)
	}
	out := make(map[string]string, len(items))
	for _, raw := range items {
		var obj struct {
			Metadata struct {
				UID             string `json:"uid"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			UID             string `json:"uid"`
			ResourceVersion string `json:"resourceVersion"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			b.Fatal(err)
		}
		if obj.UID == "" {
			obj.UID, obj.ResourceVersion = obj.Metadata.UID, obj.Metadata.ResourceVersion
		}
		out[obj.UID] = obj.ResourceVersion
	}
	return out
}

// seedConfigMaps creates the bench namespace's ConfigMaps, those that are
// missing, sixteen at a time.
func seedConfigMaps(b *testing.B, c *sandbox.Cluster) {
	ctx := b.Context()
	if err := c.EnsureNamespace(ctx, benchNamespace); err != nil {
		b.Fatal(err)
	}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 5000 // the sandbox's own limit is for tests; this is setup
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	existing, err := kc.CoreV1().ConfigMaps(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range existing.Items {
		have[cm.Name] = true
	}
	start := time.Now()
	names := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range names {
				_, err := kc.CoreV1().ConfigMaps(benchNamespace).Create(ctx, benchConfigMap(i), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
					return
				}
			}
		})
	}
	created := 0
	var failed error
	for i := range benchObjects {
		if have[benchName(i)] {
			continue
		}
		select {
		case names <- i:
			created++
			continue
		case failed = <-errs:
		}
		break
	}
	close(names)
	wg.Wait()
	if failed == nil && len(errs) > 0 {
		failed = <-errs
	}
	if failed != nil {
		b.Fatal(failed)
	}
	if created > 0 {
		b.Logf("created %d ConfigMaps in %s", created, time.Since(start).Round(time.Millisecond))
	}
}

func benchName(i int) string { return fmt.Sprintf("app-config-%05d", i) }

// benchConfigMap is a ConfigMap of ordinary size (about 600 bytes as
// JSON).
func benchConfigMap(i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: benchName(i),
			Labels: map[string]string{
				"app.kubernetes.io/name": "inventory-bench", "app.kubernetes.io/part-of": "purser-benchmarks",
				"shard": fmt.Sprint(i % benchShards),
			},
		},
		Data: map[string]string{
			"LOG_LEVEL": "info",
			"REGION":    fmt.Sprintf("dc-%d", i%4),
			"config.yaml": fmt.Sprintf("server:\n  port: %d\n  timeout: 30s\nfeatures:\n  - reporting\n  - export\n", 8000+i%1000) +
				strings.Repeat("# padding to an ordinary size\n", 5),
		},
	}
}

// ingest runs the real agent (on the cluster's ConfigMaps) and ingester
// into h's database until the inventory holds exactly want (uid ->
// resourceVersion) for the bench namespace, then stops both, so that
// nothing but the lists runs while they are timed.
func ingest(b *testing.B, h *harness, c *sandbox.Cluster, want map[string]string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	b.Cleanup(stop)
	quiet := slog.New(slog.DiscardHandler)
	in, err := inventory.New(inventory.Config{Store: h.store, Stream: streamtest.Connect(b, h.nats.URL), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Cluster: c.Name(), RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(b, h.nats.URL),
		Kinds: []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, Logger: quiet,
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range []func(context.Context) error{in.Run, a.Run} {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("agent or ingester: %v", err)
			}
		})
	}
	sandboxtest.Eventually(b, 5*time.Minute, "inventory holds the kube-apiserver's objects", func(ctx context.Context) error {
		got, err := inventoryVersions(ctx, h.store)
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d records, want %d", len(got), len(want))
		}
		for uid, rv := range want {
			if got[uid] != rv {
				return fmt.Errorf("record %s at %q, want resourceVersion %s", uid, got[uid], rv)
			}
		}
		return nil
	})
	stop()
}

// inventoryVersions reads uid -> resourceVersion of the bench namespace's
// ConfigMap records.
func inventoryVersions(ctx context.Context, s *store.Store) (map[string]string, error) {
	out := map[string]string{}
	f := store.InventoryFilter{Kind: "ConfigMap", Namespace: benchNamespace, WithoutObject: true, Limit: 1000}
	for {
		var rows []store.InventoryRow
		var next string
		err := s.Read(ctx, func(tx *store.Tx) (err error) {
			rows, next, err = tx.Inventory().List(ctx, f)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.UID] = r.ResourceVersion
		}
		if next == "" {
			return out, nil
		}
		f.Continue = next
	}
}
