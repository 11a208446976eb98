package kubeapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/sandbox"
)

const (
	benchNamespace = "k8s-bench"
	benchObjects   = 10_000
	benchShards    = 100
	benchPage      = 500
)

// BenchmarkK8sList lists the same 10,000 ConfigMaps from a kube-apiserver
// and through purser's /k8s, in one run, as `kubectl get --raw` would:
// every page of 500 as JSON, every page as a Table (what kubectl get asks
// for), and a label selector (100 matches). A sandbox cluster gets the
// ConfigMaps; their records go into a fresh SQLite inventory as the agent
// trims them.
func BenchmarkK8sList(b *testing.B) {
	c := env.Clusters(b)[0]
	seed(b, c)
	kubeClient, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	f := newFarm(b, storetest.Engines()[0])
	copyInventory(b, f, c)
	purserClient := f.srv.Client()
	sides := []struct {
		name   string
		client *http.Client
		base   string
		token  string
	}{
		{"kube-apiserver", kubeClient, c.Server(), ""},
		{"purser", purserClient, f.url + "/k8s", f.tokens["admin"]},
	}
	for _, side := range sides {
		// One list untimed first: the database's (and etcd's) pages warm,
		// as on a server that answers lists all day.
		listAll(b, side.client, side.base+"/api/v1/namespaces/"+benchNamespace+"/configmaps", side.token, "application/json", "")
		b.Run(side.name, func(b *testing.B) {
			for _, lc := range []struct {
				name, accept, selector string
				want                   int
			}{
				{"json", "application/json", "", benchObjects},
				{"table", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "", benchObjects},
				{"selector", "application/json", "shard=7", benchObjects / benchShards},
			} {
				b.Run(lc.name, func(b *testing.B) {
					objects := 0
					for b.Loop() {
						// The kube-apiserver's list also holds the
						// namespace's kube-root-ca.crt, a system object
						// purser leaves out.
						n := listAll(b, side.client, side.base+"/api/v1/namespaces/"+benchNamespace+"/configmaps", side.token, lc.accept, lc.selector)
						extra := 0
						if side.name == "kube-apiserver" && lc.selector == "" {
							extra = 1
						}
						if n != lc.want+extra {
							b.Fatalf("%d objects, want %d", n, lc.want)
						}
						objects += n
					}
					b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "objects/s")
				})
			}
		})
	}
}

// listAll follows the pages of a list; it returns how many items or rows
// it read.
func listAll(b *testing.B, client *http.Client, base, token, accept, selector string) int {
	n, cont := 0, ""
	for {
		q := url.Values{"limit": {fmt.Sprint(benchPage)}}
		if selector != "" {
			q.Set("labelSelector", selector)
		}
		if cont != "" {
			q.Set("continue", cont)
		}
		req, _ := http.NewRequestWithContext(b.Context(), "GET", base+"?"+q.Encode(), http.NoBody)
		req.Header.Set("Accept", accept)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v %s", req.URL, resp.StatusCode, err, body)
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
			Rows  []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			b.Fatal(err)
		}
		n += len(page.Items) + len(page.Rows)
		if page.Metadata.Continue == "" {
			return n
		}
		cont = page.Metadata.Continue
	}
}

// seed creates the ConfigMaps that are missing, sixteen at a time.
func seed(b *testing.B, c *sandbox.Cluster) {
	ctx := b.Context()
	if err := c.EnsureNamespace(ctx, benchNamespace); err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: benchNamespace,
					Labels: map[string]string{"shard": fmt.Sprint(i % benchShards), "app": "bench"}},
					Data: map[string]string{"key": "value", "other": "another value"}}
				if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	for i := range benchObjects {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}

// copyInventory writes the bench namespace's ConfigMaps into the farm's
// inventory as the agent publishes them (agent.Trim) and the ingester
// stores them, leaving out kube-root-ca.crt, a system object.
func copyInventory(b *testing.B, f *farm, c *sandbox.Cluster) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps(benchNamespace).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var rows []store.InventoryRow
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		trimmed, _ := agent.Trim(u)
		obj, err := json.Marshal(trimmed)
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, store.InventoryRow{Cluster: "c1", APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name,
			UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Labels: cm.Labels, Health: "Unknown", ObservedAt: time.Now(), Object: obj})
	}
	for start := 0; start < len(rows); start += 500 {
		part := rows[start:min(start+500, len(rows))]
		f.tx(func(tx *store.Tx) error { _, err := tx.Inventory().Upsert(b.Context(), part); return err })
	}
	b.Logf("the inventory holds the %d ConfigMaps", len(rows))
}

// BenchmarkK8sWatches measures what open watches of /k8s cost: with 1,
// then 1,000 watches open on one namespace's ConfigMaps, 20 changes are
// stored 50 ms apart; for each, the time from its commit to its event at
// the last watcher, the feed's database reads, and the API process's CPU
// time per second over the changes (the watchers' client side runs in the
// same process, so the CPU is an upper bound).
func BenchmarkK8sWatches(b *testing.B) {
	for _, c := range []struct {
		n      int
		pushed bool
	}{{1, false}, {1000, false}, {1000, true}} {
		n := c.n
		name := fmt.Sprintf("watches=%d", n)
		if c.pushed {
			name += "/pushed"
		}
		b.Run(name, func(b *testing.B) {
			// Pushed: the feed is woken by the word the ingester says on
			// NATS after each commit, said here after each change is
			// stored; otherwise it polls every 50 ms.
			var streams *stream.Client
			var f *farm
			if c.pushed {
				streams = streamtest.Connect(b, streamtest.Start(b, b.TempDir()).URL)
				f = newFarmWoken(b, storetest.Engines()[0], streams)
			} else {
				f = newFarm(b, storetest.Engines()[0])
			}
			f.put(configMap("c1", "team-a", "seed", nil, nil))
			var list struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			getJSON(b, f, "/k8s/api/v1/namespaces/team-a/configmaps", &list)
			transport := f.srv.Client().Transport.(*http.Transport).Clone()
			transport.MaxConnsPerHost, transport.MaxIdleConnsPerHost = 0, n
			client := &http.Client{Transport: transport}
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			seen := make(chan string, n*64)
			var ready sync.WaitGroup
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			for range n {
				ready.Add(1)
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/k8s/api/v1/namespaces/team-a/configmaps?watch=true&resourceVersion="+list.Metadata.ResourceVersion, http.NoBody)
					req.Header.Set("Authorization", "Bearer "+f.tokens["admin"])
					resp, err := client.Do(req)
					ready.Done()
					if err != nil {
						return
					}
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						var ev struct {
							Object struct {
								Metadata struct {
									Name string `json:"name"`
								} `json:"metadata"`
							} `json:"object"`
						}
						if json.Unmarshal(sc.Bytes(), &ev) == nil {
							seen <- ev.Object.Metadata.Name
						}
					}
				})
			}
			ready.Wait()
			for f.feed.Stats().Subscribers < n {
				time.Sleep(10 * time.Millisecond)
			}
			for b.Loop() {
				polls := f.feed.Stats().Polls
				cpu := cpuTime()
				start := time.Now()
				var lat []time.Duration
				for i := range 20 {
					name := fmt.Sprintf("change-%d-%d", b.N, i)
					t0 := time.Now()
					f.put(configMap("c1", "team-a", name, nil, nil))
					if streams != nil {
						streams.NotifyInventoryChanged()
					}
					for got := 0; got < n; {
						if <-seen == name {
							got++
						}
					}
					lat = append(lat, time.Since(t0))
					time.Sleep(50 * time.Millisecond)
				}
				el := time.Since(start)
				slices.Sort(lat)
				b.ReportMetric(lat[len(lat)/2].Seconds()*1000, "ms-p50-to-last-watcher")
				b.ReportMetric(lat[len(lat)-1].Seconds()*1000, "ms-max-to-last-watcher")
				b.ReportMetric(float64(f.feed.Stats().Polls-polls)/el.Seconds(), "db-reads/s")
				b.ReportMetric((cpuTime()-cpu).Seconds()/el.Seconds()*100, "cpu-%")
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func getJSON(b *testing.B, f *farm, path string, out any) {
	req, _ := http.NewRequestWithContext(b.Context(), "GET", f.url+path, http.NoBody)
	req.Header.Set("Authorization", "Bearer "+f.tokens["admin"])
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}
