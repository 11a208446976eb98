// Package console_test drives the console in Chromium against a whole
// purser (API, submitter, syncer, ingester, agents, cluster health and the
// failover controller) on two sandbox clusters in two data centers, and
// takes a cluster down for real, so that the pictures are drawn from what
// purser really records: the farm view with a dead cluster, a runnable's
// attempts across a failover, a deployable's rollout.
package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/control/attempt"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/syncer"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// Periods of the farm, short so that a failover takes seconds.
const (
	heartbeat     = 300 * time.Millisecond
	agentLease    = 6 * time.Second
	probeInterval = 200 * time.Millisecond
)

// A long Job, kept running by kwok, that fails over to any cluster and
// carries the number of its active pods to the next attempt.
const longJob = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: nightly-report, namespace: reports}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      backoffLimit: 0
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "1h"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1h"
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]
  failover:
    consistency: AtLeastOne
    application:
      statePreservation:
        rules: [{aliasLabelName: example.com/active-pods, jsonPath: "{.active}"}]
`

const configDeployable = `apiVersion: purser.io/v1alpha1
kind: Deployable
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: report-settings}
    data: {LOG_LEVEL: info}
`

func TestConsoleOnAFarm(t *testing.T) {
	tab := browsertest.Browser(t)
	a := env.Clusters(t)[0]
	b := env.Dedicated(t, false)
	f := newFarm(t, map[string]*sandbox.Cluster{"dc1-a": a, "dc2-a": b}, map[string]string{"dc1-a": "dc1", "dc2-a": "dc2"})

	browsertest.Do(tab, t, "open the console", chromedp.Navigate(f.url+"/#token="+f.token), chromedp.WaitVisible(chromedp.CSS("#farm")))
	for _, c := range []string{"dc1-a", "dc2-a"} {
		browsertest.WaitText(tab, t, `#farm [data-cluster="`+c+`"] header`, "Ready")
		browsertest.WaitText(tab, t, `#farm [data-cluster="`+c+`"] .records`, "fresh")
		browsertest.WaitText(tab, t, `#farm [data-cluster="`+c+`"] .capacity`, "CPU")
	}
	if dcs, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#farm section.dc")].map(s => s.dataset.dc)`)); err != nil ||
		strings.Join(dcs, ",") != "dc1,dc2" {
		t.Fatalf("the farm's columns: %v (%v), want dc1,dc2", dcs, err)
	}

	// A link carrying another token does not end the open session unasked
	// (a page that sends the user there would sign them in as someone
	// else): the console asks, and keeping the session keeps the user.
	browsertest.Do(tab, t, "follow a link with another token", browsertest.GoTo("#token=not-the-admins&/history"),
		chromedp.WaitVisible(chromedp.CSS("#switch-session")))
	browsertest.WaitText(tab, t, "#user", "admin")
	browsertest.Screenshot(tab, t, "console-switch-session-asked")
	browsertest.Do(tab, t, "keep the session", chromedp.Click(chromedp.CSS("#switch-session-no")), chromedp.WaitNotPresent(chromedp.CSS("#switch-session")))
	if stored, err := chromedp.Run(tab, chromedp.Evaluate[string](`sessionStorage.getItem("purser-token")`)); err != nil || stored != f.token {
		t.Fatalf("the session's token after keeping it: %q (%v), want the admin's", stored, err)
	}
	browsertest.WaitText(tab, t, "#user", "admin")

	// Cordon dc1-a from the console, so that the Job starts on dc2-a.
	browsertest.Do(tab, t, "cordon dc1-a", browsertest.GoTo("#/clusters"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="dc1-a"] button.cordon`)), chromedp.Click(chromedp.CSS(`tr[data-cluster="dc1-a"] button.cordon`)))
	browsertest.WaitText(tab, t, `tr[data-cluster="dc1-a"]`, "purser.io/cordon:NoSchedule")
	f.apply(http.MethodPost, "/api/v1/runnables", longJob)
	f.apply(http.MethodPut, "/api/v1/deployables/reports/report-settings", configDeployable)
	f.waitRunnable("running on dc2-a", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "dc2-a" && r.Status.Phase == v1alpha1.PhaseRunning
	})
	browsertest.Do(tab, t, "uncordon dc1-a", browsertest.GoTo("#/clusters"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="dc1-a"] button.uncordon`)), chromedp.Click(chromedp.CSS(`tr[data-cluster="dc1-a"] button.uncordon`)))
	browsertest.WaitText(tab, t, `tr[data-cluster="dc1-a"] .freshness`, "fresh")
	browsertest.Screenshot(tab, t, "farm-clusters")

	browsertest.Do(tab, t, "open the deployable", browsertest.GoTo("#/deployables/reports/report-settings"), chromedp.WaitVisible(chromedp.CSS("#rollout")))
	browsertest.WaitText(tab, t, `#sync tr[data-cluster="dc1-a"]`, "Synced")
	browsertest.WaitText(tab, t, `#sync tr[data-cluster="dc2-a"]`, "Synced")
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#rollout circle.copy").length`)); err != nil || n != 2 {
		t.Errorf("the rollout shows %d copies (%v), want 2", n, err)
	}
	browsertest.Screenshot(tab, t, "deployable-rollout")

	// The inventory finds the Job and the ConfigMap, not what the
	// clusters made by themselves unless asked.
	browsertest.Do(tab, t, "open the inventory", browsertest.GoTo("#/inventory"), chromedp.WaitVisible(chromedp.CSS("#i-kind")))
	browsertest.WaitText(tab, t, "#inventory", "report-settings")
	browsertest.WaitText(tab, t, "#inventory", "nightly-report")
	inventoryText := func() string {
		s, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#inventory").textContent`))
		return s
	}
	if s := inventoryText(); strings.Contains(s, "kube-root-ca.crt") {
		t.Errorf("the inventory lists kube-root-ca.crt without being asked")
	}
	browsertest.Screenshot(tab, t, "inventory-farm")
	browsertest.Do(tab, t, "show system objects", chromedp.Click(chromedp.CSS("#i-system")))
	browsertest.WaitText(tab, t, "#inventory", "kube-root-ca.crt")
	browsertest.Do(tab, t, "hide system objects", chromedp.Click(chromedp.CSS("#i-system")))

	// dc2-a's kube-apiserver dies: the farm shows it NotReady and its
	// records stale, and the Job moves to dc1-a.
	b.StopAPIServer()
	t.Cleanup(func() { _ = b.StartAPIServer(context.Background()) })
	browsertest.Do(tab, t, "open the farm", browsertest.GoTo("#/farm"), chromedp.WaitVisible(chromedp.CSS("#farm")))
	browsertest.WaitText(tab, t, `#farm [data-cluster="dc2-a"] header`, "NotReady")
	browsertest.WaitText(tab, t, `#farm [data-cluster="dc2-a"] .records`, "cannot reach its kube-apiserver")
	r := f.waitRunnable("failed over to dc1-a", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "dc1-a" && r.Status.Phase == v1alpha1.PhaseRunning && len(r.Status.Attempts) == 2
	})
	if at := r.Status.Attempts[0]; at.Result != attempt.ResultEvicted || at.Reason != failover.ReasonClusterUnreachable {
		t.Errorf("attempt 1: %+v", at)
	}
	waitSVG(tab, t, `#farm [data-cluster="dc1-a"] .phasebar`, "1 Running")
	browsertest.Screenshot(tab, t, "farm-cluster-down")

	browsertest.Do(tab, t, "open the runnable", browsertest.GoTo("#/runnables/reports/nightly-report"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	waitSVG(tab, t, "#timeline .failover-label", failover.ReasonClusterUnreachable)
	waitSVG(tab, t, "#timeline .failover-label", "carried example.com/active-pods=1")
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#timeline rect.attempt").length`)); err != nil || n != 2 {
		t.Errorf("the timeline draws %d attempts (%v), want 2", n, err)
	}
	browsertest.WaitText(tab, t, "#runnable-history", "evict")
	browsertest.WaitText(tab, t, "#status-yaml", "example.com/active-pods:")
	browsertest.Screenshot(tab, t, "runnable-timeline")

	// The runnables list links to the runnable: its address is one to
	// copy and open in another tab.
	browsertest.Do(tab, t, "open the runnables", browsertest.GoTo("#/runnables"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="nightly-report"] a.row-link`)))
	href, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('tr[data-name="nightly-report"] a.row-link').href`))
	if err != nil || !strings.HasSuffix(href, "#/runnables/reports/nightly-report") {
		t.Errorf("the row's link: %q (%v)", href, err)
	}
	browsertest.WaitText(tab, t, `tr[data-name="nightly-report"]`, "2") // attempts
	browsertest.Screenshot(tab, t, "runnables-farm")

	// Operating it from the console: suspend and resume set the Job's own
	// suspend field on dc1-a; an edit the running Job cannot take shows
	// the API's reason; a planned move takes it back to dc2-a once that
	// cluster's kube-apiserver is back.
	kube, err := a.Client()
	if err != nil {
		t.Fatal(err)
	}
	jobSuspended := func(want bool) {
		t.Helper()
		sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("the Job on dc1-a with spec.suspend %v", want), func(ctx context.Context) error {
			j, err := kube.BatchV1().Jobs("reports").Get(ctx, "nightly-report", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := j.Spec.Suspend != nil && *j.Spec.Suspend; got != want {
				return fmt.Errorf("spec.suspend %v", got)
			}
			return nil
		})
	}
	browsertest.Do(tab, t, "suspend it", browsertest.GoTo("#/runnables/reports/nightly-report"), chromedp.WaitVisible(chromedp.CSS("#suspend")), chromedp.Click(chromedp.CSS("#suspend")))
	f.waitRunnable("suspended from the console", func(r *v1alpha1.Runnable) bool { return r.Status.Phase == v1alpha1.PhaseSuspended })
	jobSuspended(true)
	browsertest.Do(tab, t, "resume it", chromedp.WaitVisible(chromedp.CSS("#resume")), chromedp.Click(chromedp.CSS("#resume")))
	f.waitRunnable("resumed from the console", func(r *v1alpha1.Runnable) bool { return r.Status.Phase == v1alpha1.PhaseRunning })
	jobSuspended(false)
	browsertest.WaitText(tab, t, "#runnable-history", "resume")

	browsertest.Do(tab, t, "edit it", browsertest.GoTo("#/edit-runnable/reports/nightly-report"), chromedp.WaitVisible(chromedp.CSS("#edit-yaml")))
	sandboxtest.Eventually(t, time.Minute, "the editor holds the runnable's YAML", func(context.Context) error {
		v, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#edit-yaml").value`))
		if err != nil {
			return err
		}
		if !strings.Contains(v, "resourceVersion:") {
			return fmt.Errorf("editor: %q", v)
		}
		return nil
	})
	browsertest.Do(tab, t, "change the image", chromedp.Evaluate[chromedp.Void](`(() => { const t = document.querySelector("#edit-yaml"); t.value = t.value.replace("image: busybox", "image: busybox:1.37"); })()`),
		chromedp.Click(chromedp.CSS("#show-diff")))
	browsertest.WaitText(tab, t, "#edit-diff .added", "image: busybox:1.37")
	browsertest.WaitText(tab, t, "#edit-diff .removed", "image: busybox")
	browsertest.Screenshot(tab, t, "runnable-edit-diff")
	browsertest.Do(tab, t, "apply the edit", chromedp.Click(chromedp.CSS("#save")))
	browsertest.WaitText(tab, t, "#result .error", "immutable")
	if r := f.waitRunnable("unchanged by the refused edit", func(*v1alpha1.Runnable) bool { return true }); strings.Contains(fmt.Sprint(r.Spec.Template), "busybox:1.37") {
		t.Errorf("a refused edit changed the spec: %v", r.Spec.Template)
	}

	if err := b.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Ready again, and without the taints purser set while it was not:
	// only then may a move go there.
	sandboxtest.Eventually(t, 3*time.Minute, "dc2-a Ready and untainted", func(ctx context.Context) error {
		var c v1alpha1.Cluster
		if _, err := f.api.Do(ctx, http.MethodGet, "/api/v1/clusters/dc2-a", nil, nil, "", &c); err != nil {
			return err
		}
		if c.Status.State != "Ready" || len(c.Status.Taints) > 0 {
			return fmt.Errorf("state %s, taints %v", c.Status.State, c.Status.Taints)
		}
		return nil
	})
	browsertest.Do(tab, t, "move it to dc2-a", browsertest.GoTo("#/runnables/reports/nightly-report"),
		chromedp.WaitReady(chromedp.CSS(`#move-to option[value="dc2-a"]`)), chromedp.SetValue(chromedp.CSS("#move-to"), "dc2-a"), chromedp.Click(chromedp.CSS("#move")))
	browsertest.WaitText(tab, t, "#toast", "is being moved to dc2-a")
	f.waitRunnable("moved to dc2-a from the console", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "dc2-a" && r.Status.Phase == v1alpha1.PhaseRunning && len(r.Status.Attempts) == 3 &&
			r.Status.Move != nil && r.Status.Move.Step == v1alpha1.MoveDone
	})
	browsertest.WaitText(tab, t, "#runnable", "dc1-a to dc2-a by admin, Done")
	browsertest.Screenshot(tab, t, "runnable-moved")
}

// waitSVG waits until the text of the SVG element sel contains want:
// SVG text has no innerText, which browsertest.WaitText reads.
func waitSVG(tab context.Context, t *testing.T, sel, want string) {
	t.Helper()
	sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("%s showing %q", sel, want), func(context.Context) error {
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`))
		if err != nil {
			return err
		}
		if !strings.Contains(got, want) {
			return fmt.Errorf("text %q", got)
		}
		return nil
	})
}

// farm is a whole purser on one SQLite database and one NATS server.
type farm struct {
	t     *testing.T
	store *store.Store
	api   *client.Client
	url   string
	token string
	ctx   context.Context
	wg    sync.WaitGroup
}

func newFarm(t *testing.T, members map[string]*sandbox.Cluster, dcs map[string]string) *farm {
	ctx, cancel := context.WithCancel(context.Background())
	f := &farm{t: t, ctx: ctx}
	t.Cleanup(func() { cancel(); f.wg.Wait() })
	log := slog.New(slog.DiscardHandler)
	var err error
	if f.store, err = store.Open(ctx, storetest.Engines()[0].NewDSN(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	sealer, _ := sealtest.New(t)
	nats := streamtest.Start(t, "")
	streams := streamtest.Declared(t, nats.URL)

	f.token = auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(f.token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	relay := outbox.NewRelay(outbox.StoreSource(f.store), streams, outbox.Config{Interval: 100 * time.Millisecond})
	f.run(relay.Run)
	srv := httptest.NewServer(server.New(server.Config{Store: f.store, Outbox: relay, Tokens: tokens, Policy: pol, Sealer: sealer, Logger: log,
		DrillSnapshot: controldrill.Snapshotter(controldrill.Options{})}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.api = client.New(client.Config{Server: srv.URL, Token: f.token})

	for name, c := range members {
		kc, err := c.Kubeconfig("")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": "Cluster",
			"metadata": map[string]any{"name": name, "labels": map[string]string{"dc": dcs[name]}},
			"spec":     map[string]any{"kubeconfig": string(kc)}})
		f.do(http.MethodPost, "/api/v1/clusters", body, "application/json")
		if err := c.EnsureNamespace(ctx, "reports"); err != nil {
			t.Fatal(err)
		}
		agentStream, err := stream.Connect(ctx, nats.URL, stream.Config{Name: "agent-" + name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(agentStream.Close)
		ag, err := agent.New(agent.Config{Cluster: name, RESTConfig: c.RESTConfig(), Stream: agentStream,
			SnapshotInterval: 5 * time.Second, HeartbeatInterval: heartbeat, DiscoveryInterval: time.Second,
			LeaseDuration: agentLease, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		f.run(ag.Run)
	}
	interp, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: f.store, Stream: streams, Health: interp, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	f.run(ingester.Run)
	f.run(submitter.New(submitter.Config{Store: f.store, Sealer: sealer, Stream: streams, RescanInterval: time.Second, Logger: log}).Run)
	f.run(syncer.New(syncer.Config{Store: f.store, Sealer: sealer, Stream: streams, Identity: "console-test", Logger: log}).Run)
	f.run(clusters.NewHealthMonitor(clusters.Config{Store: f.store, Sealer: sealer, Interval: probeInterval,
		Policy: clusters.Policy{FailureThreshold: 3, SuccessThreshold: 2, NoExecuteGrace: 2 * time.Second, AgentLease: agentLease},
		Logger: log}).Run)
	f.run(failover.New(failover.Config{Store: f.store, Objects: clusters.NewObjects(clusters.NewCache(sealer)),
		Interval: 200 * time.Millisecond, AgentLease: agentLease, FencingMargin: time.Second, Logger: log}).Run)
	return f
}

func (f *farm) run(fn func(context.Context) error) {
	f.wg.Go(func() {
		if err := fn(f.ctx); err != nil && f.ctx.Err() == nil {
			f.t.Errorf("a component stopped: %v", err)
		}
	})
}

func (f *farm) do(method, path string, body []byte, contentType string) {
	f.t.Helper()
	code, err := f.api.Do(f.ctx, method, path, nil, body, contentType, nil)
	if err != nil || code/100 != 2 {
		f.t.Fatalf("%s %s: %d %v", method, path, code, err)
	}
}

func (f *farm) apply(method, path, manifest string) {
	f.t.Helper()
	f.do(method, path, []byte(manifest), "application/yaml")
}

// waitRunnable polls the Job's runnable until ok; the bound is generous,
// as it measures nothing.
func (f *farm) waitRunnable(what string, ok func(*v1alpha1.Runnable) bool) *v1alpha1.Runnable {
	f.t.Helper()
	var r v1alpha1.Runnable
	sandboxtest.Eventually(f.t, 3*time.Minute, "the runnable "+what, func(ctx context.Context) error {
		r = v1alpha1.Runnable{}
		if _, err := f.api.Do(ctx, http.MethodGet, "/api/v1/runnables/reports/nightly-report", nil, nil, "", &r); err != nil {
			return err
		}
		if ok(&r) {
			return nil
		}
		st, _ := json.MarshalIndent(r.Status, "", "  ")
		return fmt.Errorf("status: %s", st)
	})
	return &r
}
