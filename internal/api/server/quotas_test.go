package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestQuotas: admins set a namespace's quota (audited); tenants read it,
// with what their active runnables use beside each limit, but may not
// change it; bad limits are a 422 that writes nothing.
func TestQuotas(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	quota := `apiVersion: purser.io/v1alpha1
kind: Quota
metadata: {name: team-a}
spec:
  limits: {cpu: "12", memory: 64Gi, runnables: "5"}
`
	if r := h.yaml("alice", http.MethodPut, "/api/v1/quotas/team-a", quota); r.code != http.StatusForbidden {
		t.Fatalf("an editor set her own quota: %d %s", r.code, r.raw)
	}
	for _, bad := range []string{
		strings.Replace(quota, `cpu: "12"`, `cpu: twelve`, 1),
		strings.Replace(quota, `runnables: "5"`, `runnables: 500m`, 1),
		strings.Replace(quota, "name: team-a", "name: team-b", 1),
	} {
		if r := h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", bad); r.code != http.StatusUnprocessableEntity {
			t.Fatalf("bad quota: %d %s", r.code, r.raw)
		}
	}
	if n := h.count("quotas"); n != 0 {
		t.Fatalf("%d quotas after refusals", n)
	}
	if r := h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", quota); r.code != http.StatusCreated {
		t.Fatalf("put: %d %s", r.code, r.raw)
	}
	if r := h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", quota); r.code != http.StatusOK {
		t.Fatalf("put again: %d %s", r.code, r.raw)
	}

	// Two active runnables in team-a, as the submitter leaves them.
	ctx := context.Background()
	err := h.store.Tx(ctx, func(tx *store.Tx) error {
		for i, st := range []string{`{"requests":{"cpu":"4","memory":"1Gi"}}`, `{"requests":{"cpu":"2500m"}}`} {
			rec := &store.Runnable{Namespace: "team-a", Name: []string{"a", "b"}[i], UID: []string{"u-a", "u-b"}[i], Generation: 1,
				Spec: []byte(`{"template":{}}`), SpecHash: "h", Phase: "Running", Cluster: "dc1", Submitter: "alice", Status: []byte(st)}
			if err := tx.Runnables().Create(ctx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := h.get("bob", "/api/v1/quotas/team-a")
	if r.code != http.StatusOK {
		t.Fatalf("a viewer's get: %d %s", r.code, r.raw)
	}
	used, _ := r.body["status"].(map[string]any)["used"].(map[string]any)
	if used["cpu"] != "6500m" || used["memory"] != "1Gi" || used["runnables"] != "2" {
		t.Fatalf("status.used %v, want cpu 6500m, memory 1Gi, runnables 2", used)
	}
	if r := h.get("mallory", "/api/v1/quotas/team-a"); r.code != http.StatusForbidden {
		t.Fatalf("a stranger read it: %d", r.code)
	}
	if r := h.get("mallory", "/api/v1/quotas"); r.code != http.StatusOK || len(r.body["items"].([]any)) != 0 {
		t.Fatalf("a stranger's list: %d %s", r.code, r.raw)
	}
	if r := h.do("alice", http.MethodDelete, "/api/v1/quotas/team-a", "", nil); r.code != http.StatusForbidden {
		t.Fatalf("an editor removed her quota: %d", r.code)
	}
	if r := h.do("admin", http.MethodDelete, "/api/v1/quotas/team-a", "", nil); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
	if r := h.get("admin", "/api/v1/quotas/team-a"); r.code != http.StatusNotFound {
		t.Fatalf("after delete: %d", r.code)
	}
	var actions []string
	if err := h.store.Read(ctx, func(tx *store.Tx) error {
		entries, err := tx.Audit().List(ctx, store.AuditFilter{Namespace: "team-a", Name: "team-a"})
		for _, e := range entries {
			actions = append(actions, e.Actor+":"+e.Action+":"+e.Kind)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(actions, ",") != "admin:create:Quota,admin:delete:Quota" {
		t.Fatalf("audit %v: want the create and the delete (the unchanged put writes nothing)", actions)
	}
}

// A quota per cluster label value: checked as the limits are, and its
// use shown for each value a cluster carries.
func TestQuotaPerLabelValue(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1", "tok")).want(t, http.StatusCreated) // dc=dc1
	quota := `apiVersion: purser.io/v1alpha1
kind: Quota
metadata: {name: team-a}
spec:
  limits: {runnables: "10"}
  perLabel: {label: dc, limits: {cpu: "8", runnables: "2"}}
`
	for _, bad := range []string{
		strings.Replace(quota, "label: dc,", "label: 'not a label!',", 1),
		strings.Replace(quota, `cpu: "8"`, `cpu: eight`, 1),
		strings.Replace(quota, `limits: {cpu: "8", runnables: "2"}`, `limits: {}`, 1),
	} {
		got := h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", bad).want(t, http.StatusUnprocessableEntity)
		if !strings.Contains(string(got.raw), "spec.perLabel") {
			t.Errorf("the refusal does not name spec.perLabel: %s", got.raw)
		}
	}
	if n := h.count("quotas"); n != 0 {
		t.Fatalf("%d quotas after refusals", n)
	}
	h.yaml("admin", http.MethodPut, "/api/v1/quotas/team-a", quota).want(t, http.StatusCreated)
	ctx := context.Background()
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Runnables().Create(ctx, &store.Runnable{Namespace: "team-a", Name: "a", UID: "u-a", Generation: 1,
			Spec: []byte(`{"template":{}}`), SpecHash: "h", Phase: "Running", Cluster: "dc1", Submitter: "alice", Status: []byte(`{"requests":{"cpu":"3"}}`)})
	}); err != nil {
		t.Fatal(err)
	}
	got := h.get("admin", "/api/v1/quotas/team-a").want(t, http.StatusOK)
	per, _ := got.body["status"].(map[string]any)["usedPerLabel"].(map[string]any)
	if dc1, _ := per["dc1"].(map[string]any); dc1["cpu"] != "3" || dc1["runnables"] != "1" {
		t.Fatalf("usedPerLabel: %s", got.raw)
	}
}
