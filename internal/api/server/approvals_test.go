package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestApprovalsBindToReview: an approver sees the pending change beside
// the live spec, and a decision names the version reviewed; a change made
// between the review and the decision is refused (409) and changes
// nothing. Reviving a deleted deployable in an approval namespace is a
// pending change too.
func TestApprovalsBindToReview(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			t.Run("Deployable", func(t *testing.T) { testDeployableApprovalBinds(t, h) })
			t.Run("Runnable", func(t *testing.T) { testRunnableApprovalBinds(t, h) })
			t.Run("Revive", func(t *testing.T) { testReviveNeedsApproval(t, h) })
			t.Run("AuthorLostTheRight", func(t *testing.T) { testApprovalOfAnAuthorWhoLostTheRight(t, h) })
			t.Run("RemovedAndMadeAgain", func(t *testing.T) { testApprovalOfARunnableMadeAgain(t, h) })
		})
	}
}

func testDeployableApprovalBinds(t *testing.T, h *harness) {
	const path = "/api/v1/deployables/team-b/swap"
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "swap", "v1")).want(t, http.StatusCreated)
	h.decide("carol", path, "approve").want(t, http.StatusOK)

	// dave proposes v2; carol reads it.
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "swap", "v2")).want(t, http.StatusOK)
	reviewed := h.get("carol", path).want(t, http.StatusOK)
	pc, _ := reviewed.body["status"].(map[string]any)["pendingChange"].(map[string]any)
	if pc == nil || pc["author"] != "dave" || pc["time"] == nil || !strings.Contains(fmt.Sprint(pc["spec"]), "v2") {
		t.Fatalf("the pending change is not shown as it waits: %s", reviewed.raw)
	}
	if !strings.Contains(fmt.Sprint(reviewed.body["spec"]), "v1") {
		t.Fatalf("the live spec is not beside it: %s", reviewed.raw)
	}
	rv := reviewed.str("status", "pendingChange", "resourceVersion")

	// dave swaps in v3 before carol decides: her approval of v2 is refused.
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "swap", "v3")).want(t, http.StatusOK)
	before := h.counts()
	for _, verb := range []string{"approve", "reject"} {
		r := h.do("carol", "POST", path+"/"+verb+"?resourceVersion="+rv, "", nil).want(t, http.StatusConflict)
		if !strings.Contains(r.str("message"), "changed since resourceVersion "+rv) {
			t.Errorf("%s of a moved change: %s", verb, r.raw)
		}
	}
	h.do("carol", "POST", path+"/approve", "", nil).want(t, http.StatusPreconditionRequired)
	h.do("carol", "POST", path+"/approve?resourceVersion=x", "", nil).want(t, http.StatusBadRequest)
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused decisions changed the database: %v -> %v", before, after)
	}
	live := h.get("carol", path).want(t, http.StatusOK)
	if !strings.Contains(fmt.Sprint(live.body["spec"]), "v1") || live.str("status", "phase") != "PendingApproval" {
		t.Fatalf("a refused approval changed the live spec: %s", live.raw)
	}
	// What she reviews now, she may approve.
	ok := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if !strings.Contains(fmt.Sprint(ok.body["spec"]), "v3") || ok.str("status", "phase") != "Active" {
		t.Fatalf("after approving v3: %s", ok.raw)
	}
	if ok.body["status"].(map[string]any)["pendingChange"] != nil {
		t.Fatalf("a pending change is still shown: %s", ok.raw)
	}
}

func testRunnableApprovalBinds(t *testing.T, h *harness) {
	const path = "/api/v1/runnables/team-b/report"
	sub := h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "report", "echo")).want(t, http.StatusAccepted)
	got := h.get("carol", path).want(t, http.StatusOK)
	if got.str("status", "pendingChange", "author") != "dave" ||
		got.str("status", "pendingChange", "resourceVersion") != sub.str("metadata", "resourceVersion") ||
		!strings.Contains(fmt.Sprint(got.body["status"].(map[string]any)["pendingChange"]), "echo") {
		t.Fatalf("pending runnable: %s", got.raw)
	}
	before := h.counts()
	h.do("carol", "POST", path+"/approve?resourceVersion=999", "", nil).want(t, http.StatusConflict)
	h.do("carol", "POST", path+"/approve", "", nil).want(t, http.StatusPreconditionRequired)
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused decisions changed the database: %v -> %v", before, after)
	}
	ok := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if ok.str("status", "phase") != "Queued" || ok.body["status"].(map[string]any)["pendingChange"] != nil {
		t.Fatalf("approved runnable: %s", ok.raw)
	}
}

func testReviveNeedsApproval(t *testing.T, h *harness) {
	const path = "/api/v1/deployables/team-b/gone"
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "gone", "old")).want(t, http.StatusCreated)
	h.decide("carol", path, "approve").want(t, http.StatusOK)
	h.do("dave", "DELETE", path, "", nil).want(t, http.StatusOK)
	h.decide("carol", path, "approve").want(t, http.StatusOK)
	h.get("dave", path).want(t, http.StatusNotFound)

	// Still being removed from the clusters (no syncer runs here): a PUT
	// asks to revive it, and the deletion stays until that is approved.
	revive := h.yaml("dave", "PUT", path, configMapDeployable("team-b", "gone", "new")).want(t, http.StatusOK)
	if revive.str("status", "phase") != "PendingApproval" {
		t.Fatalf("a revive went live without approval: %s", revive.raw)
	}
	var deletedAt any
	if err := h.raw.QueryRowContext(t.Context(), `SELECT deleted_at FROM deployables WHERE name = 'gone'`).Scan(&deletedAt); err != nil || deletedAt == nil {
		t.Fatalf("the tombstone was cleared before approval (deleted_at %v, %v)", deletedAt, err)
	}
	got := h.get("carol", path).want(t, http.StatusOK)
	if got.body["status"].(map[string]any)["pendingChange"].(map[string]any)["revive"] != true {
		t.Fatalf("the revive is not shown as one: %s", got.raw)
	}
	if items := h.get("carol", "/api/v1/deployables?namespace=team-b").want(t, http.StatusOK).items(); len(items) != 2 {
		t.Fatalf("the list shows %d deployables, want swap and the revive waiting for approval", len(items))
	}
	ok := h.decide("carol", path, "approve").want(t, http.StatusOK)
	if ok.str("status", "phase") != "Active" || !strings.Contains(fmt.Sprint(ok.body["spec"]), "new") {
		t.Fatalf("approved revive: %s", ok.raw)
	}
	if err := h.raw.QueryRowContext(t.Context(), `SELECT deleted_at FROM deployables WHERE name = 'gone'`).Scan(&deletedAt); err != nil || deletedAt != nil {
		t.Fatalf("an approved revive is still deleted (%v, %v)", deletedAt, err)
	}

	// Deleted again, then a revive asked and withdrawn by a DELETE: it
	// stays deleted, with nothing pending.
	h.do("dave", "DELETE", path, "", nil).want(t, http.StatusOK)
	h.decide("carol", path, "approve").want(t, http.StatusOK)
	h.yaml("dave", "PUT", path, configMapDeployable("team-b", "gone", "again")).want(t, http.StatusOK)
	h.do("dave", "DELETE", path, "", nil).want(t, http.StatusOK)
	h.get("carol", path).want(t, http.StatusNotFound)
	var pending any
	if err := h.raw.QueryRowContext(t.Context(), `SELECT deleted_at, pending FROM deployables WHERE name = 'gone'`).Scan(&deletedAt, &pending); err != nil || deletedAt == nil || pending != nil {
		t.Fatalf("after withdrawing the revive: deleted_at %v, pending %v (%v)", deletedAt, pending, err)
	}
}

// An approval lets through what was written: once its author may no
// longer write in the namespace, neither their runnable nor their
// deployable change can be approved (403, nothing changes), and both
// can still be rejected.
func testApprovalOfAnAuthorWhoLostTheRight(t *testing.T, h *harness) {
	const rpath, dpath = "/api/v1/runnables/team-b/daves-report", "/api/v1/deployables/team-b/daves-config"
	h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "daves-report", "echo")).want(t, http.StatusAccepted)
	h.yaml("dave", "PUT", dpath, configMapDeployable("team-b", "daves-config", "v1")).want(t, http.StatusCreated)
	p := testPolicy()
	nsp := p.Namespaces["team-b"]
	nsp.Roles = map[policy.Role][]string{policy.RoleEditor: {"alice"}, policy.RoleApprover: {"carol", "alice"}}
	p.Namespaces["team-b"] = nsp
	h.setPolicy(t, p)
	before := h.counts()
	for _, path := range []string{rpath, dpath} {
		r := h.decide("carol", path, "approve").want(t, http.StatusForbidden)
		if !strings.Contains(r.str("message"), `written by "dave", who may no longer write in namespace "team-b"`) {
			t.Errorf("approve %s: %s", path, r.raw)
		}
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused approvals changed the database: %v -> %v", before, after)
	}
	for _, path := range []string{rpath, dpath} {
		h.decide("carol", path, "reject").want(t, http.StatusOK)
	}
}

// testApprovalOfARunnableMadeAgain: carol reviews dave's runnable; dave
// cancels it, removes it and submits another under the same name, whose
// version starts over at the one she reviewed. Her decision names the
// object reviewed too (uid, as purser approve and the console send it):
// refused, nothing changed.
func testApprovalOfARunnableMadeAgain(t *testing.T, h *harness) {
	const path = "/api/v1/runnables/team-b/swapped"
	h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "swapped", "echo reviewed")).want(t, http.StatusAccepted)
	reviewed := h.get("carol", path).want(t, http.StatusOK)
	rv, uid := reviewed.str("status", "pendingChange", "resourceVersion"), reviewed.str("metadata", "uid")
	h.do("dave", "DELETE", path, "", nil).want(t, http.StatusOK)
	h.do("dave", "DELETE", path, "", nil).want(t, http.StatusOK)
	again := h.yaml("dave", "POST", "/api/v1/runnables", runnableYAML("team-b", "swapped", "echo swapped")).want(t, http.StatusAccepted)
	if again.str("metadata", "resourceVersion") != rv || again.str("metadata", "uid") == uid {
		t.Fatalf("the runnable made again: %s (reviewed resourceVersion %s, uid %s)", again.raw, rv, uid)
	}
	before := h.counts()
	for _, verb := range []string{"approve", "reject"} {
		r := h.do("carol", "POST", path+"/"+verb+"?resourceVersion="+rv+"&uid="+uid, "", nil).want(t, http.StatusConflict)
		if !strings.Contains(r.str("message"), "is another object than the one reviewed") {
			t.Errorf("%s of the runnable made again: %s", verb, r.raw)
		}
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused decisions changed the database: %v -> %v", before, after)
	}
	h.do("carol", "POST", path+"/approve?resourceVersion="+rv+"&uid="+again.str("metadata", "uid"), "", nil).want(t, http.StatusOK)
}
