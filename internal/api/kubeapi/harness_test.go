package kubeapi_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// env builds kubectl at the pinned version for the tests that run it; no
// cluster is started unless a test asks.
var env = sandboxtest.New(sandboxtest.Config{})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// farm is the API over a real database of one engine, whose inventory the
// test writes as the ingester would.
type farm struct {
	t     testing.TB
	store *store.Store
	url   string
	srv   *httptest.Server
	// handler is the API with the test's counting, which srv serves over TLS.
	handler http.Handler
	tokens  map[string]string
	feed    *feed.Feed[store.InventoryChange]
	clock   atomic.Int64 // member clusters' resourceVersions, one counter for both

	// requests counts what reached the API, by kind of request.
	mu       sync.Mutex
	requests map[string]int
	// blockWatches answers watches 429 while set.
	blockWatches atomic.Bool
}

// The users: admin reads everything; bob views team-a only.
func newFarm(t testing.TB, eng storetest.Engine) *farm { return newFarmWoken(t, eng, nil) }

// newFarmWoken is a farm whose feed, when changes is set, is woken by
// it, as the api's is by the ingester's word on NATS, and polls at its
// default period besides.
func newFarmWoken(t testing.TB, eng storetest.Engine, changes feed.Changes) *farm {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, eng.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &farm{t: t, store: st, tokens: map[string]string{}, requests: map[string]int{}}
	var tf auth.TokensFile
	for _, u := range []string{"admin", "bob"} {
		tok := auth.NewToken()
		f.tokens[u] = tok
		tf.Tokens = append(tf.Tokens, auth.TokenEntry{User: u, SHA256: auth.HashToken(tok)})
	}
	authn, err := auth.NewAuthenticator(tf)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
		"team-a": {Roles: map[policy.Role][]string{policy.RoleViewer: {"bob"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.feed = feed.New(feed.Config{Store: st, Poll: 50 * time.Millisecond})
	if changes != nil {
		f.feed = feed.New(feed.Config{Store: st, Changes: changes})
	}
	api := kubeapi.New(kubeapi.Config{
		Store: st, Feed: f.feed, Policy: func() *policy.Policy { return pol },
		Authenticate: func(r *http.Request) (policy.User, bool) {
			return authn.Authenticate(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		},
		Freshness: func(_ policy.User, a store.AgentFreshness, now time.Time) v1alpha1.Freshness {
			return v1alpha1.JudgeFreshness(&v1alpha1.AgentStatus{LastHeartbeat: a.LastHeartbeat, CurrentUntil: a.LastHeartbeat}, now)
		},
		BookmarkInterval: 200 * time.Millisecond,
		// BenchmarkK8sWatches holds 1,000 watches as one user; the cap
		// itself is the hostile-tenant suite's to test.
		WatchesPerUser: 1000,
	})
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kind := "get"
		switch {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			kind = "watchlist"
		case q.Get("watch") == "true":
			kind = "watch"
		case r.Method == http.MethodGet && !strings.Contains(r.URL.Path, "/namespaces/") && strings.Count(r.URL.Path, "/") >= 3:
			kind = "list"
		}
		f.mu.Lock()
		f.requests[kind]++
		f.mu.Unlock()
		if strings.HasPrefix(kind, "watch") && f.blockWatches.Load() {
			// 429 makes a reflector retry its watch from where it was,
			// rather than list again.
			http.Error(w, "blocked by the test", http.StatusTooManyRequests)
			return
		}
		rec := &recorder{ResponseWriter: w}
		api.ServeHTTP(rec, r)
		if rec.code == http.StatusGone {
			f.mu.Lock()
			f.requests["gone"]++
			f.mu.Unlock()
		}
	})
	f.srv = httptest.NewTLSServer(f.handler)
	t.Cleanup(f.srv.Close)
	f.url = f.srv.URL
	for _, c := range []string{"c1", "c2"} {
		f.tx(func(tx *store.Tx) error { return tx.Clusters().Create(ctx, &store.Cluster{Name: c}) })
	}
	f.heartbeat("c1", time.Now())
	f.heartbeat("c2", time.Now())
	return f
}

// caPEM is the certificate of the test server: kubectl sends credentials
// only over TLS (client-go's clientcmd, DirectClientConfig.ClientConfig).
func (f *farm) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
}

func (f *farm) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[kind]
}

func (f *farm) tx(fn func(tx *store.Tx) error) {
	f.t.Helper()
	if err := f.store.Tx(context.Background(), fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *farm) heartbeat(cluster string, at time.Time) {
	f.t.Helper()
	f.tx(func(tx *store.Tx) error {
		return tx.Agents().RecordHeartbeat(context.Background(), cluster, at, []byte(`{"connected":true,"synced":true}`), true)
	})
}

// config is a client-go configuration for user at path (under the
// server's URL: /k8s or /k8s/clusters/NAME).
func (f *farm) config(user, path string) *rest.Config {
	return &rest.Config{Host: f.url + path, BearerToken: f.tokens[user], QPS: 1000, Burst: 1000,
		TLSClientConfig: rest.TLSClientConfig{CAData: f.caPEM()}}
}

// object is one member-cluster object as the agent reports it.
type object struct {
	cluster, apiVersion, kind, namespace, name, uid string
	labels                                          map[string]string
	body                                            map[string]any // fields besides apiVersion, kind and metadata
}

// put writes o as the ingester would, at the next resourceVersion of its
// cluster; it returns that version.
func (f *farm) put(o object) string {
	f.t.Helper()
	rv := fmt.Sprint(f.clock.Add(1))
	if o.uid == "" {
		o.uid = o.cluster + "-" + o.namespace + "-" + o.name
		if o.kind != "ConfigMap" {
			o.uid += "-" + o.kind
		}
	}
	md := map[string]any{"name": o.name, "uid": o.uid, "resourceVersion": rv, "creationTimestamp": "2026-12-01T10:00:00Z"}
	if o.namespace != "" {
		md["namespace"] = o.namespace
	}
	if len(o.labels) > 0 {
		md["labels"] = o.labels
	}
	doc := map[string]any{"apiVersion": o.apiVersion, "kind": o.kind, "metadata": md}
	for k, v := range o.body {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		f.t.Fatal(err)
	}
	f.tx(func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(context.Background(), []store.InventoryRow{{Cluster: o.cluster, APIVersion: o.apiVersion,
			Kind: o.kind, Namespace: o.namespace, Name: o.name, UID: o.uid, ResourceVersion: rv, Labels: o.labels,
			Health: "Unknown", ObservedAt: time.Now(), Object: b}})
		return err
	})
	return rv
}

// del removes the object of uid as a deletion event would.
func (f *farm) del(cluster, uid string) {
	f.t.Helper()
	rv := fmt.Sprint(f.clock.Add(1))
	f.tx(func(tx *store.Tx) error {
		_, err := tx.Inventory().Delete(context.Background(), []store.InventoryTombstone{{Cluster: cluster, UID: uid, ResourceVersion: rv, DeletedAt: time.Now()}})
		return err
	})
}

func configMap(cluster, ns, name string, data map[string]string, labels map[string]string) object {
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	return object{cluster: cluster, apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: name, labels: labels, body: map[string]any{"data": d}}
}

type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Flush() { r.ResponseWriter.(http.Flusher).Flush() }

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
