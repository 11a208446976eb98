package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
)

// TestQueuePositions: a Queued runnable's status.queuePosition is its
// place in the farm's queue, as the submitter orders it: priority first,
// then the namespace further below its fair share, then age.
func TestQueuePositions(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	ctx := context.Background()
	// team-a already holds half of the farm's cpu.
	capacity, err := json.Marshal(stream.Capacity{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Agents().RecordCapacity(ctx, "c1", time.Now(), capacity); err != nil {
			return err
		}
		return tx.Runnables().Create(ctx, &store.Runnable{Namespace: "team-a", Name: "big", UID: "uid-big", Generation: 1,
			Spec: []byte(`{"spec":{"template":{"apiVersion":"batch/v1","kind":"Job"}}}`), SpecHash: "h", Phase: "Running", Cluster: "c1",
			Status: []byte(`{"phase":"Running","cluster":"c1","requests":{"cpu":"8"}}`)})
	}); err != nil {
		t.Fatal(err)
	}
	submit := func(ns, name, extra string) {
		t.Helper()
		h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML(ns, name, "true")+extra).want(t, http.StatusAccepted)
	}
	submit("team-a", "a1", "")
	submit("team-a", "a2", "")
	submit("team-k", "k1", "")
	submit("team-a", "urgent", "  priority: urgent\n")

	want := map[string]float64{"urgent": 1, "k1": 2, "a1": 3, "a2": 4}
	for _, it := range h.get("alice", "/api/v1/runnables?phase=Queued&namespace=team-a").want(t, http.StatusOK).items() {
		name := it["metadata"].(map[string]any)["name"].(string)
		if got := it["status"].(map[string]any)["queuePosition"]; got != want[name] {
			t.Errorf("%s at position %v, want %v", name, got, want[name])
		}
	}
	if got := h.get("alice", "/api/v1/runnables/team-k/k1").want(t, http.StatusOK); !strings.Contains(string(got.raw), `"queuePosition":2`) {
		t.Errorf("GET of k1: %s", got.raw)
	}
	// A list that does not ask for the queue does not read it.
	for _, it := range h.get("alice", "/api/v1/runnables?namespace=team-a").want(t, http.StatusOK).items() {
		if p, ok := it["status"].(map[string]any)["queuePosition"]; ok {
			t.Errorf("a list of every phase gives a position: %v", p)
		}
	}
}
