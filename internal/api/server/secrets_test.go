package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestSecretsWhereverTheyAppear: a Runnable whose template is a Secret is
// refused (422) and changes nothing; values under data and stringData,
// whatever the kind, never reach the audit log, though the keys do.
func TestSecretsWhereverTheyAppear(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			const value = "hunter2-value-in-clear"
			before := h.counts()
			r := h.yaml("alice", "POST", "/api/v1/runnables", runnableOf("team-a", "leak", fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: leak}
stringData: {password: %s}
`, value))).want(t, http.StatusUnprocessableEntity)
			if !strings.Contains(string(r.raw), "spec.template.kind") || !strings.Contains(string(r.raw), "Deployable") {
				t.Fatalf("Secret runnable: %s", r.raw)
			}
			if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a refused Secret runnable changed the database: %v -> %v", before, after)
			}

			h.yaml("alice", "POST", "/api/v1/runnables", runnableOf("team-a", "cm-job", fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {password: %s}
`, value))).want(t, http.StatusAccepted)
			h.yaml("alice", "PUT", "/api/v1/deployables/team-a/wf", deployableOf("team-a", "wf", fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: wf}
spec:
  templates:
  - name: main
    inputs: {artifacts: [{name: a, path: /a, raw: {data: %s}}]}
`, value))).want(t, http.StatusCreated)
			hist := h.get("admin", "/api/v1/history?namespace=team-a").want(t, http.StatusOK)
			if strings.Contains(string(hist.raw), value) {
				t.Fatalf("the audit log holds a value under data: %s", hist.raw)
			}
			if !strings.Contains(string(hist.raw), `"password":"(redacted)"`) {
				t.Fatalf("the audit log lost the keys of data: %s", hist.raw)
			}
			var n int
			if err := h.raw.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM audit_log WHERE details LIKE '%`+value+`%'`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("%d audit rows hold the value (%v)", n, err)
			}
		})
	}
}
