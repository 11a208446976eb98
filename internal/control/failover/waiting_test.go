package failover_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/hub/store"
)

// An AtMostOne Job on a cluster purser cannot reach stays there until
// purser knows its copy stopped. What its status says must be what purser
// knows, in each of the three ways a cluster goes dark, and must be
// rewritten when the situation ends.
func TestWaitingSaysWhatIsTrue(t *testing.T) {
	t.Run("kube-apiserver dead, agent alive", func(t *testing.T) {
		a := env.Clusters(t)[0]
		b := env.Dedicated(t, false)
		f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: a}, {name: "b", sandbox: b}})
		// It tolerates the not-ready key, which a restarted kube-apiserver
		// earns while its post-start hooks run: on a busy machine they may
		// outlast this farm's 2 s NoExecute grace, and the case is the
		// unreachable one.
		f.startOn("b", strings.Replace(fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne),
			"    clusterAffinity: {clusterNames: [a, b]}\n",
			"    clusterAffinity: {clusterNames: [a, b]}\n    clusterTolerations: [{key: "+v1alpha1.TaintNotReady+", operator: Exists}]\n", 1))

		b.StopAPIServer()
		// purser's probes may find the API server gone before the agent's
		// heartbeat says it lost it too: until then the message can only
		// say the copy may still run, and is rewritten when the agent's
		// word arrives.
		r := f.waitFor("report", "waiting for a confirmation, knowing the agent cannot reach its API server", func(r *v1alpha1.Runnable) bool {
			return r.Status.Waiting == v1alpha1.WaitingUnconfirmed && strings.Contains(r.Status.Message, "cannot reach that API server either")
		})
		for _, want := range []string{"its agent is alive",
			"purser failover runnable report -n " + f.ns + " --confirm-stopped"} {
			if !strings.Contains(r.Status.Message, want) {
				t.Errorf("message %q does not say %q", r.Status.Message, want)
			}
		}
		f.holdsPastFencing(r, "b")

		if err := b.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		r = f.waitFor("report", "no longer waiting", func(r *v1alpha1.Runnable) bool { return r.Status.Waiting == "" })
		if !strings.Contains(r.Status.Message, "cluster b answers again") || r.Status.Cluster != "b" || len(r.Status.Attempts) != 1 {
			t.Errorf("after b came back: cluster %s, %d attempts, message %q", r.Status.Cluster, len(r.Status.Attempts), r.Status.Message)
		}
	})

	t.Run("cut off from purser, agent alive, then confirmed stopped", func(t *testing.T) {
		cs := env.Clusters(t)
		apiProxy := newProxy(t, cs[1].APIServerAddr())
		f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]},
			{name: "b", sandbox: cs[1], apiServer: "https://" + apiProxy.Addr()}})
		f.startOn("b", fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne))

		apiProxy.Cut()
		r := f.waitFor("report", "waiting for a confirmation", func(r *v1alpha1.Runnable) bool {
			return r.Status.Waiting == v1alpha1.WaitingUnconfirmed
		})
		if !strings.Contains(r.Status.Message, "while it still reaches that API server the copy keeps running") {
			t.Errorf("message %q does not say the copy keeps running", r.Status.Message)
		}
		f.holdsPastFencing(r, "b")

		f.do(http.MethodPost, "/api/v1/runnables/"+f.ns+"/report/failover?confirmStopped=true", nil, nil)
		r = f.waitFor("report", "running on a", func(r *v1alpha1.Runnable) bool {
			return r.Status.Cluster == "a" && r.Status.Phase == v1alpha1.PhaseRunning
		})
		first := r.Status.Attempts[0]
		if first.Cluster != "b" || first.Result != attempt.ResultEvicted || first.Cleanup != store.CleanupPending ||
			!strings.Contains(first.Message, "admin confirmed") {
			t.Errorf("attempt 1 after the confirmation: %+v", first)
		}
		if r.Status.ConfirmedStopped != nil || r.Status.Waiting != "" {
			t.Errorf("the confirmation outlived its attempt: %+v, waiting %q", r.Status.ConfirmedStopped, r.Status.Waiting)
		}
		h := f.history("report")
		if i := slices.Index(h, "confirm-stopped"); i < 0 || !slices.Contains(h[i:], "evict") {
			t.Errorf("history %v has no confirm-stopped followed by the eviction", h)
		}
		// b answers again: the copy nobody could stop is removed.
		if err := apiProxy.Restore(); err != nil {
			t.Fatal(err)
		}
		f.waitFor("report", "b's old copy removed", func(r *v1alpha1.Runnable) bool {
			return r.Status.Attempts[0].Cleanup == store.CleanupDone
		})
		if n := len(f.objects("b", jobsGVR)); n != 0 {
			t.Errorf("%d Jobs left on b", n)
		}
	})

	t.Run("agent and kube-apiserver cut off", func(t *testing.T) {
		cs := env.Clusters(t)
		apiProxy := newProxy(t, cs[1].APIServerAddr())
		f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}})
		nats, err := url.Parse(f.nats.URL)
		if err != nil {
			t.Fatal(err)
		}
		natsProxy := newProxy(t, nats.Host)
		f.register(cluster{name: "b", sandbox: cs[1], apiServer: "https://" + apiProxy.Addr(), natsURL: "nats://" + natsProxy.Addr()}, testPeriods)
		f.startOn("b", fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne))

		apiProxy.Cut()
		natsProxy.Cut()
		r := f.waitFor("report", "waiting for fencing", func(r *v1alpha1.Runnable) bool {
			return r.Status.Waiting == v1alpha1.WaitingFencing
		})
		if !strings.Contains(r.Status.Message, "an agent cut off from purser suspends its copy when its lease of") ||
			!strings.Contains(r.Status.Message, "moves at ") {
			t.Errorf("message %q does not say when the runnable moves", r.Status.Message)
		}
		waitingSince := r.Status.Message
		r = f.waitFor("report", "running on a", func(r *v1alpha1.Runnable) bool {
			if r.Status.Waiting == v1alpha1.WaitingFencing && r.Status.Message != waitingSince {
				t.Fatalf("the promised time moved: %q, then %q", waitingSince, r.Status.Message)
			}
			return r.Status.Cluster == "a" && r.Status.Phase == v1alpha1.PhaseRunning
		})
		if first := r.Status.Attempts[0]; first.Reason != failover.ReasonClusterUnreachable {
			t.Errorf("attempt 1: %+v", first)
		}
	})
}

// holdsPastFencing waits until the cluster's agent has been heard from
// for longer than its lease and margin since the runnable started waiting
// (by then a controller that trusted fencing would have moved it), and
// checks that the runnable is still on cluster, saying the same.
func (f *farm) holdsPastFencing(waiting *v1alpha1.Runnable, cluster string) {
	f.t.Helper()
	start := time.Now()
	f.waitCluster(cluster, "heard from past the lease and margin", func(c *v1alpha1.Cluster) bool {
		return c.Status.Agent != nil && c.Status.Agent.LastHeartbeat != nil &&
			c.Status.Agent.LastHeartbeat.After(start.Add(agentLease+margin))
	})
	r := f.runnable(waiting.Metadata.Name)
	if r.Status.Cluster != cluster || len(r.Status.Attempts) != 1 || r.Status.Message != waiting.Status.Message {
		f.t.Errorf("moved or reworded without a confirmation: cluster %s, %d attempts, message %q (was %q)",
			r.Status.Cluster, len(r.Status.Attempts), r.Status.Message, waiting.Status.Message)
	}
}
