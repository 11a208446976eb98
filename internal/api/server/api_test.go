package server_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Each case runs on SQLite and on PostgreSQL, each against a fresh database.
var cases = []struct {
	name string
	fn   func(t *testing.T, h *harness)
}{
	{"SubmitIsIdempotent", testSubmitIsIdempotent},
	{"GenerateName", testGenerateName},
	{"MutationsAreAuditedWithOutboxInOneTransaction", testAuditedWithOutbox},
	{"CancelRunnable", testCancel},
	{"ListPagination", testListPagination},
	{"Authentication401", testUnauthenticated},
	{"Authorization403", testForbidden},
	{"FourEyesRunnable", testFourEyesRunnable},
	{"FourEyesDeployable", testFourEyesDeployable},
	{"Deployables", testDeployables},
	{"Clusters", testClusters},
	{"SecretsAreCiphertextAtRest", testSecretsAtRest},
	{"TamperingIsDetected", testTamperDetected},
	{"BadInputChangesNothing", testBadInput},
	{"HealthAndMetrics", testHealthAndMetrics},
	{"Inventory", testInventory},
	{"InventoryWatch", testInventoryWatch},
	{"KubeAPI", testKubeAPI},
	{"AttemptCounts", testAttemptCounts},
}

func TestAPI(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(t, newHarness(t, eng))
				})
			}
		})
	}
}

func runnableYAML(ns, name, command string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  name: %s
  namespace: %s
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: main
            image: busybox
            command: [sh, -c, %q]
`, name, ns, command)
}

// A write sent again while the first one is still being committed (its
// client gave up waiting, as clients do while the database is slow) is
// answered as a repeat, not a 409: a runnable submitted twice is one
// runnable (202, then 200), a deployable put twice is created once. On
// PostgreSQL the second insert waits for the first transaction and then
// finds the name taken; SQLite has one writer, so there is no such race.
func TestWriteSentAgainWhileTheFirstCommits(t *testing.T) {
	var eng storetest.Engine
	for _, e := range storetest.Engines() {
		if e.Name == "postgres" {
			eng = e
		}
	}
	if eng.Name == "" {
		t.Skip("needs PostgreSQL (PURSER_TEST_POSTGRES)")
	}
	for _, c := range []struct {
		name, method, path, body string
		before                   string // PUT to path first, when set
		codes                    []int
		audits                   int
	}{
		{"runnable", "POST", "/api/v1/runnables", runnableYAML("team-a", "nightly", "echo 1"), "", []int{http.StatusOK, http.StatusAccepted}, 1},
		{"deployable", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v1"), "", []int{http.StatusOK, http.StatusCreated}, 1},
		// The second reads the row the first is changing, and finds it
		// changed: the same spec again changes nothing more.
		{"deployable changed", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v2"),
			configMapDeployable("team-a", "cfg", "v1"), []int{http.StatusOK, http.StatusOK}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, eng)
			if c.before != "" {
				h.yaml("alice", "PUT", c.path, c.before).want(t, http.StatusCreated)
			}
			release := holdAuditHead(t, h)
			answers := make(chan response, 2)
			send := func() { answers <- h.yaml("alice", c.method, c.path, c.body) }
			go send()
			waitingForLocks(t, h, 1) // the first holds its row, waiting for the head
			go send()
			waitingForLocks(t, h, 2) // the second waits for the first's row
			release()
			a, b := <-answers, <-answers
			codes := []int{a.code, b.code}
			slices.Sort(codes)
			if !slices.Equal(codes, c.codes) {
				t.Fatalf("answers %d (%s) and %d (%s); want %v", a.code, a.raw, b.code, b.raw, c.codes)
			}
			if a.str("metadata", "uid") != b.str("metadata", "uid") {
				t.Fatalf("uids %s and %s, want one object", a.str("metadata", "uid"), b.str("metadata", "uid"))
			}
			if n := h.count("audit_log"); n != c.audits {
				t.Fatalf("%d audit entries, want %d (the first write of the two only)", n, c.audits)
			}
		})
	}
}

// holdAuditHead locks the audit chain's head, which every audited commit
// locks, until the returned release: a write then waits with what it
// inserted not committed.
func holdAuditHead(t *testing.T, h *harness) (release func()) {
	t.Helper()
	head, err := h.raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = head.Rollback() }) // done already when released
	if _, err := head.ExecContext(t.Context(), "UPDATE audit_head SET last_seq = last_seq WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := head.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitingForLocks waits until n transactions of the test's PostgreSQL
// database wait for a lock.
func waitingForLocks(t *testing.T, h *harness, n int) {
	t.Helper()
	sandboxtest.Eventually(t, time.Minute, fmt.Sprintf("%d transactions waiting for a lock", n), func(ctx context.Context) error {
		var got int
		if err := h.raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got); err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

func testSubmitIsIdempotent(t *testing.T, h *harness) {
	first := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "nightly", "echo 1")).want(t, http.StatusAccepted)
	if first.str("status", "phase") != "Queued" || first.str("metadata", "uid") == "" {
		t.Fatalf("first submit: %s", first.raw)
	}
	again := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "nightly", "echo 1")).want(t, http.StatusOK)
	if again.str("metadata", "uid") != first.str("metadata", "uid") {
		t.Fatalf("same submission got uid %s, first had %s", again.str("metadata", "uid"), first.str("metadata", "uid"))
	}
	before := h.counts()
	conflict := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "nightly", "echo 2")).want(t, http.StatusConflict)
	if conflict.str("reason") != "Conflict" || !strings.Contains(conflict.str("message"), "another spec") {
		t.Fatalf("conflict answer: %s", conflict.raw)
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a 409 changed the database: %v -> %v", before, after)
	}
	if n := h.count("audit_log"); n != 1 {
		t.Fatalf("%d audit entries, want 1 (the first submission only)", n)
	}
	got := h.get("bob", "/api/v1/runnables/team-a/nightly").want(t, http.StatusOK)
	if !strings.Contains(string(got.raw), "echo 1") {
		t.Fatalf("stored spec is not the first one: %s", got.raw)
	}
	ids := h.submissions(1)
	if len(ids) != 1 {
		t.Fatalf("submissions on the stream: %v, want exactly one", ids)
	}
}

func testGenerateName(t *testing.T, h *harness) {
	body := strings.Replace(runnableYAML("team-a", "x", "true"), "name: x", "generateName: report-", 1)
	a := h.yaml("alice", "POST", "/api/v1/runnables", body).want(t, http.StatusAccepted)
	b := h.yaml("alice", "POST", "/api/v1/runnables", body).want(t, http.StatusAccepted)
	na, nb := a.str("metadata", "name"), b.str("metadata", "name")
	if !strings.HasPrefix(na, "report-") || !strings.HasPrefix(nb, "report-") || na == nb {
		t.Fatalf("generated names %q and %q", na, nb)
	}
}

func testAuditedWithOutbox(t *testing.T, h *harness) {
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r1", "true")).want(t, http.StatusAccepted)
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v1")).want(t, http.StatusCreated)
	h.do("alice", "DELETE", "/api/v1/runnables/team-a/r1", "", nil).want(t, http.StatusOK)

	hist := h.get("admin", "/api/v1/history").want(t, http.StatusOK).items()
	var got []string
	for _, e := range hist {
		got = append(got, fmt.Sprintf("%v %v %v", e["actor"], e["action"], e["object"]))
	}
	want := []string{
		"alice create Runnable/team-a/r1",
		"alice create Deployable/team-a/cfg",
		"alice cancel Runnable/team-a/r1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Newest first, in pages: the latest two, then the one before.
	page := h.get("admin", "/api/v1/history?order=newest&limit=2").want(t, http.StatusOK)
	next := h.get("admin", "/api/v1/history?order=newest&limit=2&continue="+page.str("continue")).want(t, http.StatusOK)
	var newest []string
	for _, e := range append(page.items(), next.items()...) {
		newest = append(newest, fmt.Sprintf("%v %v %v", e["actor"], e["action"], e["object"]))
	}
	if !slices.Equal(newest, []string{want[2], want[1], want[0]}) {
		t.Fatalf("history newest first: %v", newest)
	}
	h.get("admin", "/api/v1/history?order=sideways").want(t, http.StatusBadRequest)
	// The outbox rows written with the submission and the cancellation
	// reach the stream, and leave the outbox once acknowledged.
	ids := h.submissions(2)
	if len(ids) != 2 || !strings.HasSuffix(ids[0], "/submit") || !strings.HasSuffix(ids[1], "/cancel") {
		t.Fatalf("stream messages %v, want submit then cancel", ids)
	}
	if v := h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK); v.body["ok"] != true {
		t.Fatalf("chain: %s", v.raw)
	}
}

func testCancel(t *testing.T, h *harness) {
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r", "true")).want(t, http.StatusAccepted)
	c := h.do("alice", "DELETE", "/api/v1/runnables/team-a/r", "", nil).want(t, http.StatusOK)
	if c.str("status", "phase") != "Cancelled" {
		t.Fatalf("after cancel: %s", c.raw)
	}
	// Cancelled and never placed: the second delete removes the record,
	// and the audit log keeps its history.
	audits := h.count("audit_log")
	d := h.do("alice", "DELETE", "/api/v1/runnables/team-a/r", "", nil).want(t, http.StatusOK)
	if d.str("status", "phase") != "Cancelled" || !strings.Contains(d.str("status", "message"), "deleted") {
		t.Fatalf("after delete: %s", d.raw)
	}
	if h.count("audit_log") != audits+1 || h.count("runnables") != 0 {
		t.Fatalf("delete of an ended runnable: %d audit entries (want %d), %d runnables left", h.count("audit_log"), audits+1, h.count("runnables"))
	}
	h.get("alice", "/api/v1/runnables/team-a/r").want(t, http.StatusNotFound)
	h.do("alice", "DELETE", "/api/v1/runnables/team-a/r", "", nil).want(t, http.StatusNotFound)
	hist := h.get("admin", "/api/v1/history?kind=Runnable&name=r").want(t, http.StatusOK).items()
	if n := len(hist); n != 3 || hist[n-1]["action"] != "delete" || hist[n-1]["outcome"] != "Removed" {
		t.Fatalf("history of a removed runnable: %v", hist)
	}
	h.do("alice", "DELETE", "/api/v1/runnables/team-a/missing", "", nil).want(t, http.StatusNotFound)
	// The override is refused for a runnable that waits for nothing.
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "q", "true")).want(t, http.StatusAccepted)
	h.do("alice", "POST", "/api/v1/runnables/team-a/q/failover", "", nil).want(t, http.StatusUnprocessableEntity)
	h.do("alice", "POST", "/api/v1/runnables/team-a/q/failover?confirmStopped=true", "", nil).want(t, http.StatusConflict)
	h.do("bob", "POST", "/api/v1/runnables/team-a/q/failover?confirmStopped=true", "", nil).want(t, http.StatusForbidden)
}

func testListPagination(t *testing.T, h *harness) {
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("job-%d", i)
		want = append(want, name)
		h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", name, "true")).want(t, http.StatusAccepted)
	}
	h.yaml("admin", "POST", "/api/v1/runnables", runnableYAML("team-c", "elsewhere", "true")).want(t, http.StatusAccepted)
	var got []string
	cont := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		q := url.Values{"namespace": {"team-a"}, "limit": {"3"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		page := h.get("bob", "/api/v1/runnables?"+q.Encode()).want(t, http.StatusOK)
		for _, it := range page.items() {
			got = append(got, it["metadata"].(map[string]any)["name"].(string))
		}
		if cont = page.str("continue"); cont == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged list %v, want %v", got, want)
	}
	if all := h.get("admin", "/api/v1/runnables").want(t, http.StatusOK).items(); len(all) != 8 {
		t.Fatalf("admin lists %d runnables across namespaces, want 8", len(all))
	}
	if q := h.get("bob", "/api/v1/runnables?phase=Queued&namespace=team-a").want(t, http.StatusOK).items(); len(q) != 7 {
		t.Fatalf("phase filter: %d", len(q))
	}
	// A phase that does not exist is an error that lists the phases, not
	// an empty list.
	if bad := h.get("bob", "/api/v1/runnables?phase=Runing&namespace=team-a").want(t, http.StatusBadRequest); !strings.Contains(bad.str("message"), "Running") {
		t.Fatalf("unknown phase: %s", bad.raw)
	}
	h.get("bob", "/api/v1/runnables?namespace=team-a&continue=garbage").want(t, http.StatusBadRequest)
}

// endpoints of every family, for the 401 and 403 tables.
var endpoints = []struct{ method, path, body string }{
	{"POST", "/api/v1/runnables", runnableYAML("team-a", "x", "true")},
	{"GET", "/api/v1/runnables?namespace=team-a", ""},
	{"GET", "/api/v1/runnables/team-a/x", ""},
	{"DELETE", "/api/v1/runnables/team-a/x", ""},
	{"POST", "/api/v1/runnables/team-a/x/approve", ""},
	{"POST", "/api/v1/runnables/team-a/x/reject", ""},
	{"PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v")},
	{"GET", "/api/v1/deployables?namespace=team-a", ""},
	{"GET", "/api/v1/deployables/team-a/cfg", ""},
	{"DELETE", "/api/v1/deployables/team-a/cfg", ""},
	{"POST", "/api/v1/clusters", clusterYAML("c1", "token-1")},
	{"PUT", "/api/v1/clusters/c1", clusterYAML("c1", "token-1")},
	{"DELETE", "/api/v1/clusters/c1", ""},
	{"GET", "/api/v1/history", ""},
	{"GET", "/api/v1/history/verify", ""},
	{"POST", "/api/v1/drills", "target: {kind: dc, name: dc1}\ndryRun: true\n"},
	{"POST", "/api/v1/drills", "target: {kind: dc, name: dc1}\nforce: true\n"},
	{"GET", "/api/v1/drills", ""},
	{"GET", "/api/v1/drills/1", ""},
	{"POST", "/api/v1/drills/1/end", "moveBack: true\n"},
}

func testUnauthenticated(t *testing.T, h *harness) {
	before := h.counts()
	for _, e := range endpoints {
		for _, auth := range []string{"", "Bearer not-a-token", "Basic YWRtaW46YWRtaW4="} {
			req, _ := http.NewRequestWithContext(t.Context(), e.method, h.url+e.path, strings.NewReader(e.body))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			req.Header.Set("Content-Type", "application/yaml")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: status %d, want 401", e.method, e.path, auth, resp.StatusCode)
			}
		}
	}
	h.get("", "/api/v1/clusters").want(t, http.StatusUnauthorized)
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("unauthenticated requests changed the database: %v -> %v", before, after)
	}
}

func testForbidden(t *testing.T, h *harness) {
	// Objects for the read and decide endpoints to find.
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "x", "true")).want(t, http.StatusAccepted)
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v")).want(t, http.StatusCreated)
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("c1", "token-1")).want(t, http.StatusCreated)
	before := h.counts()
	for _, e := range endpoints {
		r := h.yaml("mallory", e.method, e.path, e.body)
		if r.code != http.StatusForbidden {
			t.Errorf("mallory %s %s: status %d, want 403: %s", e.method, e.path, r.code, r.raw)
		}
	}
	// A viewer reads but does not write; an editor does not touch clusters
	// or decide approvals.
	for _, e := range []struct{ user, method, path, body string }{
		{"bob", "POST", "/api/v1/runnables", runnableYAML("team-a", "other", "true")},
		{"bob", "DELETE", "/api/v1/runnables/team-a/x", ""},
		{"bob", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "w")},
		{"bob", "POST", "/api/v1/runnables/team-a/x/approve", ""},
		{"bob", "GET", "/api/v1/runnables?namespace=team-b", ""},
		{"bob", "GET", "/api/v1/runnables", ""},
		{"bob", "GET", "/api/v1/history", ""},
		{"alice", "POST", "/api/v1/clusters", clusterYAML("c2", "token-2")},
		{"alice", "DELETE", "/api/v1/clusters/c1", ""},
		{"alice", "POST", "/api/v1/drills?dryRun=All", "target: {kind: dc, name: dc1}\n"},
		{"alice", "POST", "/api/v1/runnables/team-a/x/approve", ""},
		{"alice", "POST", "/api/v1/runnables", runnableYAML("team-c", "z", "true")},
	} {
		if r := h.yaml(e.user, e.method, e.path, e.body); r.code != http.StatusForbidden {
			t.Errorf("%s %s %s: status %d, want 403: %s", e.user, e.method, e.path, r.code, r.raw)
		}
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("forbidden requests changed the database: %v -> %v", before, after)
	}
	// What they may do, they can.
	h.get("bob", "/api/v1/runnables/team-a/x").want(t, http.StatusOK)
	h.get("bob", "/api/v1/history?namespace=team-a").want(t, http.StatusOK)
	h.get("mallory", "/api/v1/clusters").want(t, http.StatusOK)
}

func testFourEyesRunnable(t *testing.T, h *harness) {
	sub := h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "payroll", "true")).want(t, http.StatusAccepted)
	if sub.str("status", "phase") != "PendingApproval" {
		t.Fatalf("phase %q, want PendingApproval", sub.str("status", "phase"))
	}
	if h.count("outbox") != 0 {
		t.Fatal("a runnable waiting for approval was sent to the submitters")
	}
	h.do("dave", "POST", "/api/v1/runnables/team-b/payroll/approve", "", nil).want(t, http.StatusForbidden) // not an approver
	h.do("bob", "POST", "/api/v1/runnables/team-b/payroll/approve", "", nil).want(t, http.StatusForbidden)  // no role there

	// alice is an approver in team-b, but did not submit this one: she may.
	// First, one she submitted herself she may not approve.
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-b", "own", "true")).want(t, http.StatusAccepted)
	own := h.decide("alice", "/api/v1/runnables/team-b/own", "approve").want(t, http.StatusForbidden)
	if !strings.Contains(own.str("message"), "cannot also decide") {
		t.Fatalf("self-approval answer: %s", own.raw)
	}

	ok := h.decide("carol", "/api/v1/runnables/team-b/payroll", "approve").want(t, http.StatusOK)
	if ok.str("status", "phase") != "Queued" || ok.str("status", "approvedBy") != "carol" {
		t.Fatalf("after approval: %s", ok.raw)
	}
	h.do("carol", "POST", "/api/v1/runnables/team-b/payroll/approve?resourceVersion="+sub.str("metadata", "resourceVersion"), "", nil).want(t, http.StatusConflict)
	rej := h.decide("carol", "/api/v1/runnables/team-b/own", "reject").want(t, http.StatusOK)
	if rej.str("status", "phase") != "Rejected" {
		t.Fatalf("after rejection: %s", rej.raw)
	}
	ids := h.submissions(1)
	if len(ids) != 1 {
		t.Fatalf("stream got %v, want only the approved runnable", ids)
	}
	hist := h.get("admin", "/api/v1/history?namespace=team-b").want(t, http.StatusOK).items()
	var got []string
	for _, e := range hist {
		got = append(got, fmt.Sprintf("%v %v %v", e["actor"], e["action"], e["outcome"]))
	}
	want := []string{"dave create PendingApproval", "alice create PendingApproval", "carol approve Queued", "carol reject Rejected"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}

func testFourEyesDeployable(t *testing.T, h *harness) {
	p := h.yaml("dave", "PUT", "/api/v1/deployables/team-b/cfg", configMapDeployable("team-b", "cfg", "v1")).want(t, http.StatusCreated)
	if p.str("status", "phase") != "PendingApproval" || p.body["status"].(map[string]any)["generation"] != nil {
		t.Fatalf("pending deployable: %s", p.raw)
	}
	h.do("dave", "POST", "/api/v1/deployables/team-b/cfg/approve", "", nil).want(t, http.StatusForbidden)
	a := h.decide("carol", "/api/v1/deployables/team-b/cfg", "approve").want(t, http.StatusOK)
	if a.str("status", "phase") != "Active" || a.body["status"].(map[string]any)["generation"] != float64(1) {
		t.Fatalf("approved deployable: %s", a.raw)
	}
	// An update waits too, and the live spec stays as it was meanwhile.
	h.yaml("dave", "PUT", "/api/v1/deployables/team-b/cfg", configMapDeployable("team-b", "cfg", "v2")).want(t, http.StatusOK)
	live := h.get("dave", "/api/v1/deployables/team-b/cfg").want(t, http.StatusOK)
	if !strings.Contains(string(live.raw), `"v1"`) || live.str("status", "phase") != "PendingApproval" {
		t.Fatalf("live spec changed before approval: %s", live.raw)
	}
	h.decide("carol", "/api/v1/deployables/team-b/cfg", "reject").want(t, http.StatusOK)
	after := h.get("dave", "/api/v1/deployables/team-b/cfg").want(t, http.StatusOK)
	if !strings.Contains(string(after.raw), `"v1"`) || after.str("status", "phase") != "Active" {
		t.Fatalf("after rejecting the update: %s", after.raw)
	}
}

func configMapDeployable(ns, name, value string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: %s, namespace: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: %s}
    data: {key: %q}
`, name, ns, name, value)
}

func testDeployables(t *testing.T, h *harness) {
	c := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v1")).want(t, http.StatusCreated)
	if c.body["status"].(map[string]any)["generation"] != float64(1) {
		t.Fatalf("created: %s", c.raw)
	}
	audits := h.count("audit_log")
	same := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v1")).want(t, http.StatusOK)
	if same.body["status"].(map[string]any)["generation"] != float64(1) || h.count("audit_log") != audits {
		t.Fatalf("an unchanged PUT bumped the generation or the audit log: %s", same.raw)
	}
	upd := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v2")).want(t, http.StatusOK)
	if upd.body["status"].(map[string]any)["generation"] != float64(2) {
		t.Fatalf("updated: %s", upd.raw)
	}
	mismatch := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/other", configMapDeployable("team-a", "cfg", "v2")).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(mismatch.raw), "metadata.name") {
		t.Fatalf("name mismatch answer: %s", mismatch.raw)
	}
	if n := len(h.get("bob", "/api/v1/deployables?namespace=team-a").want(t, http.StatusOK).items()); n != 1 {
		t.Fatalf("list has %d deployables", n)
	}
	h.do("alice", "DELETE", "/api/v1/deployables/team-a/cfg", "", nil).want(t, http.StatusOK)
	h.get("bob", "/api/v1/deployables/team-a/cfg").want(t, http.StatusNotFound)
	h.do("alice", "DELETE", "/api/v1/deployables/team-a/cfg", "", nil).want(t, http.StatusNotFound)
	// Re-creating a deleted one revives it with a new generation.
	again := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v3")).want(t, http.StatusOK)
	if again.body["status"].(map[string]any)["generation"] != float64(3) {
		t.Fatalf("revived: %s", again.raw)
	}
}

func clusterYAML(name, token string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {dc: dc1, tier: prod}
spec:
  kubeconfig: |
    apiVersion: v1
    kind: Config
    clusters:
    - name: c
      cluster: {server: "https://127.0.0.1:6443"}
    users:
    - name: u
      user: {token: %s}
    contexts:
    - name: c
      context: {cluster: c, user: u}
    current-context: c
`, name, token)
}

func testClusters(t *testing.T, h *harness) {
	c := h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "tok-1")).want(t, http.StatusCreated)
	if c.str("metadata", "labels", "tier") != "prod" || c.str("spec", "kubeconfig") != "" {
		t.Fatalf("registered: %s", c.raw)
	}
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "tok-1")).want(t, http.StatusConflict)
	upd := strings.Replace(clusterYAML("dc1-a", "tok-1"), "tier: prod", "tier: staging", 1)
	u := h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", upd).want(t, http.StatusOK)
	if u.str("metadata", "labels", "tier") != "staging" {
		t.Fatalf("updated: %s", u.raw)
	}
	// An update without kubeconfig keeps the stored one.
	noKC := "apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata: {name: dc1-a, labels: {tier: prod}}\nspec:\n  taints: [{key: maintenance, effect: NoSchedule}]\n"
	h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", noKC).want(t, http.StatusOK)
	var sealed []byte
	if err := h.raw.QueryRowContext(t.Context(), storetest.Rebind(h.dsn, "SELECT kubeconfig FROM clusters WHERE name = ?"), "dc1-a").Scan(&sealed); err != nil || len(sealed) == 0 {
		t.Fatalf("kubeconfig gone after an update without one: %v", err)
	}
	// What a GET answers, put back as it is (status, resourceVersion and
	// all, no kubeconfig), changes nothing and is not audited; the same
	// kubeconfig again neither.
	got := h.get("admin", "/api/v1/clusters/dc1-a").want(t, http.StatusOK)
	audits := h.count("audit_log")
	same := h.do("admin", "PUT", "/api/v1/clusters/dc1-a", "application/json", got.raw).want(t, http.StatusOK)
	h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", strings.Replace(strings.Replace(clusterYAML("dc1-a", "tok-1"),
		"labels: {dc: dc1, tier: prod}", "labels: {tier: prod}", 1), "kubeconfig:", "taints: [{key: maintenance, effect: NoSchedule}]\n  kubeconfig:", 1)).want(t, http.StatusOK)
	if n := h.count("audit_log"); n != audits || same.str("metadata", "resourceVersion") != got.str("metadata", "resourceVersion") {
		t.Fatalf("an identical PUT wrote: %d audit entries (was %d), resourceVersion %s (was %s)",
			n, audits, same.str("metadata", "resourceVersion"), got.str("metadata", "resourceVersion"))
	}
	// A resourceVersion that is no longer current is a conflict, and
	// changes nothing.
	stale := strings.Replace(string(got.raw), `"tier":"prod"`, `"tier":"dev"`, 1)
	h.do("admin", "PUT", "/api/v1/clusters/dc1-a", "application/json", []byte(strings.Replace(stale,
		`"resourceVersion":"`+got.str("metadata", "resourceVersion")+`"`, `"resourceVersion":"1"`, 1))).want(t, http.StatusConflict)
	if h.get("admin", "/api/v1/clusters/dc1-a").want(t, http.StatusOK).str("metadata", "labels", "tier") != "prod" {
		t.Fatal("a stale PUT changed the cluster")
	}
	h.do("admin", "PUT", "/api/v1/clusters/dc1-a", "application/json", []byte(stale)).want(t, http.StatusOK)
	list := h.get("mallory", "/api/v1/clusters").want(t, http.StatusOK)
	if len(list.items()) != 1 || strings.Contains(string(list.raw), "tok-1") {
		t.Fatalf("cluster list: %s", list.raw)
	}
	h.yaml("admin", "PUT", "/api/v1/clusters/nope", clusterYAML("nope", "t")).want(t, http.StatusNotFound)
	h.do("admin", "DELETE", "/api/v1/clusters/dc1-a", "", nil).want(t, http.StatusOK)
	h.get("admin", "/api/v1/clusters/dc1-a").want(t, http.StatusNotFound)
}

func testSecretsAtRest(t *testing.T, h *harness) {
	const kubeToken = "kubeconfig-token-d41d8cd98f00"
	const password = "hunter2-correct-horse"
	const other = "another-secret-value-42"
	otherB64 := base64.StdEncoding.EncodeToString([]byte(other))
	secrets := []string{kubeToken, password, other, otherB64}

	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", kubeToken)).want(t, http.StatusCreated)
	secret := fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: db-creds, namespace: team-a}
spec:
  template:
    apiVersion: v1
    kind: Secret
    metadata: {name: db-creds}
    type: Opaque
    stringData: {password: %s}
    data: {other: %s}
`, password, otherB64)
	put := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/db-creds", secret).want(t, http.StatusCreated)
	responses := [][]byte{put.raw,
		h.get("alice", "/api/v1/deployables/team-a/db-creds").raw,
		h.get("admin", "/api/v1/deployables").raw,
		h.get("admin", "/api/v1/clusters/dc1-a").raw,
		h.get("admin", "/api/v1/clusters").raw,
		h.get("admin", "/api/v1/history").raw,
	}
	for i, raw := range responses {
		if s := contains(raw, secrets...); s != "" {
			t.Errorf("API response %d holds secret %q: %s", i, s, raw)
		}
	}
	// Behind the API's back: every table, every column, as text.
	for _, table := range []string{"clusters", "deployables", "audit_log", "outbox"} {
		rows, err := h.raw.QueryContext(t.Context(), "SELECT * FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if s := contains([]byte(fmt.Sprint(v)), secrets...); s != "" {
					t.Errorf("%s.%s holds %q in clear", table, cols[i], s)
				}
				if b, ok := v.([]byte); ok {
					if s := contains(b, secrets...); s != "" {
						t.Errorf("%s.%s holds %q in clear", table, cols[i], s)
					}
				}
			}
		}
		rows.Close()
	}
	// The values are kept, sealed: the key opens them.
	var sealedSecret, sealedKC []byte
	if err := h.raw.QueryRowContext(t.Context(), storetest.Rebind(h.dsn, "SELECT secret FROM deployables WHERE name = ?"), "db-creds").Scan(&sealedSecret); err != nil {
		t.Fatal(err)
	}
	if err := h.raw.QueryRowContext(t.Context(), storetest.Rebind(h.dsn, "SELECT kubeconfig FROM clusters WHERE name = ?"), "dc1-a").Scan(&sealedKC); err != nil {
		t.Fatal(err)
	}
	plain, err := h.sealer.Open(sealedSecret, "deployable/team-a/db-creds")
	if err != nil || !strings.Contains(string(plain), password) || !strings.Contains(string(plain), otherB64) {
		t.Fatalf("sealed Secret values: %q, %v", plain, err)
	}
	kc, err := h.sealer.Open(sealedKC, "cluster/dc1-a/kubeconfig")
	if err != nil || !strings.Contains(string(kc), kubeToken) {
		t.Fatalf("sealed kubeconfig: %v", err)
	}
	// A changed Secret value is a new generation, though the clear part is equal.
	changed := strings.Replace(secret, password, "new-password-value", 1)
	g := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/db-creds", changed).want(t, http.StatusOK)
	if g.body["status"].(map[string]any)["generation"] != float64(2) {
		t.Fatalf("changing a Secret value did not bump the generation: %s", g.raw)
	}
}

func testTamperDetected(t *testing.T, h *harness) {
	for i := range 4 {
		h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", fmt.Sprintf("r%d", i), "true")).want(t, http.StatusAccepted)
	}
	// The api publishes the chain's head to the stream within moments. The
	// forgery below rewrites entries 3 and 4, which only an anchor of seq 4
	// or later can show: entries past the newest anchor are covered by the
	// chain alone. So wait for that anchor, not merely for one beyond the
	// empty chain's (the commits of one second share an anchor, and the
	// first may cover only the first entries).
	sandboxtest.Eventually(t, streamtest.Timeout, "an anchor of the chain's last entry published", func(context.Context) error {
		v := h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK)
		if v.body["ok"] != true || v.body["entries"] != float64(4) {
			t.Fatalf("intact chain: %s", v.raw)
		}
		if seq := newestAnchoredSeq(t, v); seq < 4 {
			return fmt.Errorf("the newest anchor covers seq %d: %s", seq, v.raw)
		}
		return nil
	})

	// A forger with the database's password rewrites entry 3 and every
	// later one with recomputed hashes, and moves the head along: the
	// chain verifies on its own, not against the published head.
	var entries []*audit.Entry
	if err := h.store.Read(t.Context(), func(tx *store.Tx) (err error) {
		entries, err = tx.Audit().List(t.Context(), store.AuditFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	storetest.ForgeAuditTail(t, h.dsn, entries, 3)
	v := h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK)
	if v.body["ok"] != false || !strings.HasPrefix(fmt.Sprint(v.body["reason"]), "rewritten") {
		t.Fatalf("forged chain: %s", v.raw)
	}

	// A plain edit breaks the chain itself.
	if _, err := h.raw.ExecContext(t.Context(), storetest.Rebind(h.dsn, "UPDATE audit_log SET actor = ? WHERE seq = ?"), "mallory", 2); err != nil {
		t.Fatal(err)
	}
	v = h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK)
	if v.body["ok"] != false || v.body["brokenSeq"] != float64(2) || v.body["reason"] != "hash mismatch" {
		t.Fatalf("tampered chain: %s", v.raw)
	}

	// Without the stream the chain is still walked, and the answer fails
	// on what could not be checked as well.
	h.nats.Stop()
	v = h.get("admin", "/api/v1/history/verify").want(t, http.StatusOK)
	if v.body["ok"] != false || v.body["brokenSeq"] != float64(2) || v.body["record"].(map[string]any)["ok"] != false {
		t.Fatalf("verify without the stream: %s", v.raw)
	}
}

// newestAnchoredSeq is the seq of the newest anchor a verification
// answer names (record.newest), or -1 when it names none.
func newestAnchoredSeq(t *testing.T, v response) int64 {
	t.Helper()
	var out struct {
		Record struct {
			Newest *audit.SignedAnchor `json:"newest"`
		} `json:"record"`
	}
	if err := json.Unmarshal(v.raw, &out); err != nil {
		t.Fatalf("verification answer: %v: %s", err, v.raw)
	}
	if out.Record.Newest == nil {
		return -1
	}
	var a audit.Anchor
	if err := json.Unmarshal(out.Record.Newest.Anchor, &a); err != nil {
		t.Fatalf("newest anchor: %v: %s", err, v.raw)
	}
	return a.Seq
}

func testBadInput(t *testing.T, h *harness) {
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "exists", "true")).want(t, http.StatusAccepted)
	before := h.counts()
	valid := runnableYAML("team-a", "fresh", "true")
	big := strings.Replace(valid, "command: [sh, -c, \"true\"]", "command: [sh, -c, \""+strings.Repeat("x", 1<<20)+"\"]", 1)
	past := strings.Replace(valid, "spec:\n  template:", "spec:\n  deadline: \"2020-01-01T00:00:00Z\"\n  template:", 1)
	badCEL := strings.Replace(valid, "spec:\n  template:", "spec:\n  failover:\n    mutations:\n    - when: \"preserved[\"\n      path: spec.x\n      value: \"'a'\"\n  template:", 1)
	badSelector := strings.Replace(valid, "spec:\n  template:", "spec:\n  placement:\n    clusterAffinity:\n      labelSelector:\n        matchExpressions: [{key: tier, operator: Around}]\n  template:", 1)
	for _, c := range []struct {
		name, contentType, body string
		code                    int
		field                   string
	}{
		{"malformed JSON", "application/json", `{"kind": "Runnable",`, 400, ""},
		{"not YAML", "application/yaml", "kind: [Runnable\n  :", 400, ""},
		{"empty body", "application/json", "", 400, ""},
		{"a list, not an object", "application/json", `[1,2]`, 400, ""},
		{"unknown field", "application/yaml", strings.Replace(valid, "kind: Runnable", "kind: Runnable\nspecc: {}", 1), 422, "specc"},
		{"unknown spec field", "application/yaml", strings.Replace(valid, "spec:\n  template:", "spec:\n  niceness: 3\n  template:", 1), 422, "spec.niceness"},
		{"wrong apiVersion", "application/yaml", strings.Replace(valid, "purser.io/v1alpha1", "purser.io/v9", 1), 422, "apiVersion"},
		{"template without kind", "application/yaml", strings.Replace(valid, "    kind: Job\n", "", 1), 422, "spec.template.kind"},
		{"bad name", "application/yaml", strings.Replace(valid, "name: fresh", "name: Fresh_Report", 1), 422, "metadata.name"},
		{"no namespace", "application/yaml", strings.Replace(valid, "  namespace: team-a\n", "", 1), 422, "metadata.namespace"},
		{"deadline in the past", "application/yaml", past, 422, "spec.deadline"},
		{"CEL does not compile", "application/yaml", badCEL, 422, "spec.failover.mutations[0].when"},
		{"selector does not parse", "application/yaml", badSelector, 422, "spec.placement.clusterAffinity.labelSelector"},
		{"too large", "application/yaml", big, 413, ""},
		{"media type", "text/plain", valid, 415, ""},
	} {
		r := h.do("alice", "POST", "/api/v1/runnables", c.contentType, []byte(c.body))
		if r.code != c.code {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.code, c.code, r.raw)
			continue
		}
		if r.str("message") == "" || r.body["code"] != float64(c.code) {
			t.Errorf("%s: error body lacks code or message: %.300s", c.name, r.raw)
		}
		if c.field != "" && !strings.Contains(string(r.raw), `"field":"`+c.field) {
			t.Errorf("%s: no detail for field %s: %.500s", c.name, c.field, r.raw)
		}
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("bad input changed the database: %v -> %v", before, after)
	}
}

func testHealthAndMetrics(t *testing.T, h *harness) {
	h.get("", "/healthz").want(t, http.StatusOK)
	h.get("", "/readyz").want(t, http.StatusOK)
	h.get("bob", "/api/v1/runnables?namespace=team-a").want(t, http.StatusOK)
	m := h.get("", "/metrics").want(t, http.StatusOK)
	if !strings.Contains(string(m.raw), `purser_api_requests_total{code="200",route="GET /api/v1/runnables"} 1`) ||
		!strings.Contains(string(m.raw), "purser_api_request_duration_seconds_bucket") {
		t.Fatalf("metrics lack request counts or latencies:\n%s", m.raw)
	}
	// The stream going away makes the API not ready, and back.
	h.nats.Stop()
	// Anyone learns the verdict; only an administrator what failed.
	if r := h.get("", "/readyz").want(t, http.StatusServiceUnavailable); r.str("status") != "not ready" || strings.Contains(string(r.raw), "stream") {
		t.Errorf("/readyz without a token says more than the verdict: %s", r.raw)
	}
	if r := h.get("bob", "/readyz").want(t, http.StatusServiceUnavailable); strings.Contains(string(r.raw), "stream") {
		t.Errorf("/readyz to a viewer says more than the verdict: %s", r.raw)
	}
	if r := h.get("admin", "/readyz").want(t, http.StatusServiceUnavailable); r.str("database") != "ok" || r.str("stream") == "ok" || r.str("stream") == "" {
		t.Errorf("/readyz to an administrator does not say what failed: %s", r.raw)
	}
	h.nats.Restart()
	h.waitReady(t, "ready again after the stream came back")
}

// TestDatabaseDown cuts the network between the API and PostgreSQL: the
// API answers 503 with Retry-After, and nothing is half written.
func TestDatabaseDown(t *testing.T) {
	dsn := storetest.NewPostgresDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := sandbox.NewProxy("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	h := newHarnessDSN(t, u.String())
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "before", "true")).want(t, http.StatusAccepted)

	proxy.Cut()
	down := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "during", "true")).want(t, http.StatusServiceUnavailable)
	if down.header.Get("Retry-After") == "" || down.str("reason") != "ServiceUnavailable" {
		t.Fatalf("503 without Retry-After or reason: %v %s", down.header, down.raw)
	}
	h.get("bob", "/api/v1/runnables/team-a/before").want(t, http.StatusServiceUnavailable)
	h.get("", "/readyz").want(t, http.StatusServiceUnavailable)

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	h.waitReady(t, "API ready again")
	h.get("bob", "/api/v1/runnables/team-a/during").want(t, http.StatusNotFound)
	if n := h.count("audit_log"); n != 1 {
		t.Fatalf("%d audit entries after the outage, want 1", n)
	}
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "during", "true")).want(t, http.StatusAccepted)
}

func testInventory(t *testing.T, h *harness) {
	ctx := t.Context()
	now := time.Now().UTC()
	old := now.Add(-10 * time.Minute)
	row := func(cluster, ns, name, health string, l map[string]string) store.InventoryRow {
		return store.InventoryRow{Cluster: cluster, APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, UID: cluster + "-" + name,
			ResourceVersion: "7", Labels: l, Health: health, ObservedAt: old, Object: []byte(`{"metadata":{"name":"` + name + `"},"data":{"k":"v"}}`)}
	}
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{
			row("dc1-a", "team-a", "web", "Healthy", map[string]string{"app": "web", "tier": "prod"}),
			row("dc1-a", "team-a", "db", "Unhealthy", map[string]string{"app": "db", "tier": "prod"}),
			row("dc2-a", "team-a", "web", "Healthy", map[string]string{"app": "web"}),
			row("dc2-a", "team-b", "secret-stuff", "Healthy", nil),
			row("dc1-a", "team-a", "kube-root-ca.crt", "", nil), // made by the cluster itself
		}); err != nil {
			return err
		}
		if err := tx.Agents().Touch(ctx, "dc1-a", nil, &now, &now); err != nil {
			return err
		}
		if err := tx.Agents().RecordHeartbeat(ctx, "dc1-a", now, []byte(`{"connected":true,"synced":true}`), true); err != nil {
			return err
		}
		// A cluster whose agent heartbeats but cannot reach its
		// kube-apiserver: its records are not fresh, whatever the beat.
		if err := tx.Agents().Touch(ctx, "dc2-a", nil, &old, &old); err != nil {
			return err
		}
		if err := tx.Agents().RecordHeartbeat(ctx, "dc2-a", old, []byte(`{"connected":true,"synced":true}`), true); err != nil {
			return err
		}
		return tx.Agents().RecordHeartbeat(ctx, "dc2-a", now, []byte(`{"connected":false,"synced":true,"error":"connection refused"}`), false)
	}); err != nil {
		t.Fatal(err)
	}
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "t1")).want(t, http.StatusCreated)
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc2-a", "t2")).want(t, http.StatusCreated)

	names := func(r response) string {
		var out []string
		for _, it := range r.items() {
			out = append(out, fmt.Sprintf("%v/%v", it["cluster"], it["name"]))
		}
		return strings.Join(out, ",")
	}
	for q, want := range map[string]string{
		"namespace=team-a":                                  "dc1-a/db,dc1-a/web,dc2-a/web",
		"namespace=team-a&cluster=dc2-a":                    "dc2-a/web",
		"namespace=team-a&labelSelector=tier%3Dprod":        "dc1-a/db,dc1-a/web",
		"namespace=team-a&labelSelector=app+in+(web),!tier": "dc2-a/web",
		"namespace=team-a&health=Unhealthy":                 "dc1-a/db",
		"namespace=team-a&name=web&kind=ConfigMap":          "dc1-a/web,dc2-a/web",
	} {
		if got := names(h.get("bob", "/api/v1/inventory?"+q).want(t, http.StatusOK)); got != want {
			t.Errorf("%s: got %s, want %s", q, got, want)
		}
	}
	full := h.get("bob", "/api/v1/inventory?namespace=team-a&cluster=dc1-a").want(t, http.StatusOK)
	if !strings.Contains(string(full.raw), `"object"`) {
		t.Fatalf("objects missing: %s", full.raw)
	}
	meta := h.get("bob", "/api/v1/inventory?namespace=team-a&fields=meta").want(t, http.StatusOK)
	if strings.Contains(string(meta.raw), `"object"`) {
		t.Fatalf("fields=meta returned objects: %s", meta.raw)
	}
	fresh, _ := meta.body["clusters"].([]any)
	if len(fresh) != 2 {
		t.Fatalf("freshness block: %s", meta.raw)
	}
	c1, c2 := fresh[0].(map[string]any), fresh[1].(map[string]any)
	if c1["cluster"] != "dc1-a" || c1["ready"] != true || c1["lastEvent"] == nil || c2["ready"] != false || c2["lastSnapshot"] == nil {
		t.Fatalf("freshness: %v %v", c1, c2)
	}
	f1, f2 := c1["freshness"].(map[string]any), c2["freshness"].(map[string]any)
	if f1["fresh"] != true || f1["reason"] != v1alpha1.FreshAgentReporting || f1["staleAfterSeconds"] != float64(v1alpha1.AgentFreshSeconds) ||
		f2["fresh"] != false || f2["reason"] != v1alpha1.FreshKubeAPIUnreachable || strings.Contains(string(meta.raw), "connection refused") {
		t.Fatalf("freshness judgements: %v | %v; a tenant is told the reason, not the transport's error", f1, f2)
	}
	// The admin is told the error too.
	if a := h.get("admin", "/api/v1/inventory?namespace=team-a&fields=meta").want(t, http.StatusOK); !strings.Contains(string(a.raw), "connection refused") {
		t.Fatalf("the admin's freshness lost the agent's error: %s", a.raw)
	}
	// seenAt: the records, unchanged since old, were seen as they are at
	// the last current heartbeat of their cluster: now for dc1-a, old
	// for dc2-a, whose agent has not reached its kube-apiserver since.
	for _, it := range meta.items() {
		seen, _ := time.Parse(time.RFC3339Nano, it["seenAt"].(string))
		want := now
		if it["cluster"] == "dc2-a" {
			want = old
		}
		if !seen.Equal(want.Truncate(time.Microsecond)) {
			t.Errorf("%v/%v seenAt %v, want %v", it["cluster"], it["name"], seen, want)
		}
		if _, ok := it["health"]; ok && it["name"] == "kube-root-ca.crt" {
			t.Errorf("a ConfigMap without health shows one: %v", it)
		}
	}
	// System objects only when asked.
	if got := names(h.get("bob", "/api/v1/inventory?namespace=team-a&cluster=dc1-a&system=true").want(t, http.StatusOK)); got != "dc1-a/db,dc1-a/kube-root-ca.crt,dc1-a/web" {
		t.Errorf("system=true: %s", got)
	}
	h.get("bob", "/api/v1/inventory?namespace=team-a&system=yes").want(t, http.StatusBadRequest)
	// Pages.
	p1 := h.get("bob", "/api/v1/inventory?namespace=team-a&limit=2").want(t, http.StatusOK)
	p2 := h.get("bob", "/api/v1/inventory?namespace=team-a&limit=2&continue="+url.QueryEscape(p1.str("continue"))).want(t, http.StatusOK)
	if names(p1)+","+names(p2) != "dc1-a/db,dc1-a/web,dc2-a/web" || p2.str("continue") != "" {
		t.Fatalf("pages %s | %s", names(p1), names(p2))
	}
	// Authorization and bad input.
	h.get("bob", "/api/v1/inventory").want(t, http.StatusForbidden)
	h.get("bob", "/api/v1/inventory?namespace=team-b").want(t, http.StatusForbidden)
	h.get("bob", "/api/v1/inventory?namespace=team-a&labelSelector=tier%3D%3D%3D").want(t, http.StatusBadRequest)
	h.get("bob", "/api/v1/inventory?namespace=team-a&health=Sick").want(t, http.StatusBadRequest)
	h.get("bob", "/api/v1/inventory?namespace=team-a&fields=all").want(t, http.StatusBadRequest)
	if n := len(h.get("admin", "/api/v1/inventory").want(t, http.StatusOK).items()); n != 4 { // kube-root-ca.crt left out
		t.Fatalf("admin sees %d records, want 4", n)
	}
	// The cluster answers carry the same observations.
	c := h.get("mallory", "/api/v1/clusters/dc1-a").want(t, http.StatusOK)
	st := c.body["status"].(map[string]any)
	agent := st["agent"].(map[string]any)
	if st["inventory"].(map[string]any)["objects"] != float64(3) || agent["lastHeartbeat"] == nil ||
		agent["freshness"].(map[string]any)["fresh"] != true || agent["kubeAPI"].(map[string]any)["connected"] != true ||
		st["state"] != v1alpha1.ClusterUnknown {
		t.Fatalf("cluster status: %s", c.raw)
	}
	c = h.get("mallory", "/api/v1/clusters/dc2-a").want(t, http.StatusOK)
	if f := c.body["status"].(map[string]any)["agent"].(map[string]any)["freshness"].(map[string]any); f["reason"] != v1alpha1.FreshKubeAPIUnreachable {
		t.Fatalf("dc2-a freshness: %s", c.raw)
	}
}

func testInventoryWatch(t *testing.T, h *harness) {
	ctx := t.Context()
	now := time.Now().UTC()
	row := func(name, rv, health string) store.InventoryRow {
		return store.InventoryRow{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name, UID: "u-" + name,
			ResourceVersion: rv, Labels: map[string]string{"app": "web"}, Health: health, ObservedAt: now}
	}
	write := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := h.store.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{row("a", "1", "Healthy")})
		return err
	})

	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/api/v1/inventory?watch=true&namespace=team-a&labelSelector=app%3Dweb", http.NoBody)
	req.Header.Set("Authorization", "Bearer "+h.tokens["bob"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("watch answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var ev struct {
					Item struct{ Name, ResourceVersion, Health string } `json:"item"`
				}
				if err := json.Unmarshal([]byte(v), &ev); err != nil {
					// next reports it as an event it did not want.
					events <- fmt.Sprintf("%s undecodable %q: %v", typ, v, err)
					continue
				}
				events <- fmt.Sprintf("%s %s %s %s", typ, ev.Item.Name, ev.Item.ResourceVersion, ev.Item.Health)
			}
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no event; want %q", want)
		}
	}
	next("ADDED a 1 Healthy")
	write(func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{row("b", "2", "Healthy")})
		return err
	})
	next("ADDED b 2 Healthy")
	write(func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{row("a", "3", "Unhealthy")})
		return err
	})
	next("MODIFIED a 3 Unhealthy")
	write(func(tx *store.Tx) error {
		_, err := tx.Inventory().Delete(ctx, []store.InventoryTombstone{{Cluster: "dc1-a", UID: "u-b", ResourceVersion: "4", DeletedAt: time.Now()}})
		return err
	})
	next("DELETED b 2 Healthy")

	// A watch is authorized like a list.
	h.get("bob", "/api/v1/inventory?watch=true&namespace=team-b").want(t, http.StatusForbidden)
}

// Lists say how many attempts each runnable had, as the single answer
// does, and a cluster's answer counts the runnables on it by phase.
func testAttemptCounts(t *testing.T, h *harness) {
	ctx := t.Context()
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "t1")).want(t, http.StatusCreated)
	for _, name := range []string{"moved", "fresh"} {
		h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", name, "true")).want(t, http.StatusAccepted)
	}
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		r, err := tx.Runnables().Get(ctx, "team-a", "moved")
		if err != nil {
			return err
		}
		r.Phase, r.Cluster = string(v1alpha1.PhaseRunning), "dc1-a"
		if err := tx.Runnables().Update(ctx, r); err != nil {
			return err
		}
		ended := time.Now()
		if err := tx.Attempts().Put(ctx, &store.Attempt{RunnableUID: r.UID, Number: 1, Cluster: "dc2-a", StartedAt: ended.Add(-time.Minute),
			EndedAt: &ended, Result: "Evicted", Reason: "ClusterUnreachable"}); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, &store.Attempt{RunnableUID: r.UID, Number: 2, Cluster: "dc1-a", StartedAt: ended})
	}); err != nil {
		t.Fatal(err)
	}
	counts := map[string]any{}
	for _, it := range h.get("alice", "/api/v1/runnables?namespace=team-a").want(t, http.StatusOK).items() {
		counts[it["metadata"].(map[string]any)["name"].(string)] = it["status"].(map[string]any)["attemptCount"]
	}
	if counts["moved"] != float64(2) || counts["fresh"] != nil {
		t.Errorf("attempt counts in the list: %v", counts)
	}
	if got := h.get("alice", "/api/v1/runnables/team-a/moved").want(t, http.StatusOK); got.body["status"].(map[string]any)["attemptCount"] != float64(2) {
		t.Errorf("attempt count of one: %s", got.raw)
	}
	c := h.get("alice", "/api/v1/clusters/dc1-a").want(t, http.StatusOK)
	if byPhase := c.body["status"].(map[string]any)["runnables"].(map[string]any); byPhase["Running"] != float64(1) || len(byPhase) != 1 {
		t.Errorf("runnables on dc1-a: %s", c.raw)
	}
}
