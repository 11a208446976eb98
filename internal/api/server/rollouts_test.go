package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

func rolledDeployable(ns, name, value, rollout string) string {
	return configMapDeployable(ns, name, value) + "  rollout: " + rollout + "\n"
}

const dcRollout = `{waves: [{name: dc-1, clusterSelector: {matchLabels: {dc: dc-1}}}, {name: dc-2, clusterSelector: {matchLabels: {dc: dc-2}}}], minSuccessSeconds: 5, onFailure: Rollback, approveBetweenWaves: true}`

// TestRolloutControl: a change of a deployable that rolls out in waves
// keeps the generation it replaces; pause, resume and rollback are writes
// of the deployable (its role, audited, 409 where they mean nothing, and a
// refusal changes nothing); approving a wave binds to the generation
// reviewed and needs another person than its author.
func TestRolloutControl(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			const path = "/api/v1/deployables/team-a/waves"
			h.yaml("alice", "PUT", path, configMapDeployable("team-a", "waves", "v1")).want(t, http.StatusCreated)
			h.yaml("alice", "PUT", path, rolledDeployable("team-a", "waves", "v2", dcRollout)).want(t, http.StatusOK)
			var prev int
			if err := h.raw.QueryRowContext(t.Context(), `SELECT previous_generation FROM deployable_rollouts`).Scan(&prev); err != nil || prev != 1 {
				t.Fatalf("previous generation kept: %d, %v; want 1", prev, err)
			}

			bad := h.yaml("alice", "PUT", path, rolledDeployable("team-a", "waves", "v3", `{waves: [{name: a}, {name: a}], onFailure: Maybe}`)).want(t, http.StatusUnprocessableEntity)
			for _, want := range []string{"spec.rollout.waves[1].name", "spec.rollout.onFailure"} {
				if !strings.Contains(string(bad.raw), want) {
					t.Errorf("invalid rollout: %s lacks %s", bad.raw, want)
				}
			}

			before := h.counts()
			h.do("bob", "POST", path+"/pause", "", nil).want(t, http.StatusForbidden)
			h.do("mallory", "POST", path+"/rollback", "", nil).want(t, http.StatusForbidden)
			h.do("alice", "POST", "/api/v1/deployables/team-a/nothing/pause", "", nil).want(t, http.StatusNotFound)
			h.yaml("alice", "PUT", "/api/v1/deployables/team-a/flat", configMapDeployable("team-a", "flat", "v1")).want(t, http.StatusCreated)
			before["deployables"]++
			before["audit_log"]++
			h.do("alice", "POST", "/api/v1/deployables/team-a/flat/pause", "", nil).want(t, http.StatusConflict)
			if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("refused controls changed the database: %v -> %v", before, after)
			}

			for _, verb := range []string{"pause", "resume", "rollback"} {
				h.do("alice", "POST", path+"/"+verb, "", nil).want(t, http.StatusOK)
			}
			hist := h.get("bob", "/api/v1/history?namespace=team-a&kind=Deployable&name=waves").want(t, http.StatusOK)
			for _, want := range []string{"rollout-pause", "rollout-resume", "rollout-rollback", "from generation 2 to generation 1"} {
				if !strings.Contains(string(hist.raw), want) {
					t.Errorf("history lacks %q: %s", want, hist.raw)
				}
			}

			// The syncer's decision: wave dc-2 of generation 2 waits.
			ctx := context.Background()
			if err := h.store.Tx(ctx, func(tx *store.Tx) error {
				rec, err := tx.Deployables().Get(ctx, "team-a", "waves")
				if err != nil {
					return err
				}
				r, err := tx.Deployables().GetRollout(ctx, rec.UID)
				if err != nil {
					return err
				}
				r.Status = []byte(`{"generation":2,"previousGeneration":1,"wave":"dc-2","waveIndex":1,"state":"Paused","reason":"AwaitingApproval","awaitingApproval":"dc-2"}`)
				return tx.Deployables().PutRollout(ctx, r)
			}); err != nil {
				t.Fatal(err)
			}
			h.do("alice", "POST", path+"/approve?generation=2", "", nil).want(t, http.StatusForbidden) // her own change
			h.do("bob", "POST", path+"/approve?generation=2", "", nil).want(t, http.StatusForbidden)   // not an approver
			h.do("carol", "POST", path+"/approve?generation=1", "", nil).want(t, http.StatusConflict)
			h.do("carol", "POST", path+"/approve?generation=x", "", nil).want(t, http.StatusBadRequest)
			got := h.do("carol", "POST", path+"/approve?generation=2", "", nil).want(t, http.StatusOK)
			ro, _ := got.body["status"].(map[string]any)["rollout"].(map[string]any)
			ctl, _ := ro["control"].(map[string]any)
			if ro["state"] != "Paused" || fmt.Sprint(ctl["approved"]) != "[dc-2]" || ctl["rollback"] != true {
				t.Fatalf("status.rollout after the approval: %s", got.raw)
			}
		})
	}
}
