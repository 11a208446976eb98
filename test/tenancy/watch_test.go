package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchOwn opens a watch of purser's kinds through /k8s as user: the events as they come
// (closed when it ends), or the refusal.
func (f *farm) watchOwn(t *testing.T, user, path string) (<-chan metav1.WatchEvent, answer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+path, http.NoBody)
	req.Header.Set("Authorization", "Bearer "+f.tokens[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{code: resp.StatusCode, header: resp.Header, raw: raw}
		_ = json.Unmarshal(raw, &a.body)
		return nil, a
	}
	out := make(chan metav1.WatchEvent, 100)
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
	return out, answer{code: http.StatusOK}
}

// namesUntil reads events until one names want, and returns the
// namespace/name of every object told before it, want's included.
func namesUntil(t *testing.T, events <-chan metav1.WatchEvent, want string) []string {
	t.Helper()
	var seen []string
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the watch ended before %s; saw %v", want, seen)
			}
			if ev.Type == "BOOKMARK" {
				continue
			}
			var obj struct {
				Metadata struct{ Namespace, Name string } `json:"metadata"`
			}
			_ = json.Unmarshal(ev.Object.Raw, &obj)
			key := strings.TrimPrefix(obj.Metadata.Namespace+"/"+obj.Metadata.Name, "/")
			seen = append(seen, ev.Type+" "+key)
			if key == want {
				return seen
			}
		case <-deadline:
			t.Fatalf("no event of %s in %s; saw %v", want, wait, seen)
		}
	}
}

// testK8sWatch: watching purser's kinds through /k8s shows a tenant only
// the namespaces it may read. Mallory's watch of the victim's namespace,
// and her watch of runnables in every namespace, are refused as their
// lists are; her watch of her own namespace, open while the victim
// creates, removes and changes, tells her own objects only; her watch of
// every quota tells only her namespace's; resourceVersions that are not
// positions of the sequence are refused with a 4xx naming them, and
// change nothing.
func testK8sWatch(t *testing.T, f *farm) {
	for _, p := range []string{
		k8s(f.victim, "runnables", "") + "?watch=1",
		k8s(f.victim, "deployables", "") + "?watch=1&resourceVersion=0",
		k8s(f.victim, "runnables", "k8s-watched") + "?watch=1",
		k8s("", "runnables", "") + "?watch=1",
		k8s("", "deployables", "") + "?watch=1&allowWatchBookmarks=true",
		k8s("", "runnables", "") + "?watch=1&fieldSelector=metadata.namespace%3D" + f.own,
	} {
		f.refused("mallory's watch "+p, http.StatusForbidden, func() answer {
			_, a := f.watchOwn(t, "mallory", p)
			return a
		})
	}

	// Her own namespace, across every namespace's changes: the victim's
	// come first in the sequence, so a leak would show before hers.
	own, a := f.watchOwn(t, "mallory", k8s(f.own, "runnables", "")+"?watch=1&allowWatchBookmarks=true")
	a.want(t, http.StatusOK)
	quotas, a := f.watchOwn(t, "mallory", k8s("", "quotas", "")+"?watch=1")
	a.want(t, http.StatusOK)
	f.yaml("victor", "POST", "/api/v1/runnables", runnable(f.victim, "k8s-watched", job)).want(t, http.StatusAccepted)
	f.do("victor", "DELETE", "/api/v1/runnables/"+f.victim+"/k8s-watched", nil).want(t, http.StatusOK)
	// Removed once its copy is gone, if the submitter placed it first.
	eventually(t, "the victim's runnable removed", func() error {
		if a := f.do("victor", "DELETE", "/api/v1/runnables/"+f.victim+"/k8s-watched", nil); a.code != http.StatusOK {
			return fmt.Errorf("%d %s", a.code, a.raw)
		}
		return nil
	})
	f.yaml("admin", "PUT", "/api/v1/quotas/"+f.victim, "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: "+f.victim+"}\nspec: {limits: {runnables: \"1000\"}}\n").want(t, http.StatusCreated)
	f.do("admin", "DELETE", "/api/v1/quotas/"+f.victim, nil).want(t, http.StatusOK)
	f.yaml("admin", "PUT", "/api/v1/quotas/"+f.own, "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: "+f.own+"}\nspec: {limits: {runnables: \"1000\"}}\n").want(t, http.StatusCreated)
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "k8s-watch-mine", job)).want(t, http.StatusAccepted)
	for _, c := range []struct {
		events <-chan metav1.WatchEvent
		want   string
	}{{own, f.own + "/k8s-watch-mine"}, {quotas, f.own}} {
		for _, seen := range namesUntil(t, c.events, c.want) {
			if strings.Contains(seen, f.victim) {
				t.Errorf("mallory's watch told her of the victim's %s", seen)
			}
		}
	}
	f.do("admin", "DELETE", "/api/v1/quotas/"+f.own, nil).want(t, http.StatusOK)

	for _, c := range []struct {
		rv   string
		code int
	}{
		{"garbage", http.StatusBadRequest}, {"-1", http.StatusBadRequest}, {"1e9", http.StatusBadRequest},
		{"99999999999999", http.StatusGone}, {"9223372036854775807", http.StatusGone}, {"99999999999999999999", http.StatusBadRequest},
	} {
		a := f.refused("a watch from resourceVersion "+c.rv, c.code, func() answer {
			_, a := f.watchOwn(t, "mallory", k8s(f.own, "runnables", "")+"?watch=1&resourceVersion="+url.QueryEscape(c.rv))
			return a
		})
		if !strings.Contains(a.str("message"), "resourceVersion") {
			t.Errorf("resourceVersion %q refused without naming it: %s", c.rv, a.raw)
		}
	}
}
