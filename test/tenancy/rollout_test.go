package tenancy

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// testRolloutChurn: a tenant who pushes generation after generation of a
// Secret that rolls out in waves, each superseding the last mid-rollout,
// makes purser keep only the generations its clusters hold or fall back
// to (the rollout row does not grow with the pushes), and every kept
// generation's values stay sealed: none is in clear in the database.
func testRolloutChurn(t *testing.T, f *farm) {
	const pushes = 20
	secret := func(i int) string {
		return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: churn, namespace: %s}
spec:
  template:
    apiVersion: v1
    kind: Secret
    stringData: {password: churn-secret-%d-x7q}
  rollout:
    minSuccessSeconds: 3600
    waves: [{name: all}]
`, f.own, i)
	}
	decided := func() {
		t.Helper()
		eventually(t, "the rollout of the last generation decided", func() error {
			a := f.do("mallory", http.MethodGet, "/api/v1/deployables/"+f.own+"/churn", nil).want(t, http.StatusOK)
			gen, _ := a.body["metadata"].(map[string]any)["generation"].(float64)
			st, _ := a.body["status"].(map[string]any)["rollout"].(map[string]any)
			if decided, _ := st["generation"].(float64); gen == 0 || decided != gen {
				return fmt.Errorf("generation %v, rollout decided for %v", gen, st["generation"])
			}
			return nil
		})
	}
	defer f.do("mallory", http.MethodDelete, "/api/v1/deployables/"+f.own+"/churn", nil)
	for i := 1; i <= pushes; i++ {
		want := http.StatusOK
		if i == 1 {
			want = http.StatusCreated
		}
		f.yaml("mallory", http.MethodPut, "/api/v1/deployables/"+f.own+"/churn", secret(i)).want(t, want)
		if i%5 == 0 {
			// Given to the cluster before the next supersedes it: kept
			// until a decision no longer names it.
			decided()
		}
	}
	decided()
	var kept sql.NullString
	var rest string
	err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, `SELECT r.kept, COALESCE(r.status, '') || COALESCE(r.previous_spec, '')
		FROM deployable_rollouts r JOIN deployables d ON d.uid = r.deployable_uid WHERE d.namespace = ? AND d.name = ?`),
		f.own, "churn").Scan(&kept, &rest)
	if errors.Is(err, sql.ErrNoRows) {
		t.Fatal("no rollout row")
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(kept.String, `"generation"`); n > 2 {
		t.Errorf("%d generations kept after %d pushes, want at most the one the cluster falls back to: %.300s", n, pushes, kept.String)
	}
	if strings.Contains(kept.String+rest, "churn-secret-") {
		t.Errorf("a Secret value of a kept generation is in clear in the rollout row")
	}
	t.Logf("after %d pushes the rollout row keeps %d generation(s)", pushes, strings.Count(kept.String, `"generation"`))
}
