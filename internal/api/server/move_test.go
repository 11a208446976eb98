package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestMoveRunnable drives POST .../move on every engine: who may, from
// which phase, which targets are refused and why, that a refused request
// writes nothing, and what the answer and the audit log say.
func TestMoveRunnable(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			for i, c := range []string{"sandbox-1", "sandbox-2"} {
				h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML(c, fmt.Sprintf("tok-%d", i))).want(t, http.StatusCreated)
			}
			base := "/api/v1/runnables/team-a/r1"
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r1", "true")).want(t, http.StatusAccepted)
			js := func(s string) []byte { return []byte(s) }

			before := h.counts()
			r := h.do("alice", "POST", base+"/move", "", nil).want(t, http.StatusConflict) // Queued: nothing runs yet
			if !strings.Contains(r.str("message"), "is Queued; only a Running runnable can be moved") {
				t.Errorf("409 says %s", r.raw)
			}
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("a refused move wrote: %v -> %v", before, after)
			}
			h.advance(t, "team-a", "r1", v1alpha1.PhaseRunning) // on sandbox-1
			before = h.counts()
			h.do("bob", "POST", base+"/move", "application/json", js(`{"to":"sandbox-2"}`)).want(t, http.StatusForbidden) // a viewer
			h.do("mallory", "POST", base+"/move", "application/json", js(`{"to":"sandbox-2"}`)).want(t, http.StatusForbidden)
			h.do("alice", "POST", base+"/move", "application/json", js(`{"to":1}`)).want(t, http.StatusBadRequest)
			h.do("alice", "POST", base+"/move", "application/json", js(`{"cluster":"sandbox-2"}`)).want(t, http.StatusBadRequest)
			for to, why := range map[string]string{
				"nowhere":   "cluster nowhere is not registered",
				"sandbox-1": "runs on sandbox-1 already",
			} {
				r := h.do("alice", "POST", base+"/move", "application/json", js(`{"to":"`+to+`"}`)).want(t, http.StatusUnprocessableEntity)
				if !strings.Contains(string(r.raw), why) {
					t.Errorf("move to %s: %s, want %q", to, r.raw, why)
				}
			}
			h.do("alice", "POST", "/api/v1/runnables/team-a/nope/move", "", nil).want(t, http.StatusNotFound)
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("refused requests wrote: %v -> %v", before, after)
			}

			// Without a target placement chooses: the only other cluster.
			got := h.do("alice", "POST", base+"/move", "", nil).want(t, http.StatusOK)
			if got.str("status", "phase") != "Running" || got.str("status", "move", "to") != "sandbox-2" ||
				got.str("status", "move", "from") != "sandbox-1" || got.str("status", "move", "step") != v1alpha1.MoveAsked ||
				got.str("status", "move", "by") != "alice" || !strings.Contains(got.str("status", "message"), "removed first") {
				t.Fatalf("move answered %s", got.raw)
			}
			r = h.do("alice", "POST", base+"/move", "application/json", js(`{"to":"sandbox-2"}`)).want(t, http.StatusConflict)
			if !strings.Contains(r.str("message"), "being moved already, from sandbox-1 to sandbox-2 (asked by alice") {
				t.Errorf("a second move: %s", r.raw)
			}
			var moves []string
			for _, e := range h.get("admin", "/api/v1/history").want(t, http.StatusOK).items() {
				if e["action"] == "move" {
					moves = append(moves, fmt.Sprintf("%v %v %v", e["actor"], e["object"], e["outcome"]))
				}
			}
			if len(moves) != 1 || moves[0] != "alice Runnable/team-a/r1 Running" {
				t.Fatalf("history of moves: %v", moves)
			}

			// A cordoned target is not eligible.
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r2", "true")).want(t, http.StatusAccepted)
			h.advance(t, "team-a", "r2", v1alpha1.PhaseRunning)
			c := h.get("admin", "/api/v1/clusters/sandbox-2").want(t, http.StatusOK)
			spec := fmt.Sprintf(`{"apiVersion":"purser.io/v1alpha1","kind":"Cluster","metadata":{"name":"sandbox-2","resourceVersion":%q},"spec":{"taints":[{"key":"purser.io/cordon","effect":"NoSchedule"}]}}`,
				c.str("metadata", "resourceVersion"))
			h.do("admin", "PUT", "/api/v1/clusters/sandbox-2", "application/json", js(spec)).want(t, http.StatusOK)
			r = h.do("alice", "POST", "/api/v1/runnables/team-a/r2/move", "", nil).want(t, http.StatusUnprocessableEntity)
			if !strings.Contains(string(r.raw), "no cluster other than sandbox-1 can take runnable team-a/r2") || !strings.Contains(string(r.raw), "purser.io/cordon") {
				t.Errorf("a move with every other cluster cordoned: %s", r.raw)
			}
		})
	}
}
