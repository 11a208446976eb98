package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/store/storetest"
)

// browser starts headless Chromium (Debian's package, installed by
// .ci/run) and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs it")
		}
		t.Skip("chromium not installed (apt-get install chromium); the browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil { // starts the browser
		t.Fatal(err)
	}
	return tab
}

// artifacts is where screenshots go: $PURSER_TEST_ARTIFACTS, else a folder
// under the system temp dir that outlives the test.
func artifacts(t *testing.T) string {
	dir := os.Getenv("PURSER_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "purser-test-artifacts")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// run runs browser actions with a generous bound.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		failed, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		screenshot(t, failed, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// goTo moves the console to another page the way a link does; a
// navigation that only changes the hash fires no load event to wait for.
func goTo(hash string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = `+strconv.Quote(hash)))
		return chromedp.Void{}, err
	}
}

// waitText waits until the element's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var text string
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		text, err = chromedp.Run(cctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		if err == nil && strings.Contains(text, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never showed %q (last: %q)", sel, want, text)
}

func TestConsole(t *testing.T) {
	alice := browser(t)
	h := newHarness(t, storetest.Engines()[0])
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "tok")).want(t, http.StatusCreated)

	// Log in through a link carrying the token, as `purser up` prints it;
	// the token leaves the address bar.
	run(t, alice, "open the console", chromedp.Navigate(h.url+"/?token="+h.tokens["alice"]),
		chromedp.WaitVisible(chromedp.CSS("#user")))
	waitText(t, alice, "#user", "alice")
	search, err := chromedp.Run(alice, chromedp.Evaluate[string](`location.search`))
	if err != nil || strings.Contains(search, "token") {
		t.Fatalf("the token stayed in the address bar: %q", search)
	}
	screenshot(t, alice, "runnables-empty")

	// Submit a Job from YAML.
	job := runnableYAML("team-a", "ui-job", "echo from the console")
	run(t, alice, "open the submit page", chromedp.Click(chromedp.CSS("#submit-new")), chromedp.WaitVisible(chromedp.CSS("#yaml")),
		chromedp.SetValue(chromedp.CSS("#yaml"), job))
	screenshot(t, alice, "submit")
	run(t, alice, "submit", chromedp.Click(chromedp.CSS("#send")), chromedp.WaitVisible(chromedp.CSS("#runnable")))
	waitText(t, alice, "#runnable", "Queued")
	screenshot(t, alice, "runnable-detail")

	// The list follows the runnable's phase without a reload.
	run(t, alice, "back to the list", goTo("#/runnables"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="ui-job"]`)))
	waitText(t, alice, `tr[data-name="ui-job"] .phase`, "Queued")
	setPhase(t, h, "team-a", "ui-job", "Running")
	waitText(t, alice, `tr[data-name="ui-job"] .phase`, "Running")
	screenshot(t, alice, "runnables-live")

	// A deployable's per-cluster matrix turns Synced as the syncer reports.
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/app-config", configMapDeployable("team-a", "app-config", "v1")).want(t, http.StatusCreated)
	run(t, alice, "open deployables", goTo("#/deployables"), chromedp.WaitVisible(chromedp.CSS(`#deployables td[data-cluster="dc1-a"]`)))
	reportSynced(t, h, "team-a", "app-config", "dc1-a")
	waitText(t, alice, `#deployables td[data-cluster="dc1-a"]`, "Synced")
	screenshot(t, alice, "deployables-matrix")

	// History shows the submission. alice reads team-a only.
	run(t, alice, "open history", goTo("#/history"), chromedp.WaitVisible(chromedp.CSS("#history")))
	waitText(t, alice, "#history", "Runnable/team-a/ui-job")
	screenshot(t, alice, "history")

	// The inventory, searched with a label selector, says how fresh each
	// cluster's records are.
	now := time.Now().UTC()
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.UpsertInventory(context.Background(), []store.InventoryRow{
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-config", UID: "u1",
				ResourceVersion: "3", Labels: map[string]string{"app": "web"}, Health: "Healthy", ObservedAt: now},
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "db-config", UID: "u2",
				ResourceVersion: "4", Labels: map[string]string{"app": "db"}, Health: "Healthy", ObservedAt: now},
		}); err != nil {
			return err
		}
		return tx.TouchAgent(context.Background(), "dc1-a", &now, &now, &now)
	}); err != nil {
		t.Fatal(err)
	}
	run(t, alice, "open the inventory", goTo("#/inventory"), chromedp.WaitVisible(chromedp.CSS("#i-selector")),
		chromedp.SendKeys(chromedp.CSS("#i-selector"), "app=web\n"))
	waitText(t, alice, "#inventory", "web-config")
	waitText(t, alice, `#freshness [data-cluster="dc1-a"]`, "fresh")
	if rows, err := chromedp.Run(alice, chromedp.Evaluate[int](`document.querySelectorAll("#inventory tbody tr").length`)); err != nil || rows != 1 {
		t.Fatalf("the selector app=web shows %d rows, want 1 (%v)", rows, err)
	}
	screenshot(t, alice, "inventory")

	// A viewer, logged in with the form, is offered no submit button, and
	// the API refuses a submission sent from the page anyway.
	bob := alice // one tab: log out, and log in again as bob
	run(t, bob, "log out", chromedp.Click(chromedp.CSS("#logout")))
	run(t, bob, "log in as a viewer", chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), h.tokens["bob"]), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#user")), goTo("#/runnables"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="ui-job"]`)))
	buttons, err := chromedp.Run(bob, chromedp.Evaluate[int](`document.querySelectorAll("#submit-new").length`))
	if err != nil || buttons != 0 {
		t.Fatal("a viewer is offered the submit button")
	}
	body, _ := json.Marshal(runnableYAML("team-a", "sneaky", "true"))
	status, err := chromedp.Run(bob, chromedp.Evaluate[int](`fetch("/api/v1/runnables", {method: "POST",
		headers: {"Authorization": "Bearer " + sessionStorage.getItem("purser-token"), "Content-Type": "application/yaml"},
		body: `+string(body)+`}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a viewer's submission from the page: status %d, want 403", status)
	}
	screenshot(t, bob, "viewer")

	// Four eyes: what dave submits in team-b, carol approves in the console;
	// dave himself is not offered the button.
	h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "payroll", "true")).want(t, http.StatusAccepted)
	carol := alice
	run(t, carol, "open as an approver", chromedp.Navigate(h.url+"/?token="+h.tokens["carol"]+"#/runnables/team-b/payroll"),
		chromedp.WaitVisible(chromedp.CSS("#approve")))
	screenshot(t, carol, "approval")
	run(t, carol, "approve", chromedp.Click(chromedp.CSS("#approve")))
	waitText(t, carol, "#runnable", "carol")
	if got := h.get("carol", "/api/v1/runnables/team-b/payroll"); got.str("status", "phase") != "Queued" {
		t.Fatalf("after approving in the console: %s", got.raw)
	}
}

// setPhase moves a runnable's phase behind the console's back, as the
// submitter and the ingester will.
func setPhase(t *testing.T, h *harness, ns, name, phase string) {
	t.Helper()
	err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		r, err := tx.GetRunnable(context.Background(), ns, name)
		if err != nil {
			return err
		}
		r.Phase = phase
		return tx.UpdateRunnable(context.Background(), r)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reportSynced writes the status row a syncer writes after an apply.
func reportSynced(t *testing.T, h *harness, ns, name, cluster string) {
	t.Helper()
	now := time.Now()
	err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		d, err := tx.GetDeployable(context.Background(), ns, name)
		if err != nil {
			return err
		}
		return tx.PutDeployableStatus(context.Background(), &store.DeployableClusterStatus{
			DeployableUID: d.UID, Cluster: cluster, State: "Synced", SyncedGeneration: d.Generation, LastSyncedAt: &now,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
