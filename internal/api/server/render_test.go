package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestRenderingsAtAccept: the API reviews what the writers will apply
// (each failover mutation and override alone and together) with the
// same admission they call, and refuses early, naming it; a refused
// request changes nothing. A PUT of a runnable is reviewed as a create
// is. Bounds and identity: the copy bomb and a patch of /kind are 422s
// that say so.
func TestRenderingsAtAccept(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	const job = "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\n"
	withMutation := func(name, mutation string) string {
		return runnableOf("team-a", name, job) + "  failover:\n    mutations: [" + mutation + "]\n"
	}
	refused := func(what string, code int, method, path, body string, want ...string) {
		t.Helper()
		before := h.counts()
		r := h.yaml("alice", method, path, body).want(t, code)
		for _, w := range want {
			if !strings.Contains(string(r.raw), w) {
				t.Errorf("%s: the answer does not say %q: %s", what, w, r.raw)
			}
		}
		if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s changed the database: %v -> %v", what, before, after)
		}
	}
	refused("a mutation setting hostPID", http.StatusUnprocessableEntity, "POST", "/api/v1/runnables",
		withMutation("m", `{when: "true", path: spec.template.spec.hostPID, value: "true"}`),
		"spec.failover.mutations[0]", "host namespaces")

	// Accepted without, then changed to carry it: the PUT is refused.
	created := h.yaml("alice", "POST", "/api/v1/runnables", withMutation("m", `{when: "true", path: spec.backoffLimit, value: "2"}`)).want(t, http.StatusAccepted)
	rv := created.str("metadata", "resourceVersion")
	put := strings.Replace(withMutation("m", `{when: "true", path: spec.template.spec.serviceAccountName, value: "'purser-agent'"}`),
		"metadata: {name: m, namespace: team-a}", "metadata: {name: m, namespace: team-a, resourceVersion: \""+rv+"\"}", 1)
	refused("a PUT adding a mutation to purser's service account", http.StatusUnprocessableEntity, "PUT", "/api/v1/runnables/team-a/m", put,
		"spec.failover.mutations[0]", `service account \"purser-agent\"`)

	const dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: main, image: nginx}]\n"
	withOverrides := func(name, tmpl, overrides string) string {
		return deployableOf("team-a", name, tmpl) + "  overrides: " + overrides + "\n"
	}
	refused("an override making the container privileged", http.StatusUnprocessableEntity, "PUT", "/api/v1/deployables/team-a/web",
		withOverrides("web", dep, `[{patch: {spec: {replicas: 2}}}, {clusterSelector: {matchLabels: {dc: dc-2}}, patch: [{op: add, path: /spec/template/spec/containers/0/securityContext, value: {privileged: true}}]}]`),
		"spec.overrides[1]", "privileged")

	ops := []string{`{op: add, path: /data/b, value: {}}`}
	for i := range 16 {
		ops = append(ops, fmt.Sprintf(`{op: copy, from: /data, path: /data/b/c%d}`, i))
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: " + strings.Repeat("x", 1024) + "}\n"
	start := time.Now()
	refused("the copy bomb", http.StatusUnprocessableEntity, "PUT", "/api/v1/deployables/team-a/bomb",
		withOverrides("bomb", cm, "[{patch: ["+strings.Join(ops, ", ")+"]}]"), "spec.overrides[0].patch", "copy operations would add more than")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the copy bomb took %s to refuse", d)
	}
	refused("an override turning a ConfigMap into a Secret", http.StatusUnprocessableEntity, "PUT", "/api/v1/deployables/team-a/cm",
		withOverrides("cm", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v}\n", `[{patch: [{op: replace, path: /kind, value: Secret}, {op: add, path: /data/password, value: hunter2}]}]`),
		"spec.overrides[0].patch", "changes kind")
	refused("an override renaming the object", http.StatusUnprocessableEntity, "PUT", "/api/v1/deployables/team-a/cm",
		withOverrides("cm", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v}\n", `[{patch: {metadata: {namespace: kube-system}}}]`),
		"spec.overrides[0].patch", "changes metadata.namespace")
}

// TestSecretOverridesSealed: issue 33's hole 10. An override of a Secret
// is sealed with the Secret's values: the stored spec, a GET and the
// history show its shape with every value redacted; a JSON patch that
// writes under data of another kind is redacted in the history.
func TestSecretOverridesSealed(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	const value = "hunter2-in-an-override"
	body := deployableOf("team-a", "creds", "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: base}\n") +
		fmt.Sprintf("  overrides:\n  - {clusterSelector: {matchLabels: {dc: dc-2}}, patch: {stringData: {password: %s}}}\n  - {patch: [{op: add, path: /stringData/extra, value: %s}]}\n", value, value)
	got := h.yaml("alice", "PUT", "/api/v1/deployables/team-a/creds", body).want(t, http.StatusCreated)
	if strings.Contains(string(got.raw), value) {
		t.Fatalf("the answer to the PUT holds the override's value: %s", got.raw)
	}
	read := h.get("alice", "/api/v1/deployables/team-a/creds").want(t, http.StatusOK)
	if strings.Contains(string(read.raw), value) || !strings.Contains(string(read.raw), `"(redacted)"`) {
		t.Fatalf("GET: %s", read.raw)
	}
	var shown struct {
		Spec struct {
			Overrides []struct {
				Patch json.RawMessage `json:"patch"`
			} `json:"overrides"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(read.raw, &shown); err != nil || len(shown.Spec.Overrides) != 2 ||
		string(shown.Spec.Overrides[1].Patch) != `[{"op":"add","path":"/stringData/extra","value":"(redacted)"}]` {
		t.Fatalf("GET shows the overrides as %s (%v)", read.raw, err)
	}
	hist := h.get("admin", "/api/v1/history?namespace=team-a").want(t, http.StatusOK)
	if strings.Contains(string(hist.raw), value) {
		t.Fatalf("the history holds the override's value: %s", hist.raw)
	}
	for _, q := range []string{`SELECT COUNT(*) FROM deployables WHERE spec LIKE '%` + value + `%'`, `SELECT COUNT(*) FROM audit_log WHERE details LIKE '%` + value + `%'`} {
		var n int
		if err := h.raw.QueryRowContext(t.Context(), q).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: %d (%v)", q, n, err)
		}
	}
	// The same PUT again is no change (the sealed values' fingerprint is
	// the same); another value is a new generation.
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/creds", body).want(t, http.StatusOK)
	again := h.get("alice", "/api/v1/deployables/team-a/creds").want(t, http.StatusOK)
	if g := again.body["status"].(map[string]any)["generation"]; g != float64(1) {
		t.Fatalf("the same PUT moved the generation to %v", g)
	}
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/creds", strings.ReplaceAll(body, value, value+"-2")).want(t, http.StatusOK)
	again = h.get("alice", "/api/v1/deployables/team-a/creds").want(t, http.StatusOK)
	if g := again.body["status"].(map[string]any)["generation"]; g != float64(2) {
		t.Fatalf("a new override value left the generation at %v", g)
	}

	// A ConfigMap's JSON patch writing under data: the history keeps the
	// operation, not the value.
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/settings", deployableOf("team-a", "settings", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {k: v}\n")+
		"  overrides: [{patch: [{op: add, path: /data/token, value: "+value+"}]}]\n").want(t, http.StatusCreated)
	hist = h.get("admin", "/api/v1/history?namespace=team-a").want(t, http.StatusOK)
	if strings.Contains(string(hist.raw), value) || !strings.Contains(string(hist.raw), `"path":"/data/token"`) {
		t.Fatalf("the history of a ConfigMap's JSON patch under data: %s", hist.raw)
	}
}
