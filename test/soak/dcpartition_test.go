package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

// TestDCLeaderPartition partitions the DC of the controller's leader:
//
//   - no member cluster outside that DC is ever judged anything but Ready,
//     and no runnable outside it is evicted: the other DCs still reach
//     their clusters, and a cluster is NotReady only when a quorum of DCs
//     cannot reach it;
//   - the cut DC's own cluster is judged NotReady by the others (a quorum)
//     and its work moves;
//   - the cut DC's API refuses writes with 503 and Retry-After, and still
//     answers reads, from its own standby, saying how old they are.
func TestDCLeaderPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the three-DC farm")
	}
	ctx := t.Context()
	f, clusters := startDCFarm(ctx, t, keptDir(t), controllerArgs, agentArgs)
	const ns = "dc-partition"
	for _, c := range clusters {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	// Two long AtLeastOne Jobs on each cluster: the others are cordoned
	// while each pair is placed.
	placed := map[string]string{} // namespace/name -> cluster
	for i, c := range clusters {
		for _, other := range clusters {
			cordon(t, f.API, other, other != c)
		}
		for j := range 2 {
			name := fmt.Sprintf("long-%d-%d", i, j)
			body := runnableBody(&submission{Namespace: ns, Name: name, Consistency: v1alpha1.ConsistencyAtLeastOne})
			pod := body["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)
			pod["metadata"] = map[string]any{"annotations": map[string]any{
				"pod-complete.stage.kwok.x-k8s.io/delay": "1h", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}}
			if code, err := f.API.Do(ctx, http.MethodPost, "/api/v1/runnables", nil, body, nil); code/100 != 2 {
				t.Fatalf("submit %s: %d %v", name, code, err)
			}
			placed[ns+"/"+name] = ""
		}
		sandboxtest.Eventually(t, 3*time.Minute, "the runnables of "+c.Name()+" running", func(ctx context.Context) error {
			for key, on := range placed {
				if on != "" {
					continue
				}
				var r v1alpha1.Runnable
				if code, err := f.API.Do(ctx, http.MethodGet, "/api/v1/runnables/"+key, nil, nil, &r); code != http.StatusOK {
					return callError("get "+key, code, err)
				}
				if r.Status.Phase != v1alpha1.PhaseRunning || r.Status.Cluster != c.Name() {
					return fmt.Errorf("%s is %s on %q", key, r.Status.Phase, r.Status.Cluster)
				}
				placed[key] = r.Status.Cluster
			}
			return nil
		})
	}
	for _, c := range clusters {
		cordon(t, f.API, c, false)
	}

	leader := leaderDC(t, f)
	cut := map[string]bool{}
	for _, c := range clusters {
		cut[c.Name()] = c.Name() == leader.Cluster.Name()
	}
	t.Logf("%s partition %s, the controller leader's DC (placements %v)", stamp(), leader.Name, placed)
	f.Partition(leader)
	defer f.Heal(leader)

	// Watch every cluster's condition from a DC on the majority's side,
	// every half second, until the end of the test.
	var majority *farm.DC
	for _, dc := range f.DCs {
		if dc != leader {
			majority = dc
			break
		}
	}
	var mu sync.Mutex
	var notReady []string
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			for _, c := range clusters {
				var cl v1alpha1.Cluster
				if code, _ := majority.API.Do(wctx, http.MethodGet, "/api/v1/clusters/"+c.Name(), nil, nil, &cl); code != http.StatusOK {
					continue
				}
				if ready := readyOf(cl); !cut[c.Name()] && ready != "True" {
					mu.Lock()
					notReady = append(notReady, fmt.Sprintf("%s %s Ready=%s: %+v", stamp(), c.Name(), ready, cl.Status.Conditions))
					mu.Unlock()
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	defer func() { stopWatch(); wg.Wait() }()

	// The cut DC's API: writes refused with Retry-After, once its guard
	// sees no commit reach the primary; reads answered from its standby.
	sandboxtest.Eventually(t, 2*time.Minute, "writes refused in the cut DC", func(ctx context.Context) error {
		code, header, err := rawCall(ctx, leader, http.MethodPost, "/api/v1/runnables", `{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","metadata":{"namespace":"`+ns+`","name":"refused"},"spec":{"template":{"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`, f.Token)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
			return fmt.Errorf("a write in the cut DC: %d, Retry-After %q", code, header.Get("Retry-After"))
		}
		return nil
	})
	sandboxtest.Eventually(t, 2*time.Minute, "reads from the standby in the cut DC", func(ctx context.Context) error {
		code, header, err := rawCall(ctx, leader, http.MethodGet, "/api/v1/runnables?namespace="+ns, "", f.Token)
		if err != nil {
			return err
		}
		if code != http.StatusOK || header.Get(server.HeaderDataSource) != "standby" {
			return fmt.Errorf("a read in the cut DC: %d, %s %q, %s %q", code, server.HeaderDataSource, header.Get(server.HeaderDataSource),
				server.HeaderDataAsOf, header.Get(server.HeaderDataAsOf))
		}
		t.Logf("a read in the cut DC: from its %s, data as of %q", header.Get(server.HeaderDataSource), header.Get(server.HeaderDataAsOf))
		return nil
	})

	// The majority judges the cut DC's cluster NotReady and moves its
	// work; nothing else moves.
	sandboxtest.Eventually(t, 3*time.Minute, "the cut DC's runnables moved", func(ctx context.Context) error {
		for name, was := range placed {
			if !cut[was] {
				continue
			}
			var r v1alpha1.Runnable
			if code, err := majority.API.Do(ctx, http.MethodGet, "/api/v1/runnables/"+name, nil, nil, &r); code != http.StatusOK {
				return callError("get "+name, code, err)
			}
			if r.Status.Cluster == was || r.Status.Phase != v1alpha1.PhaseRunning {
				return fmt.Errorf("%s: %s on %q", name, r.Status.Phase, r.Status.Cluster)
			}
		}
		return nil
	})
	stopWatch()
	wg.Wait()
	mu.Lock()
	for _, line := range notReady {
		t.Errorf("a cluster outside the cut DC was judged not Ready: %s", line)
	}
	mu.Unlock()
	var evicted []string
	q := url.Values{"namespace": {ns}, "kind": {v1alpha1.KindRunnable}, "action": {"evict"}}
	if err := list(ctx, majority.API, "/api/v1/history", q, func(e server.HistoryEntry) {
		name := strings.TrimPrefix(e.Object, v1alpha1.KindRunnable+"/")
		if on, ok := placed[name]; ok && !cut[on] {
			evicted = append(evicted, name+": "+e.Summary)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range evicted {
		t.Errorf("a runnable outside the cut DC was evicted: %s", e)
	}
}

// cordon taints a cluster NoSchedule (on) or removes its taints, keeping
// its labels and kubeconfig.
func cordon(t *testing.T, api *farm.Client, c *sandbox.Cluster, on bool) {
	t.Helper()
	spec := map[string]any{}
	if on {
		spec["taints"] = []map[string]string{{"key": "test-cordon", "effect": "NoSchedule"}}
	}
	labels := map[string]string{}
	for k, v := range c.Labels() {
		labels[k] = v
	}
	body := map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindCluster,
		"metadata": map[string]any{"name": c.Name(), "labels": labels}, "spec": spec}
	if code, err := api.Do(t.Context(), http.MethodPut, "/api/v1/clusters/"+c.Name(), nil, body, nil); code != http.StatusOK {
		t.Fatalf("cordon %s %v: %d %v", c.Name(), on, code, err)
	}
}

// leaderDC is the DC whose controller holds the leader lease.
func leaderDC(t *testing.T, f *farm.DCFarm) *farm.DC {
	t.Helper()
	var holder string
	sandboxtest.Eventually(t, time.Minute, "the controller lease's holder", func(ctx context.Context) error {
		db, err := f.DB(f.DCs[0])
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }() // one query, done
		return db.QueryRowContext(ctx, `SELECT holder FROM leases WHERE name = 'controller' AND expires_at > now()`).Scan(&holder)
	})
	for _, dc := range f.DCs {
		if holder == "controller-"+dc.Name {
			return dc
		}
	}
	t.Fatalf("the controller lease is held by %q, no DC's controller", holder)
	return nil
}

func readyOf(c v1alpha1.Cluster) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1alpha1.ConditionReady {
			return string(cond.Status)
		}
	}
	return ""
}

// rawCall sends one request to dc's API from inside the DC and returns
// the status and headers.
func rawCall(ctx context.Context, dc *farm.DC, method, path, body, token string) (int, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, dc.APIURL()+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	resp, err := dc.HTTP().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

// callError describes a call of the API that did not answer 2xx.
func callError(what string, code int, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %d: %w", what, code, err)
	}
	return fmt.Errorf("%s: %d", what, code)
}
