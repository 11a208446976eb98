package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

const runnablesK8s = "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables"

// kubectlLines runs a kubectl that streams (get -w, wait) in the
// background; its output lines arrive on lines.
type kubectlLines struct {
	lines chan string
	done  chan error
	out   *bytes.Buffer
}

func (k *kubectlAt) start(args ...string) *kubectlLines {
	k.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", filepath.Join(k.dir, "cache")}, args...)...)
	c.Env = append(os.Environ(), "HOME="+k.dir)
	l := &kubectlLines{lines: make(chan string, 1000), done: make(chan error, 1), out: &bytes.Buffer{}}
	stdout, err := c.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	c.Stderr = l.out
	if err := c.Start(); err != nil {
		k.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		l.done <- c.Wait()
	}()
	k.t.Cleanup(func() {
		cancel()
		if err := <-l.done; err != nil {
			k.t.Logf("kubectl %v ended: %v", args, err) // killed at the end, or ended by itself
		}
	})
	return l
}

// next waits for a line whose fields match, skipping others.
func (l *kubectlLines) next(t *testing.T, what string, match func(f []string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line := <-l.lines:
			if match(strings.Fields(line)) {
				return
			}
		case <-deadline:
			t.Fatalf("no line of %s in 30s; stderr: %s", what, l.out.String())
		}
	}
}

// exit waits for kubectl to end and returns its output and error.
func (l *kubectlLines) exit(t *testing.T) (string, error) {
	t.Helper()
	var out []string
	for {
		select {
		case line := <-l.lines:
			out = append(out, line)
		case err := <-l.done:
			l.done <- err
			for len(l.lines) > 0 {
				out = append(out, <-l.lines)
			}
			return strings.Join(out, "\n") + l.out.String(), err
		case <-time.After(60 * time.Second):
			t.Fatalf("kubectl did not end in 60s: %s", strings.Join(out, "\n"))
		}
	}
}

func event(typ, name string) func(f []string) bool {
	return func(f []string) bool { return len(f) >= 2 && f[0] == typ && f[1] == name }
}

// TestKubeWatch: the real kubectl watches purser's kinds through /k8s:
// get -w sees a create, an update and a delete as they happen; wait
// --for=jsonpath and --for=delete return when the runnable gets there;
// delete's own wait for the object to go returns.
func TestKubeWatch(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	alice, bob := newKubectlAt(t, h, "alice"), newKubectlAt(t, h, "bob")
	if res := alice.ok("", "api-resources", "--api-group=purser.io", "-o", "wide"); !strings.Contains(res, "create,delete,get,list,patch,update,watch") {
		t.Fatalf("api-resources does not name watch:\n%s", res)
	}
	alice.ok(runnableYAML("team-a", "w1", "sleep 1"), "create", "-f", "-")

	w := bob.start("get", "runnables", "-n", "team-a", "-w", "--output-watch-events")
	w.next(t, "w1 as it is", event("ADDED", "w1"))
	alice.ok(runnableYAML("team-a", "w2", "sleep 1"), "create", "-f", "-")
	w.next(t, "w2 created", event("ADDED", "w2"))
	alice.ok("", "label", "runnable", "w1", "-n", "team-a", "watched=yes")
	w.next(t, "w1 labelled", event("MODIFIED", "w1"))
	alice.ok("", "delete", "runnable", "w1", "-n", "team-a", "--wait=false")
	w.next(t, "w1 cancelled", func(f []string) bool { return event("MODIFIED", "w1")(f) && slices.Contains(f, "Cancelled") })
	// The second delete removes the cancelled runnable; kubectl waits for
	// it to go by a watch of its own.
	alice.ok("", "delete", "runnable", "w1", "-n", "team-a", "--timeout=30s")
	w.next(t, "w1 removed", event("DELETED", "w1"))

	// wait --for=jsonpath and --for=delete, started before the change.
	phase := bob.start("wait", "runnable/w2", "-n", "team-a", "--for=jsonpath={.status.phase}=Cancelled", "--timeout=60s")
	gone := bob.start("wait", "runnable/w2", "-n", "team-a", "--for=delete", "--timeout=60s")
	time.Sleep(500 * time.Millisecond) // both are watching (a wait that finds the state at once would pass anyway)
	alice.ok("", "delete", "runnable", "w2", "-n", "team-a", "--wait=false")
	if out, err := phase.exit(t); err != nil || !strings.Contains(out, "condition met") {
		t.Fatalf("wait --for=jsonpath: %v\n%s", err, out)
	}
	alice.ok("", "delete", "runnable", "w2", "-n", "team-a", "--wait=false")
	if out, err := gone.exit(t); err != nil || !strings.Contains(out, "condition met") && !strings.Contains(out, "deleted") {
		t.Fatalf("wait --for=delete: %v\n%s", err, out)
	}

	// A quota is watched too (admins write it, the namespace reads it).
	admin := newKubectlAt(t, h, "admin")
	qw := bob.start("get", "quotas", "--field-selector=metadata.name=team-a", "-w", "--output-watch-events")
	admin.ok("apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: team-a}\nspec: {limits: {runnables: \"5\"}}\n", "apply", "-f", "-")
	qw.next(t, "the quota set", event("ADDED", "team-a"))
}

// rawWatch opens a watch through /k8s as user and returns its events as
// they come; it ends with the test.
func rawWatch(t *testing.T, h *harness, user, path string) (<-chan metav1.WatchEvent, response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.url+path, http.NoBody)
	req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := response{code: resp.StatusCode, raw: raw}
		_ = json.Unmarshal(raw, &r.body)
		return nil, r
	}
	out := make(chan metav1.WatchEvent, 1000)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev metav1.WatchEvent
			if dec.Decode(&ev) != nil {
				return
			}
			out <- ev
		}
	}()
	return out, response{code: http.StatusOK}
}

// nextEvent waits for an event that is not a BOOKMARK.
func nextEvent(t *testing.T, events <-chan metav1.WatchEvent) (string, map[string]any) {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the watch ended")
			}
			if ev.Type == string(watch.Bookmark) {
				continue
			}
			var obj map[string]any
			_ = json.Unmarshal(ev.Object.Raw, &obj)
			return ev.Type, obj
		case <-time.After(20 * time.Second):
			t.Fatal("no event in 20s")
		}
	}
}

func nameOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}

// TestKubeWatchProtocol: the list's resourceVersion is a position a
// watch resumes from, telling what changed since and nothing before;
// resourceVersions that are not positions are refused, a forgotten one
// with 410; label selectors apply.
func TestKubeWatchProtocol(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			create := func(name string, labels string) {
				t.Helper()
				y := runnableYAML("team-a", name, "true")
				if labels != "" {
					y = strings.Replace(y, "metadata:\n", "metadata:\n  labels: {"+labels+"}\n", 1)
				}
				h.do("alice", http.MethodPost, runnablesK8s, "application/yaml", []byte(y)).want(t, http.StatusCreated)
			}
			create("before", "")
			list := h.get("alice", runnablesK8s).want(t, http.StatusOK)
			rv := list.str("metadata", "resourceVersion")
			if rv == "" || rv == "0" {
				t.Fatalf("the list's resourceVersion is %q", rv)
			}
			create("after", "app: x")
			events, _ := rawWatch(t, h, "alice", runnablesK8s+"?watch=1&resourceVersion="+rv)
			if typ, obj := nextEvent(t, events); typ != "ADDED" || nameOf(obj) != "after" {
				t.Fatalf("from the list's version: %s %s, want ADDED after (and nothing of before)", typ, nameOf(obj))
			}
			// A label selector: only what matches.
			sel, _ := rawWatch(t, h, "alice", runnablesK8s+"?watch=1&labelSelector=app%3Dx")
			if typ, obj := nextEvent(t, sel); typ != "ADDED" || nameOf(obj) != "after" {
				t.Fatalf("labelSelector app=x: %s %s, want ADDED after", typ, nameOf(obj))
			}
			create("later", "app: z")
			create("matching", "app: x")
			if typ, obj := nextEvent(t, sel); typ != "ADDED" || nameOf(obj) != "matching" {
				t.Fatalf("labelSelector app=x after two creates: %s %s, want ADDED matching", typ, nameOf(obj))
			}
			// timeoutSeconds ends the watch; BOOKMARKs come when asked for.
			short, _ := rawWatch(t, h, "alice", runnablesK8s+"?watch=1&timeoutSeconds=1&allowWatchBookmarks=true&resourceVersion="+rv)
			ended := time.After(10 * time.Second)
		drain:
			for {
				select {
				case _, ok := <-short:
					if !ok {
						break drain
					}
				case <-ended:
					t.Fatal("a watch of timeoutSeconds=1 still open after 10s")
				}
			}
			for _, c := range []struct {
				rv   string
				code int
			}{
				{"garbage", http.StatusBadRequest}, {"-5", http.StatusBadRequest}, {"99999999999", http.StatusGone},
			} {
				if _, r := rawWatch(t, h, "alice", runnablesK8s+"?watch=1&resourceVersion="+url.QueryEscape(c.rv)); r.code != c.code || !strings.Contains(string(r.raw), "resourceVersion") {
					t.Errorf("resourceVersion %q: %d %s, want %d naming it", c.rv, r.code, r.raw, c.code)
				}
			}
			// Forgotten changes: 410 Expired, so that informers list again.
			if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
				if _, err := tx.OwnFeed().Number(context.Background(), 1000); err != nil {
					return err
				}
				_, err := tx.OwnFeed().Prune(context.Background(), time.Now().Add(time.Hour))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if _, r := rawWatch(t, h, "alice", runnablesK8s+"?watch=1&resourceVersion="+rv); r.code != http.StatusGone || r.str("reason") != "Expired" {
				t.Errorf("a forgotten resourceVersion: %d %s, want 410 Expired", r.code, r.raw)
			}
		})
	}
}

// informerFront is a proxy before the API that counts the lists, watches
// and 410s of a reflector, and answers watches 429 while blocked (a
// reflector then retries its watch from where it was, rather than list).
type informerFront struct {
	srv     *httptest.Server
	blocked atomic.Bool
	mu      sync.Mutex
	counts  map[string]int
}

func newInformerFront(t *testing.T, h *harness) *informerFront {
	target, _ := url.Parse(h.url)
	f := &informerFront{counts: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusGone {
			f.add("gone")
		}
		return nil
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "get"
		q := r.URL.Query()
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			kind = "watch"
		case strings.HasSuffix(r.URL.Path, "/runnables"):
			kind = "list"
		}
		f.add(kind)
		if kind == "watch" && f.blocked.Load() {
			http.Error(w, "blocked by the test", http.StatusTooManyRequests)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *informerFront) add(kind string) {
	f.mu.Lock()
	f.counts[kind]++
	f.mu.Unlock()
}

func (f *informerFront) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[kind]
}

// listWatchOnly says it does not support WatchList, so that the
// reflector lists then watches.
type listWatchOnly struct{ *cache.ListWatch }

func (listWatchOnly) IsWatchListSemanticsUnSupported() bool { return true }

// TestKubeWatchInformer: client-go's reflector on runnables.purser.io,
// by a list then a watch and by WatchList, holds exactly the runnables
// the REST API lists through creates, updates and removals, and after a
// resourceVersion too old (410) lists again and is in sync.
func TestKubeWatchInformer(t *testing.T) {
	for _, eng := range storetest.Engines() {
		for _, mode := range []string{"ListWatch", "WatchList"} {
			t.Run(eng.Name+"/"+mode, func(t *testing.T) { testKubeWatchInformer(t, newHarness(t, eng), mode) })
		}
	}
}

func testKubeWatchInformer(t *testing.T, h *harness, mode string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	front := newInformerFront(t, h)
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: front.srv.URL + "/k8s", BearerToken: h.tokens["alice"]})
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(schema.GroupVersionResource{Group: "purser.io", Version: "v1alpha1", Resource: "runnables"}).Namespace("team-a")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}
	var lister cache.ListerWatcher = lw
	if mode == "ListWatch" {
		lister = listWatchOnly{lw}
	}
	create := func(name string) {
		t.Helper()
		h.do("alice", http.MethodPost, runnablesK8s, "application/yaml", []byte(runnableYAML("team-a", name, "true"))).want(t, http.StatusCreated)
	}
	remove := func(name string) { // cancel, then remove
		t.Helper()
		for range 2 {
			h.do("alice", http.MethodDelete, "/api/v1/runnables/team-a/"+name, "", nil).want(t, http.StatusOK)
		}
	}
	for i := range 3 {
		create(fmt.Sprint("r", i))
	}
	st := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	r := cache.NewReflectorWithOptions(lister, &unstructured.Unstructured{}, st, cache.ReflectorOptions{Name: "runnables " + mode})
	done := make(chan struct{})
	go func() { defer close(done); r.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	inSync := func(what string) {
		t.Helper()
		sandboxtest.Eventually(t, 20*time.Second, what, func(context.Context) error {
			want := map[string]string{}
			l := h.get("alice", "/api/v1/runnables?namespace=team-a")
			items, _ := l.body["items"].([]any)
			for _, it := range items {
				md := it.(map[string]any)["metadata"].(map[string]any)
				status, _ := it.(map[string]any)["status"].(map[string]any)
				want[md["name"].(string)] = fmt.Sprint(status["phase"])
			}
			got := map[string]string{}
			for _, o := range st.List() {
				u := o.(*unstructured.Unstructured)
				p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
				got[u.GetName()] = p
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("the informer holds %v, the REST API lists %v", got, want)
			}
			return nil
		})
	}
	inSync("the first sync")
	create("r3")
	remove("r0")
	h.do("alice", http.MethodDelete, "/api/v1/runnables/team-a/r1", "", nil).want(t, http.StatusOK) // cancelled
	inSync("a create, a removal and a cancel")

	// Watches held off while changes are made and forgotten: the
	// reflector's next watch resumes from before them and is told 410.
	front.blocked.Store(true)
	front.srv.CloseClientConnections()
	before := front.count("watch")
	sandboxtest.Eventually(t, 20*time.Second, "the reflector trying to watch again", func(context.Context) error {
		if front.count("watch") == before {
			return fmt.Errorf("no watch yet")
		}
		return nil
	})
	remove("r2")
	create("r4")
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.OwnFeed().Number(context.Background(), 1000); err != nil {
			return err
		}
		_, err := tx.OwnFeed().Prune(context.Background(), time.Now().Add(time.Hour))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	relisted := front.count("list") + front.count("watch")
	front.blocked.Store(false)
	inSync("after 410 Gone")
	if front.count("gone") == 0 || front.count("list")+front.count("watch") == relisted {
		t.Errorf("in sync after %d answers 410: want the reflector told 410 and listing again", front.count("gone"))
	}
}
