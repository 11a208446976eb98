package tenancy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// forged is a status a tenant writes to fool what reads status.conditions
// (kubectl wait, a GitOps controller's health check) into calling her work
// up and done.
const forged = `status:
  phase: Succeeded
  health: Healthy
  conditions:
  - {type: Ready, status: "True", reason: Forged, message: forged}
  - {type: Complete, status: "True", reason: Forged, message: forged}
`

// conditionsOf is "Type=Status/Reason ..." of a read object's
// status.conditions.
func conditionsOf(a answer) string {
	st, _ := a.body["status"].(map[string]any)
	cs, _ := st["conditions"].([]any)
	var out []string
	for _, c := range cs {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"]))
	}
	return strings.Join(out, " ")
}

// testForgedConditions: the conditions read back are purser's, computed
// from what purser recorded, whatever status the writer sent: through
// REST, by server-side apply through /k8s, and as a native object a policy
// makes a runnable of (where the copy's own status would show, had it
// one), in her own namespace and in one that needs approval.
func testForgedConditions(t *testing.T, f *farm) {
	own, appr := f.own, f.approval
	check := func(t *testing.T, what string, a answer) {
		t.Helper()
		got := conditionsOf(a)
		if strings.Contains(got, "Forged") || strings.Contains(got, "Ready=True") || strings.Contains(got, "Complete=") {
			t.Errorf("%s reads back with the forged conditions: %s\n%s", what, got, a.raw)
		}
		if !strings.Contains(got, "Ready=False") {
			t.Errorf("%s reads back without purser's Ready=False: %s", what, got)
		}
	}
	for _, ns := range []string{own, appr} {
		t.Run("REST/"+ns, func(t *testing.T) {
			name := "fc-rest"
			f.yaml("mallory", "POST", "/api/v1/runnables", strings.Replace(runnable(ns, name, job), "\nspec:", "\n"+forged+"spec:", 1)).want(t, http.StatusAccepted)
			defer func() {
				f.do("mallory", "DELETE", "/api/v1/runnables/"+ns+"/"+name, nil)
				f.do("mallory", "DELETE", "/api/v1/runnables/"+ns+"/"+name, nil)
			}()
			check(t, "a runnable POSTed with a status", f.do("mallory", "GET", "/api/v1/runnables/"+ns+"/"+name, nil).want(t, http.StatusOK))
			check(t, "the same through /k8s", f.do("mallory", "GET", k8s(ns, "runnables", name), nil).want(t, http.StatusOK))
		})
		t.Run("ServerSideApply/"+ns, func(t *testing.T) {
			name := "fc-ssa"
			body := strings.Replace(runnable(ns, name, job), "\nspec:", "\n"+forged+"spec:", 1)
			a := f.send("mallory", "PATCH", k8s(ns, "runnables", name)+"?fieldManager=mallory", "application/apply-patch+yaml", []byte(body))
			if a.code != http.StatusCreated && a.code != http.StatusOK && a.code != http.StatusAccepted {
				t.Fatalf("server-side apply: %d %s", a.code, a.raw)
			}
			defer func() {
				f.do("mallory", "DELETE", "/api/v1/runnables/"+ns+"/"+name, nil)
				f.do("mallory", "DELETE", "/api/v1/runnables/"+ns+"/"+name, nil)
			}()
			check(t, "a runnable applied with a status", f.do("mallory", "GET", k8s(ns, "runnables", name), nil).want(t, http.StatusOK))
		})
	}
	t.Run("Native", func(t *testing.T) {
		eventually(t, "Jobs served through /k8s", func() error {
			if a := f.do("mallory", "GET", nativePath(own, ""), nil); a.code != http.StatusOK {
				return fmt.Errorf("%d %s", a.code, a.raw)
			}
			return nil
		})
		f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/fc-jobs", placementPolicy("PlacementPolicy", own, "fc-jobs", "failover: {consistency: AtLeastOne}\n")).want(t, http.StatusCreated)
		defer f.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/fc-jobs", nil)
		name := "fc-native"
		f.under(t).nativeCreate("mallory", own, name, forged)
		defer func() {
			f.do("mallory", "DELETE", "/api/v1/runnables/"+own+"/"+name, nil)
			f.do("mallory", "DELETE", "/api/v1/runnables/"+own+"/"+name, nil)
		}()
		check(t, "a native Job written with a status", f.do("mallory", "GET", nativePath(own, name), nil).want(t, http.StatusOK))
	})
}
