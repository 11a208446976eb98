package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

func TestConsole(t *testing.T) {
	alice := browsertest.Browser(t)
	h := newHarness(t, storetest.Engines()[0])
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "tok")).want(t, http.StatusCreated)

	// Log in through a link carrying the token, as `purser up` prints it;
	// the token leaves the address bar.
	// The token is in the fragment, which the browser never sends.
	browsertest.Do(alice, t, "open the console", chromedp.Navigate(h.url+"/#token="+h.tokens["alice"]),
		chromedp.WaitVisible(chromedp.CSS("#user")))
	browsertest.WaitText(alice, t, "#user", "alice")
	address, err := chromedp.Run(alice, chromedp.Evaluate[string](`location.href`))
	if err != nil || strings.Contains(address, "token") || strings.Contains(address, h.tokens["alice"]) {
		t.Fatalf("the token stayed in the address bar: %q", address)
	}
	browsertest.Screenshot(alice, t, "farm-one-cluster")
	browsertest.Do(alice, t, "open the runnables", browsertest.GoTo("#/runnables"), chromedp.WaitVisible(chromedp.CSS("#runnables")))
	browsertest.Screenshot(alice, t, "runnables-empty")

	// Submit a Job from YAML.
	job := runnableYAML("team-a", "ui-job", "echo from the console")
	browsertest.Do(alice, t, "open the submit page", chromedp.Click(chromedp.CSS("#submit-new")), chromedp.WaitVisible(chromedp.CSS("#yaml")),
		chromedp.SetValue(chromedp.CSS("#yaml"), job))
	browsertest.Screenshot(alice, t, "submit")
	browsertest.Do(alice, t, "submit", chromedp.Click(chromedp.CSS("#send")), chromedp.WaitVisible(chromedp.CSS("#runnable")))
	browsertest.WaitText(alice, t, "#runnable", "Queued")
	browsertest.Screenshot(alice, t, "runnable-detail")

	// The list follows the runnable's phase without a reload.
	browsertest.Do(alice, t, "back to the list", browsertest.GoTo("#/runnables"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="ui-job"]`)))
	browsertest.WaitText(alice, t, `tr[data-name="ui-job"] .phase`, "Queued")
	setPhase(t, h, "team-a", "ui-job", "Running")
	browsertest.WaitText(alice, t, `tr[data-name="ui-job"] .phase`, "Running")
	browsertest.Screenshot(alice, t, "runnables-live")

	// A deployable's per-cluster matrix turns Synced as the syncer reports.
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/app-config", configMapDeployable("team-a", "app-config", "v1")).want(t, http.StatusCreated)
	browsertest.Do(alice, t, "open deployables", browsertest.GoTo("#/deployables"), chromedp.WaitVisible(chromedp.CSS(`#deployables td[data-cluster="dc1-a"]`)))
	reportSynced(t, h, "team-a", "app-config", "dc1-a")
	browsertest.WaitText(alice, t, `#deployables td[data-cluster="dc1-a"]`, "Synced")
	browsertest.Screenshot(alice, t, "deployables-matrix")

	// A rollout in waves shows where it stands, in the matrix and on the
	// deployable's page, and is paused from there.
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/waved", configMapDeployable("team-a", "waved", "v1")).want(t, http.StatusCreated)
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/waved", rolledDeployable("team-a", "waved", "v2", `{waves: [{name: dc-1}]}`)).want(t, http.StatusOK)
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		rec, err := tx.Deployables().Get(context.Background(), "team-a", "waved")
		if err != nil {
			return err
		}
		r, err := tx.Deployables().GetRollout(context.Background(), rec.UID)
		if err != nil {
			return err
		}
		r.Status = []byte(`{"generation":2,"previousGeneration":1,"wave":"dc-1","waveIndex":0,"state":"Progressing","reason":"WaveProgressing","clusters":[{"cluster":"dc1-a","wave":"dc-1","generation":2,"generationApplied":1,"health":"Progressing"}]}`)
		return tx.Deployables().PutRollout(context.Background(), r)
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(alice, t, "open deployables", browsertest.GoTo("#/deployables"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="waved"] td[data-cluster="dc1-a"]`)))
	browsertest.WaitText(alice, t, `tr[data-name="waved"]`, "Progressing dc-1")
	browsertest.Do(alice, t, "open the rolled deployable", browsertest.GoTo("#/deployables/team-a/waved"), chromedp.WaitVisible(chromedp.CSS(`#rollout td`)))
	browsertest.WaitText(alice, t, `#rollout tr[data-cluster="dc1-a"]`, "Progressing")
	browsertest.Screenshot(alice, t, "deployable-rollout")
	browsertest.Do(alice, t, "pause the rollout", chromedp.Click(chromedp.CSS("#rollout-pause")))
	sandboxtest.Eventually(t, 30*time.Second, "the pause recorded", func(ctx context.Context) error {
		var control string
		if err := h.raw.QueryRowContext(ctx, `SELECT COALESCE(control, '') FROM deployable_rollouts`).Scan(&control); err != nil {
			return err
		}
		if !strings.Contains(control, `"paused":true`) {
			return fmt.Errorf("control %q", control)
		}
		return nil
	})

	// History shows the submission. alice reads team-a only.
	browsertest.Do(alice, t, "open history", browsertest.GoTo("#/history"), chromedp.WaitVisible(chromedp.CSS("#history")))
	browsertest.WaitText(alice, t, "#history", "Runnable/team-a/ui-job")
	browsertest.Screenshot(alice, t, "history")

	// The inventory, searched with a label selector, says how fresh each
	// cluster's records are.
	now := time.Now().UTC()
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.Inventory().Upsert(context.Background(), []store.InventoryRow{
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-config", UID: "u1",
				ResourceVersion: "3", Labels: map[string]string{"app": "web"}, Health: "Healthy", ObservedAt: now},
			{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "db-config", UID: "u2",
				ResourceVersion: "4", Labels: map[string]string{"app": "db"}, Health: "Healthy", ObservedAt: now},
		}); err != nil {
			return err
		}
		return tx.Agents().Touch(context.Background(), "dc1-a", &now, &now, &now)
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(alice, t, "open the inventory", browsertest.GoTo("#/inventory"), chromedp.WaitVisible(chromedp.CSS("#i-selector")),
		chromedp.SendKeys(chromedp.CSS("#i-selector"), "app=web\n"))
	browsertest.WaitText(alice, t, "#inventory", "web-config")
	browsertest.WaitText(alice, t, `#freshness [data-cluster="dc1-a"]`, "fresh")
	if rows, err := chromedp.Run(alice, chromedp.Evaluate[int](`document.querySelectorAll("#inventory tbody tr").length`)); err != nil || rows != 1 {
		t.Fatalf("the selector app=web shows %d rows, want 1 (%v)", rows, err)
	}
	// A record that appears later shows up without a reload (the watch).
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(context.Background(), []store.InventoryRow{{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap",
			Namespace: "team-a", Name: "web-config-2", UID: "u3", ResourceVersion: "9", Labels: map[string]string{"app": "web"},
			Health: "Unhealthy", ObservedAt: time.Now()}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(alice, t, `#inventory tr[data-name="web-config-2"]`, "Unhealthy")
	browsertest.Screenshot(alice, t, "inventory")

	// A viewer, logged in with the form, is offered no submit button, and
	// the API refuses a submission sent from the page anyway.
	bob := alice // one tab: log out, and log in again as bob
	browsertest.Do(bob, t, "log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	// The login page says its commands as code, not in backticks.
	if text, err := chromedp.Run(bob, chromedp.Evaluate[string](`document.querySelector("form.login").textContent`)); err != nil ||
		strings.Contains(text, "`") || !strings.Contains(text, "purser up") {
		t.Errorf("the login page: %q (%v)", text, err)
	}
	browsertest.Screenshot(bob, t, "login")
	browsertest.Do(bob, t, "log in as a viewer", chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), h.tokens["bob"]), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#user")), browsertest.GoTo("#/runnables"),
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
	browsertest.Screenshot(bob, t, "viewer")

	// Four eyes: what dave submits in team-b, carol approves in the console;
	// dave himself is not offered the button.
	h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "payroll", "true")).want(t, http.StatusAccepted)
	carol := alice
	// bob's session is open: the link's token replaces it only once asked.
	browsertest.Do(carol, t, "open as an approver", chromedp.Navigate(h.url+"/#token="+h.tokens["carol"]+"&/runnables/team-b/payroll"),
		chromedp.WaitVisible(chromedp.CSS("#switch-session")), chromedp.Click(chromedp.CSS("#switch-session-yes")),
		chromedp.WaitVisible(chromedp.CSS("#approve")))
	browsertest.WaitText(carol, t, "#pending-change", "by dave")
	browsertest.Screenshot(carol, t, "approval")
	browsertest.Do(carol, t, "approve", chromedp.Click(chromedp.CSS("#approve")))
	browsertest.WaitText(carol, t, "#runnable", "carol")
	if got := h.get("carol", "/api/v1/runnables/team-b/payroll"); got.str("status", "phase") != "Queued" {
		t.Fatalf("after approving in the console: %s", got.raw)
	}

	// A deployable's pending change is shown beside the live spec, and
	// the approval names the version shown.
	h.yaml("dave", "PUT", "/api/v1/deployables/team-b/ui-cfg", configMapDeployable("team-b", "ui-cfg", "first")).want(t, http.StatusCreated)
	h.decide("carol", "/api/v1/deployables/team-b/ui-cfg", "approve").want(t, http.StatusOK)
	h.yaml("dave", "PUT", "/api/v1/deployables/team-b/ui-cfg", configMapDeployable("team-b", "ui-cfg", "second")).want(t, http.StatusOK)
	browsertest.Do(carol, t, "open the pending deployable", browsertest.GoTo("#/deployables/team-b/ui-cfg"), chromedp.WaitVisible(chromedp.CSS("#pending-spec")))
	browsertest.WaitText(carol, t, "#live-spec", "first")
	browsertest.WaitText(carol, t, "#pending-spec", "second")
	browsertest.Screenshot(carol, t, "deployable-pending")
	browsertest.Do(carol, t, "approve the deployable", chromedp.Click(chromedp.CSS("#approve")))
	sandboxtest.Eventually(t, streamtest.Timeout, "the deployable approved from the console", func(context.Context) error {
		got := h.get("carol", "/api/v1/deployables/team-b/ui-cfg")
		if got.str("status", "phase") != "Active" || !strings.Contains(string(got.raw), "second") {
			return fmt.Errorf("deployable: %s", got.raw)
		}
		return nil
	})

	// carol may not touch clusters: no cordon button. An admin cordons a
	// cluster and the taint shows.
	browsertest.Do(carol, t, "open clusters as carol", browsertest.GoTo("#/clusters"), chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="dc1-a"]`)))
	if n, err := chromedp.Run(carol, chromedp.Evaluate[int](`document.querySelectorAll("button.cordon").length`)); err != nil || n != 0 {
		t.Fatalf("a non-admin is offered %d cordon buttons (%v)", n, err)
	}
	admin := carol
	browsertest.Do(admin, t, "log in as admin", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), h.tokens["admin"]), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#user")), browsertest.GoTo("#/clusters"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="dc1-a"] button.cordon`)), chromedp.Click(chromedp.CSS(`tr[data-cluster="dc1-a"] button.cordon`)))
	browsertest.WaitText(admin, t, `tr[data-cluster="dc1-a"]`, "purser.io/cordon:NoSchedule")
	browsertest.Screenshot(admin, t, "clusters-cordoned")
	if got := h.get("admin", "/api/v1/clusters/dc1-a"); !strings.Contains(string(got.raw), "purser.io/cordon") {
		t.Fatalf("cordon did not reach the API: %s", got.raw)
	}

	// A runnable cancelled from the console says it was never placed, and
	// is offered for deletion once it ended.
	browsertest.Do(admin, t, "cancel ui-job", browsertest.GoTo("#/runnables/team-a/ui-job"), chromedp.WaitVisible(chromedp.CSS("#cancel")),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.CSS("#cancel")))
	browsertest.WaitText(admin, t, "#no-attempts", "Cancelled before it was placed")
	browsertest.Do(admin, t, "see the delete button", chromedp.WaitVisible(chromedp.CSS("#delete")))
	browsertest.WaitText(admin, t, "#runnable-history", "cancel")
	if got := h.get("admin", "/api/v1/runnables/team-a/ui-job"); got.str("status", "phase") != "Cancelled" {
		t.Fatalf("after cancelling in the console: %s", got.raw)
	}
	browsertest.Screenshot(admin, t, "runnable-cancelled")
	browsertest.Do(admin, t, "delete ui-job", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.CSS("#delete")),
		chromedp.WaitVisible(chromedp.CSS("#gone")))
	h.get("admin", "/api/v1/runnables/team-a/ui-job").want(t, http.StatusNotFound)

	// A deployable applied from the console's YAML form.
	browsertest.Do(admin, t, "apply a deployable", browsertest.GoTo("#/apply-deployable"), chromedp.WaitVisible(chromedp.CSS("#dep-yaml")),
		chromedp.SetValue(chromedp.CSS("#dep-ns"), "team-a"), chromedp.SetValue(chromedp.CSS("#dep-name"), "from-console"),
		chromedp.Click(chromedp.CSS("#apply")), chromedp.WaitVisible(chromedp.CSS("#sync")))
	if got := h.get("admin", "/api/v1/deployables/team-a/from-console"); got.code != http.StatusOK {
		t.Fatalf("deployable applied from the console: %d %s", got.code, got.raw)
	}

	// The queue: a quota's use, what waits in order, and each cluster's
	// free capacity as its agent reported it.
	h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: team-a}\nspec:\n  limits: {cpu: \"12\", runnables: \"5\"}\n").want(t, http.StatusCreated)
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "waits-first", "true")+"  priority: high\n").want(t, http.StatusAccepted)
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "waits-second", "true")).want(t, http.StatusAccepted)
	capacity := `{"allocatable":{"cpu":"16","memory":"64Gi","pods":"110"},"free":{"cpu":"4","memory":"48Gi","pods":"100"}}`
	if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		return tx.Agents().RecordCapacity(context.Background(), "dc1-a", time.Now(), []byte(capacity))
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(admin, t, "open the queue", browsertest.GoTo("#/queue"), chromedp.WaitVisible(chromedp.CSS(`#queue tr[data-name="waits-second"]`)))
	browsertest.WaitText(admin, t, `#queue tr[data-name="waits-first"] .position`, "1")
	// Behind it, after what waited longer (the approved payroll).
	second := fmt.Sprint(h.get("admin", "/api/v1/runnables/team-a/waits-second").body["status"].(map[string]any)["queuePosition"])
	if second == "1" || second == "<nil>" {
		t.Fatalf("waits-second at position %s", second)
	}
	browsertest.WaitText(admin, t, `#queue tr[data-name="waits-second"] .position`, second)
	browsertest.WaitText(admin, t, `#quotas tr[data-namespace="team-a"][data-resource="runnables"]`, "0 of 5")
	browsertest.WaitText(admin, t, `#free tr[data-cluster="dc1-a"] tr[data-resource="cpu"]`, "4 free of 16")
	if share, err := chromedp.Run(admin, chromedp.Evaluate[string](`document.querySelector('#free tr[data-cluster="dc1-a"] tr[data-resource="cpu"] svg').dataset.share`)); err != nil || share != "0.750" {
		t.Fatalf("cpu bar of dc1-a at %q (%v), want 0.750 (12 of 16 in use)", share, err)
	}
	browsertest.Screenshot(admin, t, "queue")
	browsertest.Do(admin, t, "the cluster's free capacity", browsertest.GoTo("#/clusters/dc1-a"), chromedp.WaitVisible(chromedp.CSS(`#cluster-resources tr[data-resource="memory"]`)))
	browsertest.WaitText(admin, t, `#cluster-resources tr[data-resource="memory"]`, "48Gi free of 64Gi")
}

// setPhase moves a runnable's phase behind the console's back, as the
// submitter and the ingester will.
func setPhase(t *testing.T, h *harness, ns, name, phase string) {
	t.Helper()
	err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
		r, err := tx.Runnables().Get(context.Background(), ns, name)
		if err != nil {
			return err
		}
		r.Phase = phase
		return tx.Runnables().Update(context.Background(), r)
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
		d, err := tx.Deployables().Get(context.Background(), ns, name)
		if err != nil {
			return err
		}
		return tx.Deployables().PutStatus(context.Background(), &store.DeployableClusterStatus{
			DeployableUID: d.UID, Cluster: cluster, State: "Synced", SyncedGeneration: d.Generation, LastSyncedAt: &now,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The console prints specs and statuses as YAML (js-yaml); whatever it
// prints must read back, as YAML, as the same value.
func TestConsoleYAML(t *testing.T) {
	tab := browsertest.Browser(t)
	h := newHarness(t, storetest.Engines()[0])
	browsertest.Do(tab, t, "open the console", chromedp.Navigate(h.url+"/#token="+h.tokens["alice"]), chromedp.WaitVisible(chromedp.CSS("#user")))
	for _, value := range []string{
		`{"template":{"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{"containers":[{"name":"main","command":["sh","-c","echo a: b # not a comment"],"env":[]}],"restartPolicy":"Never"}}}}}`,
		`{"strings":["","yes","No","null","~","0x1f","1e3","-1",".5","-","- a","? x",":x","a:b","a: b","#x","x #y"," lead","trail ","é ü","tab\there","quote\"s","back\\slash","{}","[x]","*ref","&anchor","!tag","%dir","@at","` + "`" + `tick"]}`,
		`{"multi":"line one\nline two\n","noEnd":"a\nb","leadingSpace":"  indented\nnext","cr":"a\r\nb","empty":{},"list":[],"nested":[[1,2],[{"a":null,"b":true,"c":1.5}]],"n":-0.25}`,
		`{"keys":{"a b":1,"x:y":2,"-k":3,"true":4,"":5,"purser.io/job-id":"44cc5573"}}`,
	} {
		var want any
		if err := json.Unmarshal([]byte(value), &want); err != nil {
			t.Fatal(err)
		}
		out, err := chromedp.Run(tab, chromedp.Evaluate[string](`toYAML(`+value+`)`))
		if err != nil {
			t.Fatal(err)
		}
		back, err := yaml.YAMLToJSON([]byte(out))
		if err != nil {
			t.Errorf("the console's YAML does not parse: %v\n%s", err, out)
			continue
		}
		var got any
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("YAML of %s reads back as %s:\n%s", value, back, out)
		}
	}
}
