package tenancy

import (
	"net/http"
	"strings"
	"testing"
)

// testAttack5: the fourth wave's newest surfaces tried by mallory
// (editor of her own namespace and of the approval one), by carol (no
// role in mallory's namespace) and by a caller with no token: writes of
// purser's kinds through /k8s on paths that lose the namespace, patches
// that move an object's identity or forge its status or its ownership
// record, priorities she may not give, dry runs that must leave no trace
// (object, audit entry, ownership record, outbox message), and the
// drills, which are the admins'.
func testAttack5(t *testing.T, f *farm) {
	const (
		apply = "application/apply-patch+yaml"
		merge = "application/merge-patch+json"
		jpat  = "application/json-patch+json"
	)
	count := func(q string) int {
		t.Helper()
		var n int
		if err := f.raw.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// What a dry run must not leave besides what f.state compares: an
	// ownership record, her audit entries, a submission message for a
	// runnable that is not there (the relay may have sent it already: a
	// leak is caught when it is not yet sent).
	traces := func() [3]int {
		return [3]int{f.managedRows(), count("SELECT COUNT(*) FROM audit_log WHERE actor = 'mallory'"),
			count("SELECT COUNT(*) FROM outbox o WHERE o.msg_id LIKE '%/submit' AND NOT EXISTS (SELECT 1 FROM runnables r WHERE o.msg_id = r.uid || '/submit')")}
	}
	f.yaml("victor", "PUT", "/api/v1/deployables/"+f.victim+"/a5-app", deployable(f.victim, "a5-app", configMap("a5-app", "victor's"))).want(t, http.StatusCreated)
	defer f.do("victor", "DELETE", "/api/v1/deployables/"+f.victim+"/a5-app", nil)
	f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own")+"?fieldManager=ci", apply,
		[]byte(deployable(f.own, "a5-own", configMap("a5-own", "v1")))).want(t, http.StatusCreated)
	defer f.do("mallory", "DELETE", "/api/v1/deployables/"+f.own+"/a5-own", nil)
	uid := f.send("mallory", "GET", k8s(f.own, "deployables", "a5-own"), "", nil).want(t, http.StatusOK).str("metadata", "uid")

	// No token, and a token with no role in her namespace.
	t.Run("Callers", func(t *testing.T) {
		for _, c := range []struct{ method, path, ct, body string }{
			{"POST", k8s(f.own, "runnables", ""), "application/yaml", runnable(f.own, "a5-anon", job)},
			{"PATCH", k8s(f.own, "deployables", "a5-own") + "?fieldManager=x&force=true", apply, deployable(f.own, "a5-own", configMap("a5-own", "anon"))},
			{"DELETE", k8s(f.own, "deployables", "a5-own") + "?dryRun=All", "", ""},
			{"POST", "/api/v1/drills", "application/yaml", "target: {kind: cluster, name: dc1}\ndryRun: true\n"},
			{"GET", "/api/v1/dcs", "", ""},
		} {
			// 429 once the suite's failed calls from this address are
			// past their bound: refused all the same.
			f.refusedAuth("no token: "+c.method+" "+c.path, func() answer {
				return f.send("nobody", c.method, c.path, c.ct, []byte(c.body))
			})
		}
		for _, c := range []struct{ method, path, ct, body string }{
			{"POST", k8s(f.own, "runnables", "") + "?dryRun=All", "application/yaml", runnable(f.own, "a5-carol", job)},
			{"PATCH", k8s(f.own, "deployables", "a5-own") + "?fieldManager=carol&force=true", apply, deployable(f.own, "a5-own", configMap("a5-own", "carol's"))},
			{"PATCH", k8s(f.own, "deployables", "a5-own"), merge, `{"spec":{"template":{"data":{"key":"carol's"}}}}`},
			{"DELETE", k8s(f.own, "deployables", "a5-own"), "", ""},
			{"POST", "/api/v1/drills", "application/yaml", "target: {kind: cluster, name: dc1}\ndryRun: true\n"},
		} {
			f.refused("carol: "+c.method+" "+c.path, http.StatusForbidden, func() answer {
				return f.send("carol", c.method, c.path, c.ct, []byte(c.body))
			})
		}
		// In the approval namespace carol reads and approves, and writes
		// nothing: not by /k8s, not as a dry run, not a status that
		// would say approved.
		f.send("mallory", "POST", k8s(f.approval, "runnables", ""), "application/yaml", []byte(runnable(f.approval, "a5-appr", job))).want(t, http.StatusCreated)
		defer f.do("mallory", "DELETE", "/api/v1/runnables/"+f.approval+"/a5-appr", nil)
		f.send("carol", "GET", k8s(f.approval, "runnables", "a5-appr"), "", nil).want(t, http.StatusOK)
		for _, c := range []struct{ method, path, ct, body string }{
			{"POST", k8s(f.approval, "runnables", ""), "application/yaml", runnable(f.approval, "a5-carol", job)},
			{"POST", k8s(f.approval, "runnables", "") + "?dryRun=All", "application/yaml", runnable(f.approval, "a5-carol", job)},
			{"PATCH", k8s(f.approval, "runnables", "a5-appr"), merge, `{"status":{"phase":"Queued"}}`},
			{"PATCH", k8s(f.approval, "runnables", "a5-appr") + "?fieldManager=carol&force=true", apply, runnable(f.approval, "a5-appr", job)},
			{"PUT", k8s(f.approval, "runnables", "a5-appr"), "application/yaml", runnable(f.approval, "a5-appr", job)},
			{"DELETE", k8s(f.approval, "runnables", "a5-appr"), "", ""},
		} {
			f.refused("carol, approver: "+c.method+" "+c.path, http.StatusForbidden, func() answer {
				return f.send("carol", c.method, c.path, c.ct, []byte(c.body))
			})
		}
	})

	// A namespaced kind on the cluster-scoped path: no namespace at all
	// is no one's namespace, not every one.
	t.Run("NoNamespaceOnThePath", func(t *testing.T) {
		for _, c := range []struct{ method, path, ct, body string }{
			{"DELETE", k8s("", "deployables", "a5-app"), "", ""},
			{"PUT", k8s("", "deployables", "a5-app"), "application/yaml", deployable(f.victim, "a5-app", configMap("a5-app", "mallory's"))},
			{"PATCH", k8s("", "deployables", "a5-app"), merge, `{"metadata":{"namespace":"` + f.victim + `"},"spec":{"template":{"data":{"key":"mallory's"}}}}`},
			{"PATCH", k8s("", "deployables", "a5-app") + "?fieldManager=m&force=true", apply, deployable(f.victim, "a5-app", configMap("a5-app", "mallory's"))},
			{"POST", k8s("", "runnables", ""), "application/yaml", runnable(f.victim, "a5-x", job)},
			{"GET", k8s("", "deployables", "a5-app"), "", ""},
		} {
			a := f.refused("mallory "+c.method+" "+c.path, http.StatusForbidden, func() answer {
				return f.send("mallory", c.method, c.path, c.ct, []byte(c.body))
			})
			if strings.Contains(string(a.raw), "victor's") {
				t.Errorf("%s %s answers with the victim's object: %s", c.method, c.path, a.raw)
			}
		}
		// A quota's path names its namespace: the victim's, or hers
		// under another name in the body.
		for _, c := range []struct{ method, path, body string }{
			{"PUT", k8s("", "quotas", f.victim), "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: " + f.victim + "}\nspec: {limits: {runnables: \"0\"}}\n"},
			{"DELETE", k8s("", "quotas", f.victim), ""},
			{"PUT", k8s("", "quotas", f.own), "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: " + f.victim + "}\nspec: {limits: {runnables: \"0\"}}\n"},
		} {
			f.refused("mallory "+c.method+" "+c.path, http.StatusForbidden, func() answer {
				return f.send("mallory", c.method, c.path, "application/yaml", []byte(c.body))
			})
		}
	})

	// Patches that move the object's identity: its namespace, its name,
	// by replace, copy or move. Its uid is the server's.
	t.Run("IdentityPatches", func(t *testing.T) {
		for _, c := range []struct{ ct, body string }{
			{jpat, `[{"op":"replace","path":"/metadata/namespace","value":"` + f.victim + `"}]`},
			{jpat, `[{"op":"replace","path":"/metadata/name","value":"a5-app"}]`},
			{jpat, `[{"op":"copy","from":"/metadata/name","path":"/metadata/namespace"}]`},
			{jpat, `[{"op":"move","from":"/metadata/name","path":"/metadata/namespace"}]`},
			{merge, `{"metadata":{"namespace":"` + f.victim + `"}}`},
			{merge, `{"metadata":{"name":"a5-app"}}`},
		} {
			f.refused("a patch "+c.body, http.StatusBadRequest, func() answer {
				return f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), c.ct, []byte(c.body))
			})
		}
		f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), jpat,
			[]byte(`[{"op":"replace","path":"/metadata/uid","value":"`+uid+`x"}]`))
		f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), merge, []byte(`{"metadata":{"uid":"forged"}}`))
		if got := f.send("mallory", "GET", k8s(f.own, "deployables", "a5-own"), "", nil).want(t, http.StatusOK).str("metadata", "uid"); got != uid {
			t.Errorf("a patch changed the deployable's uid from %s to %s", uid, got)
		}
		if d := f.do("victor", "GET", "/api/v1/deployables/"+f.victim+"/a5-app", nil).want(t, http.StatusOK); strings.Contains(string(d.raw), "mallory") {
			t.Fatalf("the victim's deployable changed: %s", d.raw)
		}
	})

	// Where approval is needed, her writes wait for it: a status she
	// writes (merge patch, JSON patch, apply) is not the one stored.
	t.Run("StatusForged", func(t *testing.T) {
		f.send("mallory", "POST", k8s(f.approval, "runnables", ""), "application/yaml", []byte(runnable(f.approval, "a5-wait", job))).want(t, http.StatusCreated)
		f.send("mallory", "PATCH", k8s(f.approval, "deployables", "a5-wait")+"?fieldManager=ci", apply,
			[]byte(deployable(f.approval, "a5-wait", configMap("a5-wait", "v1")))).want(t, http.StatusCreated)
		for _, c := range []struct{ plural, ct, q, body string }{
			{"runnables", merge, "", `{"status":{"phase":"Queued","approvedBy":"carol"}}`},
			{"runnables", jpat, "", `[{"op":"replace","path":"/status/phase","value":"Succeeded"}]`},
			{"deployables", merge, "", `{"status":{"phase":"Active"}}`},
			{"deployables", jpat, "", `[{"op":"add","path":"/status/phase","value":"Active"}]`},
			{"deployables", apply, "?fieldManager=ci", deployable(f.approval, "a5-wait", configMap("a5-wait", "v1")) + "status: {phase: Active}\n"},
		} {
			f.send("mallory", "PATCH", k8s(f.approval, c.plural, "a5-wait")+c.q, c.ct, []byte(c.body))
			if got := f.send("mallory", "GET", k8s(f.approval, c.plural, "a5-wait"), "", nil).want(t, http.StatusOK).str("status", "phase"); got != "PendingApproval" {
				t.Errorf("a %s of %s's status: phase %s, want PendingApproval", c.ct, c.plural, got)
			}
		}
		f.do("mallory", "DELETE", "/api/v1/runnables/"+f.approval+"/a5-wait", nil)
		f.do("mallory", "DELETE", "/api/v1/deployables/"+f.approval+"/a5-wait", nil)
	})

	// Priorities she may not give: the victim's class, a bare integer.
	// Through /k8s as through /api/v1: refused, nothing written.
	t.Run("Priority", func(t *testing.T) {
		for _, prio := range []string{"critical", "1000000"} {
			doc := strings.Replace(runnable(f.own, "a5-prio", job), "spec:\n", "spec:\n  priority: "+prio+"\n", 1)
			rest := f.refused("priority "+prio+" through /api/v1", http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "POST", "/api/v1/runnables", doc)
			})
			f.refused("priority "+prio+" through /k8s", rest.code, func() answer {
				return f.send("mallory", "POST", k8s(f.own, "runnables", ""), "application/yaml", []byte(doc))
			})
			f.refused("priority "+prio+" applied", rest.code, func() answer {
				return f.send("mallory", "PATCH", k8s(f.own, "runnables", "a5-prio")+"?fieldManager=ci", apply, []byte(doc))
			})
			f.refused("priority "+prio+" in a dry run", rest.code, func() answer {
				return f.send("mallory", "POST", k8s(f.own, "runnables", "")+"?dryRun=All", "application/yaml", []byte(doc))
			})
		}
	})

	// Managed fields are the server's: sent in a patch, refused; removed
	// by a patch, kept.
	t.Run("ManagedFields", func(t *testing.T) {
		f.refused("managed fields in a merge patch", http.StatusUnprocessableEntity, func() answer {
			return f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), merge,
				[]byte(`{"metadata":{"managedFields":[{"manager":"mallory","operation":"Apply","apiVersion":"purser.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}}`))
		})
		f.refused("managed fields replaced by a JSON patch", http.StatusUnprocessableEntity, func() answer {
			return f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), jpat,
				[]byte(`[{"op":"replace","path":"/metadata/managedFields/0/manager","value":"mallory"}]`))
		})
		f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own"), jpat, []byte(`[{"op":"remove","path":"/metadata/managedFields"}]`))
		f.refused("ops's change of ci's field after the record was patched away", http.StatusConflict, func() answer {
			return f.send("mallory", "PATCH", k8s(f.own, "deployables", "a5-own")+"?fieldManager=ops", apply,
				[]byte(deployable(f.own, "a5-own", configMap("a5-own", "v2"))))
		})
	})

	// Dry runs write nothing anywhere: not the object, its audit entry,
	// its ownership record or the submitters' message; by query or by
	// DeleteOptions, in her namespace, where approval is needed.
	t.Run("DryRunsLeaveNoTrace", func(t *testing.T) {
		// Where approval is needed: a5-live waits, nothing places it meanwhile.
		f.send("mallory", "POST", k8s(f.approval, "runnables", ""), "application/yaml", []byte(runnable(f.approval, "a5-live", job))).want(t, http.StatusCreated)
		before := traces()
		for _, c := range []struct {
			what, method, path, ct, body string
			code                         int
		}{
			{"create", "POST", k8s(f.own, "runnables", "") + "?dryRun=All", "application/yaml", runnable(f.own, "a5-dry", job), http.StatusCreated},
			{"create awaiting approval", "POST", k8s(f.approval, "runnables", "") + "?dryRun=All", "application/yaml", runnable(f.approval, "a5-dry", job), http.StatusCreated},
			{"apply creating", "PATCH", k8s(f.own, "runnables", "a5-dry") + "?dryRun=All&fieldManager=ci", apply, runnable(f.own, "a5-dry", job), http.StatusCreated},
			{"forced apply", "PATCH", k8s(f.own, "deployables", "a5-own") + "?dryRun=All&fieldManager=ops&force=true", apply, deployable(f.own, "a5-own", configMap("a5-own", "dry")), http.StatusOK},
			{"merge patch", "PATCH", k8s(f.own, "deployables", "a5-own") + "?dryRun=All&fieldManager=ops", merge, `{"spec":{"template":{"data":{"key":"dry"}}}}`, http.StatusOK},
			{"cancel", "DELETE", k8s(f.approval, "runnables", "a5-live") + "?dryRun=All", "", "", http.StatusOK},
			{"cancel by DeleteOptions", "DELETE", k8s(f.approval, "runnables", "a5-live"), "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`, http.StatusOK},
			{"DeleteOptions of another value", "DELETE", k8s(f.approval, "runnables", "a5-live"), "application/json", `{"dryRun":["Some"]}`, http.StatusUnprocessableEntity},
			{"DeleteOptions into the victim's namespace", "DELETE", k8s(f.victim, "deployables", "a5-app"), "application/json", `{"dryRun":["All"]}`, http.StatusForbidden},
		} {
			f.refused("a dry-run "+c.what, c.code, func() answer { return f.send("mallory", c.method, c.path, c.ct, []byte(c.body)) })
		}
		if after := traces(); after != before {
			t.Errorf("dry runs left traces (ownership records, outbox messages, her audit entries): %v -> %v", before, after)
		}
		if got := f.send("mallory", "GET", k8s(f.approval, "runnables", "a5-live"), "", nil).want(t, http.StatusOK).str("status", "phase"); got == "Cancelled" {
			t.Errorf("a dry-run delete cancelled the runnable")
		}
		if d := f.do("mallory", "GET", "/api/v1/deployables/"+f.own+"/a5-own", nil).want(t, http.StatusOK); strings.Contains(string(d.raw), `"dry"`) {
			t.Errorf("a dry run changed her deployable: %s", d.raw)
		}
		f.do("mallory", "DELETE", "/api/v1/runnables/"+f.approval+"/a5-live", nil)
	})

	// The drills are the admins': mallory's asks, whatever their target
	// (one that exists, one that does not, a malformed one), are refused
	// alike, so that the refusal tells nothing of the farm.
	t.Run("Drills", func(t *testing.T) {
		var first string
		for _, body := range []string{
			"target: {kind: cluster, name: dc1}\ndryRun: true\n",
			"target: {kind: cluster, name: no-such-cluster}\ndryRun: true\n",
			"target: {kind: dc, name: no-such-dc}\n",
			"target: {kind: bogus}\n",
			"{{{",
		} {
			a := f.refused("mallory's drill "+body, http.StatusForbidden, func() answer { return f.yaml("mallory", "POST", "/api/v1/drills?dryRun=Bogus", body) })
			if first == "" {
				first = a.str("message")
			}
			if msg := a.str("message"); msg != first || strings.Contains(msg, "dc1") || strings.Contains(msg, f.victim) {
				t.Errorf("mallory's drill %q: %q, want the same refusal as %q and no name of the farm", body, msg, first)
			}
		}
	})
}
