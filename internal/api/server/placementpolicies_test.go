package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

const flinkPolicy = `apiVersion: purser.io/v1alpha1
kind: PlacementPolicy
metadata: {name: flink, namespace: team-a}
spec:
  resourceSelectors:
  - {apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment}
  runnable:
    placement: {clusterAffinity: {clusterNames: [dc1]}}
    failover: {consistency: AtMostOne}
`

// TestPlacementPolicies: a namespace's editors write its placement
// policies (audited), its readers read them, nobody else; only admins
// write the farm's, which anyone signed in reads; a bad policy is a 422
// that writes nothing.
func TestPlacementPolicies(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	for _, c := range []struct{ why, body string }{
		{"no selector", strings.Replace(flinkPolicy, "  resourceSelectors:\n  - {apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment}\n", "  resourceSelectors: []\n", 1)},
		{"a selector of purser's own kinds", strings.Replace(flinkPolicy, "flink.apache.org/v1beta1, kind: FlinkDeployment", "purser.io/v1alpha1, kind: Runnable", 1)},
		{"a template in the policy", strings.Replace(flinkPolicy, "    failover:", "    template: {apiVersion: v1, kind: ConfigMap}\n    failover:", 1)},
		{"no runnable", strings.Split(flinkPolicy, "  runnable:")[0]},
		{"a bad label selector", strings.Replace(flinkPolicy, "kind: FlinkDeployment}", "kind: FlinkDeployment, labelSelector: {matchExpressions: [{key: a, operator: Nope}]}}", 1)},
		{"a bad failover", strings.Replace(flinkPolicy, "AtMostOne", "Sometimes", 1)},
		{"another namespace in the body", strings.Replace(flinkPolicy, "namespace: team-a", "namespace: team-b", 1)},
	} {
		if r := h.yaml("alice", http.MethodPut, "/api/v1/placementpolicies/team-a/flink", c.body); r.code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", c.why, r.code, r.raw)
		}
	}
	if n := h.count("placement_policies"); n != 0 {
		t.Fatalf("%d policies after refusals", n)
	}
	if r := h.yaml("mallory", http.MethodPut, "/api/v1/placementpolicies/team-a/flink", flinkPolicy); r.code != http.StatusForbidden {
		t.Fatalf("a stranger wrote team-a's policy: %d %s", r.code, r.raw)
	}
	if r := h.yaml("alice", http.MethodPut, "/api/v1/placementpolicies/team-a/flink", flinkPolicy); r.code != http.StatusCreated {
		t.Fatalf("put: %d %s", r.code, r.raw)
	}
	if r := h.yaml("alice", http.MethodPut, "/api/v1/placementpolicies/team-a/flink", flinkPolicy); r.code != http.StatusOK {
		t.Fatalf("put again: %d %s", r.code, r.raw)
	}
	if r := h.get("bob", "/api/v1/placementpolicies/team-a/flink"); r.code != http.StatusOK || r.body["kind"] != "PlacementPolicy" {
		t.Fatalf("a reader's get: %d %s", r.code, r.raw)
	}
	if r := h.get("mallory", "/api/v1/placementpolicies/team-a/flink"); r.code != http.StatusForbidden {
		t.Fatalf("a stranger read it: %d", r.code)
	}
	if r := h.get("mallory", "/api/v1/placementpolicies"); r.code != http.StatusForbidden {
		t.Fatalf("a stranger listed every namespace's: %d", r.code)
	}

	farm := strings.NewReplacer("kind: PlacementPolicy", "kind: ClusterPlacementPolicy", "name: flink, namespace: team-a", "name: flink-everywhere").Replace(flinkPolicy)
	if r := h.yaml("alice", http.MethodPut, "/api/v1/clusterplacementpolicies/flink-everywhere", farm); r.code != http.StatusForbidden {
		t.Fatalf("an editor wrote the farm's policy: %d %s", r.code, r.raw)
	}
	if r := h.yaml("admin", http.MethodPut, "/api/v1/clusterplacementpolicies/flink-everywhere",
		strings.Replace(farm, "name: flink-everywhere", "name: flink-everywhere, namespace: team-a", 1)); r.code != http.StatusUnprocessableEntity {
		t.Fatalf("a cluster policy with a namespace: %d %s", r.code, r.raw)
	}
	if r := h.yaml("admin", http.MethodPut, "/api/v1/clusterplacementpolicies/flink-everywhere", farm); r.code != http.StatusCreated {
		t.Fatalf("the farm's: %d %s", r.code, r.raw)
	}
	if r := h.get("mallory", "/api/v1/clusterplacementpolicies"); r.code != http.StatusOK || len(r.body["items"].([]any)) != 1 {
		t.Fatalf("anyone reads the farm's: %d %s", r.code, r.raw)
	}
	if r := h.do("alice", http.MethodDelete, "/api/v1/clusterplacementpolicies/flink-everywhere", "", nil); r.code != http.StatusForbidden {
		t.Fatalf("an editor removed the farm's: %d", r.code)
	}
	if r := h.do("alice", http.MethodDelete, "/api/v1/placementpolicies/team-a/flink", "", nil); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
	if r := h.get("alice", "/api/v1/placementpolicies/team-a/flink"); r.code != http.StatusNotFound {
		t.Fatalf("after delete: %d", r.code)
	}
	ctx := context.Background()
	var actions []string
	if err := h.store.Read(ctx, func(tx *store.Tx) error {
		entries, err := tx.Audit().List(ctx, store.AuditFilter{Name: "flink"})
		for _, e := range entries {
			actions = append(actions, e.Actor+":"+e.Action+":"+e.Kind)
		}
		entries, err2 := tx.Audit().List(ctx, store.AuditFilter{Name: "flink-everywhere"})
		for _, e := range entries {
			actions = append(actions, e.Actor+":"+e.Action+":"+e.Kind)
		}
		return errors.Join(err, err2)
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(actions, ",") != "alice:create:PlacementPolicy,alice:delete:PlacementPolicy,admin:create:ClusterPlacementPolicy" {
		t.Fatalf("audit %v", actions)
	}
}
