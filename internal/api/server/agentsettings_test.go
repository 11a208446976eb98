package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestClusterInventoryKinds: a Cluster's spec.inventory.kinds names the
// kinds its agent tracks on request. Unknown or repeated kinds are refused
// and change nothing; a valid list reaches the cluster's key of the agent
// settings bucket through the outbox and the real relay, with the
// Cluster's change, which is audited; a PUT that leaves the kinds as
// they are publishes nothing new.
func TestClusterInventoryKinds(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	withKinds := func(name string, kinds ...string) string {
		body := clusterYAML(name, "t1")
		if len(kinds) > 0 {
			body = strings.Replace(body, "spec:\n", "spec:\n  inventory:\n    kinds: ["+strings.Join(kinds, ", ")+"]\n", 1)
		}
		return body
	}
	for _, bad := range [][]string{{"Pod", "Deployment"}, {"Pod", "Pod"}} {
		r := h.yaml("admin", "POST", "/api/v1/clusters", withKinds("dc1-a", bad...))
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.raw), "spec.inventory.kinds[1]") {
			t.Errorf("kinds %v: %d %s, want 422 naming spec.inventory.kinds[1]", bad, r.code, r.raw)
		}
	}
	h.get("admin", "/api/v1/clusters/dc1-a").want(t, http.StatusNotFound)
	if n := h.count("outbox"); n != 0 {
		t.Errorf("refused clusters left %d outbox messages", n)
	}

	kv, err := h.streams.JetStream().KeyValue(t.Context(), stream.AgentSettingsBucket)
	if err != nil {
		t.Fatal(err)
	}
	settings := func(want []string, generation int64) {
		t.Helper()
		sandboxtest.Eventually(t, 30*time.Second, fmt.Sprintf("the agent settings of dc1-a ask for %v", want), func(ctx context.Context) error {
			e, err := kv.Get(ctx, "dc1-a")
			if err != nil {
				return err
			}
			var s stream.AgentSettings
			if err := json.Unmarshal(e.Value(), &s); err != nil {
				return err
			}
			if !slices.Equal(s.Kinds, want) || s.Generation != generation || s.Cluster != "dc1-a" {
				return fmt.Errorf("settings %+v", s)
			}
			return nil
		})
	}
	created := h.yaml("admin", "POST", "/api/v1/clusters", withKinds("dc1-a", "Pod", "Event")).want(t, http.StatusCreated)
	if k, _ := created.body["spec"].(map[string]any)["inventory"].(map[string]any)["kinds"].([]any); len(k) != 2 {
		t.Errorf("the created Cluster's spec.inventory: %s", created.raw)
	}
	settings([]string{"Pod", "Event"}, 1)
	hist := h.get("admin", "/api/v1/history?kind=Cluster&name=dc1-a").want(t, http.StatusOK).items()
	if len(hist) != 1 || !strings.Contains(fmt.Sprint(hist[0]["summary"]), "also tracking Pod, Event") {
		t.Errorf("history of dc1-a: %v", hist)
	}

	// The same kinds with other labels: no new settings.
	before := revision(t, kv, "dc1-a")
	h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", strings.Replace(withKinds("dc1-a", "Pod", "Event"), "tier: prod", "tier: test", 1)).want(t, http.StatusOK)
	time.Sleep(500 * time.Millisecond) // two passes of the relay
	if after := revision(t, kv, "dc1-a"); after != before {
		t.Errorf("a PUT that kept the kinds published settings again (revision %d, was %d)", after, before)
	}
	// Without the kinds: the agent is asked for none.
	h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", withKinds("dc1-a")).want(t, http.StatusOK)
	settings(nil, 3)
	h.yaml("admin", "PUT", "/api/v1/clusters/dc1-a", withKinds("dc1-a", "Event", "Nodes")).want(t, http.StatusUnprocessableEntity)
	settings(nil, 3)
}

// revision is the stream sequence of the last settings of cluster: a new
// value, even an equal one, has a new revision (the bucket keeps one value
// per key, so a count of messages would not tell).
func revision(t *testing.T, kv jetstream.KeyValue, cluster string) uint64 {
	t.Helper()
	e, err := kv.Get(t.Context(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	return e.Revision()
}
