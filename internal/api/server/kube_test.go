package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
)

// testKubeAPI: the server serves the farm's Kubernetes API under /k8s
// with its own credentials, policy and rate limits.
func testKubeAPI(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Inventory().Upsert(ctx, []store.InventoryRow{{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a",
			Name: "k8s-cm", UID: "u-k8s-cm", ResourceVersion: "7", Health: "Unknown", ObservedAt: time.Now(), Object: []byte(`{"data":{"a":"b"}}`)}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.get("", "/k8s/version").want(t, http.StatusUnauthorized)
	if r := h.get("bob", "/k8s/version"); r.code != http.StatusOK || r.body["major"] != "1" {
		t.Errorf("GET /k8s/version: %d %s", r.code, r.raw)
	}
	r := h.get("bob", "/k8s/api/v1/namespaces/team-a/configmaps")
	items, _ := r.body["items"].([]any)
	if r.code != http.StatusOK || r.body["kind"] != "ConfigMapList" || len(items) != 1 {
		t.Fatalf("bob lists team-a's ConfigMaps through /k8s: %d %s", r.code, r.raw)
	}
	if r := h.get("bob", "/k8s/api/v1/configmaps"); r.code != http.StatusForbidden || r.body["kind"] != "Status" {
		t.Errorf("bob lists every namespace through /k8s: %d %s, want a 403 Status", r.code, r.raw)
	}
	if r := h.do("admin", http.MethodDelete, "/k8s/api/v1/namespaces/team-a/configmaps/k8s-cm", "", nil); r.code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE through /k8s: %d %s, want 405", r.code, r.raw)
	}
}
