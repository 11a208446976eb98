package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// k8s is the path of purser's kinds under /k8s.
func k8s(ns, plural, name string) string {
	p := "/k8s/apis/purser.io/v1alpha1/"
	if ns != "" {
		p += "namespaces/" + ns + "/"
	}
	p += plural
	if name != "" {
		p += "/" + name
	}
	return p
}

// send is do with a Content-Type of the caller's (a patch's).
func (f *farm) send(user, method, path, contentType string, body []byte) answer {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.url+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.tokens[user])
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// managedRows counts the server-side apply records.
func (f *farm) managedRows() int {
	f.t.Helper()
	var n int
	if err := f.raw.QueryRowContext(f.t.Context(), "SELECT COUNT(*) FROM managed_fields").Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// testK8sWrite: writing purser's kinds through /k8s opens no way around
// the REST API's checks. Mallory writes into the victim's namespace,
// sends bodies that name another namespace than their path, patch bombs,
// huge and deeply nested applied configurations, forged field managers
// and managed fields, dry runs that must not write; each is refused (or,
// for a dry run, answered) and changes nothing. And what the REST API
// refuses, /k8s refuses with the same code and words.
func testK8sWrite(t *testing.T, f *farm) {
	const apply = "application/apply-patch+yaml"
	f.yaml("victor", "PUT", "/api/v1/deployables/"+f.victim+"/k8s-app", deployable(f.victim, "k8s-app", configMap("k8s-app", "victor's"))).want(t, http.StatusCreated)

	// Into the victim's namespace, by every verb.
	for _, c := range []struct{ method, path, ct, body string }{
		{"GET", k8s(f.victim, "deployables", ""), "", ""},
		{"GET", k8s(f.victim, "deployables", "k8s-app"), "", ""},
		{"POST", k8s(f.victim, "runnables", ""), "application/yaml", runnable(f.victim, "k8s-mine", job)},
		{"POST", k8s(f.victim, "deployables", ""), "application/yaml", deployable(f.victim, "k8s-mine", configMap("k8s-mine", "m"))},
		{"PUT", k8s(f.victim, "deployables", "k8s-app"), "application/yaml", deployable(f.victim, "k8s-app", configMap("k8s-app", "mallory's"))},
		{"PATCH", k8s(f.victim, "deployables", "k8s-app"), "application/merge-patch+json", `{"spec":{"template":{"data":{"key":"mallory's"}}}}`},
		{"PATCH", k8s(f.victim, "deployables", "k8s-app"), "application/json-patch+json", `[{"op":"replace","path":"/spec/template/data/key","value":"mallory's"}]`},
		{"PATCH", k8s(f.victim, "deployables", "k8s-app") + "?fieldManager=m&force=true", apply, deployable(f.victim, "k8s-app", configMap("k8s-app", "mallory's"))},
		{"PATCH", k8s(f.victim, "deployables", "k8s-new") + "?fieldManager=m", apply, deployable(f.victim, "k8s-new", configMap("k8s-new", "mallory's"))},
		{"DELETE", k8s(f.victim, "deployables", "k8s-app"), "", ""},
		{"PUT", k8s("", "quotas", f.own), "application/yaml", "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: " + f.own + "}\nspec: {limits: {runnables: \"1000\"}}\n"},
		{"PATCH", k8s("", "quotas", f.own) + "?fieldManager=m", apply, "apiVersion: purser.io/v1alpha1\nkind: Quota\nmetadata: {name: " + f.own + "}\nspec: {limits: {runnables: \"1000\"}}\n"},
	} {
		a := f.refused("mallory "+c.method+" "+c.path, http.StatusForbidden, func() answer {
			return f.send("mallory", c.method, c.path, c.ct, []byte(c.body))
		})
		if a.str("kind") != "Status" || a.str("reason") != "Forbidden" {
			t.Errorf("%s %s: %s, want a Forbidden Status", c.method, c.path, a.raw)
		}
	}
	if d := f.do("victor", "GET", "/api/v1/deployables/"+f.victim+"/k8s-app", nil).want(t, http.StatusOK); strings.Contains(string(d.raw), "mallory") {
		t.Fatalf("the victim's deployable changed: %s", d.raw)
	}

	// What a web page may send to another origin without asking first
	// (through `purser kubeconfig --proxy`, which adds the user's
	// credential): no media type, text/plain, a form. None is a write.
	for _, ct := range []string{"", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		f.refused("a create sent as "+strconvQuote(ct), http.StatusUnsupportedMediaType, func() answer {
			return f.send("mallory", "POST", k8s(f.own, "runnables", ""), ct, []byte(runnable(f.own, "k8s-csrf", job)))
		})
	}

	// Her own namespace's path, another namespace's object.
	f.refused("a body naming the victim's namespace on her path", http.StatusBadRequest, func() answer {
		return f.send("mallory", "POST", k8s(f.own, "runnables", ""), "application/yaml", []byte(runnable(f.victim, "k8s-x", job)))
	})
	f.refused("an applied configuration naming the victim's namespace", http.StatusBadRequest, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-x")+"?fieldManager=m", apply, []byte(deployable(f.victim, "k8s-x", configMap("k8s-x", "m"))))
	})

	// Her own deployable, then bombs at it.
	f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager=ci", apply,
		[]byte(deployable(f.own, "k8s-own", configMap("k8s-own", "v1")))).want(t, http.StatusCreated)
	manyOps := "[" + strings.TrimSuffix(strings.Repeat(`{"op":"test","path":"/kind","value":"Deployable"},`, 2000), ",") + "]"
	f.refused("a JSON patch of 2,000 operations", http.StatusRequestEntityTooLarge, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own"), "application/json-patch+json", []byte(manyOps))
	})
	// Each copy doubles the data: 2^40 bytes if it were let grow.
	doubling := `[{"op":"add","path":"/metadata/annotations","value":{"a":"` + strings.Repeat("x", 1000) + `"}}`
	for i := range 40 {
		doubling += fmt.Sprintf(`,{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/c%d"}`, i)
	}
	doubling += "]"
	f.refused("a JSON patch whose copies double the object", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own"), "application/json-patch+json", []byte(doubling))
	})
	f.refused("a merge patch of more than 1 MiB", http.StatusRequestEntityTooLarge, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own"), "application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"a":"`+strings.Repeat("x", 2<<20)+`"}}}`))
	})
	f.refused("a strategic merge patch", http.StatusUnsupportedMediaType, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own"), "application/strategic-merge-patch+json", []byte(`{}`))
	})
	f.refused("an applied configuration of more than 1 MiB", http.StatusRequestEntityTooLarge, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager=ci", apply,
			[]byte(deployable(f.own, "k8s-own", configMap("k8s-own", strings.Repeat("x", 2<<20)))))
	})
	nested := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	for _, c := range []struct {
		ct, body string
		code     int
	}{
		{apply, deployable(f.own, "k8s-own", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k8s-own}\ndata: "+nested+"\n"), http.StatusBadRequest},
		{"application/merge-patch+json", `{"spec":{"template":{"data":` + nested + `}}}`, http.StatusUnprocessableEntity},
	} {
		a := f.refused("a deeply nested "+c.ct, c.code, func() answer {
			return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager=ci", c.ct, []byte(c.body))
		})
		if a.str("kind") != "Status" {
			t.Errorf("a deeply nested %s: %s", c.ct, a.raw)
		}
	}

	// Field managers: none, too long, and managed fields forged in the
	// body (claiming the fields for another manager).
	f.refused("an apply without fieldManager", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own"), apply, []byte(deployable(f.own, "k8s-own", configMap("k8s-own", "v2"))))
	})
	f.refused("a fieldManager of 129 characters", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager="+strings.Repeat("m", 129), apply,
			[]byte(deployable(f.own, "k8s-own", configMap("k8s-own", "v2"))))
	})
	forged := strings.Replace(deployable(f.own, "k8s-own", configMap("k8s-own", "v2")), "metadata: {name: k8s-own, namespace: "+f.own+"}",
		"metadata:\n  name: k8s-own\n  namespace: "+f.own+"\n  managedFields: [{manager: ci, operation: Apply, apiVersion: purser.io/v1alpha1, fieldsType: FieldsV1, fieldsV1: {}}]", 1)
	f.refused("managed fields forged in an applied configuration", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager=ops", apply, []byte(forged))
	})
	f.refused("managed fields forged in an update", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "PUT", k8s(f.own, "deployables", "k8s-own"), "application/yaml", []byte(forged))
	})
	f.refused("another manager's change of ci's field, unforced", http.StatusConflict, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?fieldManager=ops", apply, []byte(deployable(f.own, "k8s-own", configMap("k8s-own", "v2"))))
	})

	// Dry runs answer as the write would, and write nothing: not the
	// object, not its audit entry, not its ownership record.
	rows := f.managedRows()
	f.refused("a dry-run create", http.StatusCreated, func() answer {
		return f.send("mallory", "POST", k8s(f.own, "runnables", "")+"?dryRun=All", "application/yaml", []byte(runnable(f.own, "k8s-dry", job)))
	})
	f.refused("a dry-run apply", http.StatusCreated, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-dry")+"?dryRun=All&fieldManager=ci", apply, []byte(deployable(f.own, "k8s-dry", configMap("k8s-dry", "v1"))))
	})
	f.refused("a dry-run forced apply", http.StatusOK, func() answer {
		return f.send("mallory", "PATCH", k8s(f.own, "deployables", "k8s-own")+"?dryRun=All&fieldManager=ops&force=true", apply, []byte(deployable(f.own, "k8s-own", configMap("k8s-own", "v3"))))
	})
	f.refused("a dry-run delete", http.StatusOK, func() answer {
		return f.send("mallory", "DELETE", k8s(f.own, "deployables", "k8s-own")+"?dryRun=All", "", nil)
	})
	f.refused("a dry run of another value", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "POST", k8s(f.own, "runnables", "")+"?dryRun=Some", "application/yaml", []byte(runnable(f.own, "k8s-dry", job)))
	})
	f.refused("a dry run into the victim's namespace", http.StatusForbidden, func() answer {
		return f.send("mallory", "POST", k8s(f.victim, "runnables", "")+"?dryRun=All", "application/yaml", []byte(runnable(f.victim, "k8s-dry", job)))
	})
	if got := f.managedRows(); got != rows {
		t.Errorf("dry runs wrote %d ownership records", got-rows)
	}
	if d := f.do("mallory", "GET", "/api/v1/deployables/"+f.own+"/k8s-own", nil).want(t, http.StatusOK); !strings.Contains(string(d.raw), `"key":"v1"`) {
		t.Fatalf("a dry run or a refusal changed her deployable: %s", d.raw)
	}

	// Approvals: a write through /k8s where approval is needed waits for
	// it, as through /api/v1.
	a := f.send("mallory", "POST", k8s(f.approval, "runnables", ""), "application/yaml", []byte(runnable(f.approval, "k8s-wait", job))).want(t, http.StatusCreated)
	if a.str("status", "phase") != "PendingApproval" {
		t.Fatalf("a runnable created through /k8s in %s: %s, want PendingApproval", f.approval, a.raw)
	}

	// What the REST API refuses, /k8s refuses with the same code and
	// words.
	for _, c := range []struct {
		what, body string
		code       int
	}{
		{"a denied kind", runnable(f.own, "k8s-rb", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\nsubjects: [{kind: User, name: mallory}]\n"), http.StatusForbidden},
		{"a cluster-scoped kind", runnable(f.own, "k8s-cr", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: cr}\nrules: []\n"), http.StatusForbidden},
		{"an object aimed at the victim's namespace", runnable(f.own, "k8s-ns", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: "+f.victim+"}\ndata: {k: v}\n"), http.StatusUnprocessableEntity},
		{"a privileged pod", runnable(f.own, "k8s-priv", strings.Replace(job, "image: busybox}", "image: busybox, securityContext: {privileged: true}}", 1)), http.StatusUnprocessableEntity},
		{"an unknown field", strings.Replace(runnable(f.own, "k8s-unk", job), "spec:\n", "spec:\n  bogus: 1\n", 1), http.StatusUnprocessableEntity},
	} {
		rest := f.refused("through /api/v1: "+c.what, c.code, func() answer { return f.yaml("mallory", "POST", "/api/v1/runnables", c.body) })
		kube := f.refused("through /k8s: "+c.what, rest.code, func() answer {
			return f.send("mallory", "POST", k8s(f.own, "runnables", ""), "application/yaml", []byte(c.body))
		})
		if msg := rest.str("message"); rest.code < 400 || msg == "" || !strings.Contains(kube.str("message"), msg) {
			t.Errorf("%s: /api/v1 answers %d %q; /k8s %d %q", c.what, rest.code, msg, kube.code, kube.str("message"))
		}
	}
}
