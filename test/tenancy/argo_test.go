package tenancy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// argoWorkflow is a Workflow with spec as written (indented two spaces).
func argoWorkflow(name, spec string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: " + name + "}\nspec:\n  entrypoint: main\n" + spec
}

// Issue 33, holes 1 and 3: what Argo's controller makes of a workflow is
// what purser judges. templateDefaults merged into each template,
// podSpecPatch applied, every document of a resource template's manifest
// and its kubectl flags read as kubectl reads them: each attempt is
// refused with the rule's words and nothing is stored, and the Secret's
// value is in no table.
func testArgo(t *testing.T, f *farm) {
	for _, tc := range []struct {
		what string
		code int
		spec string
		want []string
	}{
		{"templateDefaults making a plain container privileged with the node's root mounted", http.StatusUnprocessableEntity, `
  templateDefaults:
    container:
      securityContext: {privileged: true}
      volumeMounts: [{name: root, mountPath: /host}]
    volumes: [{name: root, hostPath: {path: /}}]
  templates:
  - name: main
    container: {image: busybox, command: [cat, /host/etc/shadow]}
`, []string{`privileged (container \"main\" must not set securityContext.privileged=true)`, `hostPath volumes (volume \"root\")`}},
		{"templateDefaults making privileged the template a templateRef runs", http.StatusUnprocessableEntity, `
  templateDefaults:
    container: {securityContext: {privileged: true}}
  templates:
  - name: main
    steps: [[{name: a, templateRef: {name: shared, template: plain}}]]
`, []string{"spec.template.spec.templateDefaults (container, as merged into the templates it references)", "privileged"}},
		{"a workflow's podSpecPatch entering the host's namespaces", http.StatusUnprocessableEntity, `
  podSpecPatch: '{"hostPID": true, "containers": [{"name": "main", "securityContext": {"privileged": true}}]}'
  templates:
  - name: main
    container: {image: busybox}
`, []string{"host namespaces (hostPID=true)", "privileged"}},
		{"templateDefaults' podSpecPatch with parameters filled in at run time", http.StatusUnprocessableEntity, `
  arguments: {parameters: [{name: patch, value: '{"hostPID": true}'}]}
  templateDefaults:
    podSpecPatch: '{{workflow.parameters.patch}}'
  templates:
  - name: main
    container: {image: busybox}
`, []string{"podSpecPatch has parameters", "cannot be known before"}},
		{"a Secret in kube-system as the second document of a manifest", http.StatusForbidden, `
  templates:
  - name: main
    resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: harmless}
        ---
        apiVersion: v1
        kind: Secret
        metadata: {name: stolen, namespace: kube-system}
        stringData: {password: hunter2}
`, []string{"manifest (document 2)", "kube-system"}},
		{"a Secret in its own namespace as the second document of a manifest", http.StatusUnprocessableEntity, `
  templates:
  - name: main
    resource:
      action: create
      manifest: |
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "harmless"}}
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kept"}, "stringData": {"password": "hunter2"}}
`, []string{"manifest (document 2): a Secret here"}},
		{"a resource template of kubectl flags alone making a Secret in kube-system", http.StatusUnprocessableEntity, `
  templates:
  - name: main
    resource:
      action: create
      flags: ["secret", "generic", "x", "--from-literal=password=hunter2", "-nkube-system"]
`, []string{`flag \"--from-literal=password=hunter2\"`, "cannot be judged"}},
		{"-nkube-system beside a manifest", http.StatusUnprocessableEntity, `
  templates:
  - name: main
    resource:
      action: apply
      flags: ["-nkube-system"]
      manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
`, []string{`-nkube-system would make the action run in namespace \"kube-system\"`}},
		{"--namespace kube-system from templateDefaults", http.StatusUnprocessableEntity, `
  templateDefaults:
    resource: {flags: ["--namespace", "kube-system"]}
  templates:
  - name: main
    resource:
      action: create
      manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
`, []string{`--namespace would make the action run in namespace \"kube-system\"`}},
		{"-f URL beside a manifest", http.StatusUnprocessableEntity, `
  templates:
  - name: main
    resource:
      action: create
      flags: ["-f", "https://example.com/anything.yaml"]
      manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
`, []string{`flag \"-f\"`}},
	} {
		a := f.refused(tc.what, tc.code, func() answer {
			return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "argo", argoWorkflow("argo", tc.spec)))
		})
		for _, w := range tc.want {
			if !strings.Contains(string(a.raw), w) {
				t.Errorf("%s: the answer does not say %s: %s", tc.what, w, a.raw)
			}
		}
	}

	// The same workflow written with the defaults in the template, and a
	// podSpecPatch that asks nothing of the host, are accepted: the
	// refusals above are the rules', not Argo's features'.
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "argo-ok", argoWorkflow("argo-ok", `
  templateDefaults:
    container: {resources: {requests: {cpu: 10m}}}
  podSpecPatch: '{"terminationGracePeriodSeconds": 5}'
  templates:
  - name: main
    container: {image: busybox}
  - name: make
    resource:
      action: create
      flags: ["-n", "`+f.own+`", "--validate=false"]
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: a}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: b}
`))).want(t, http.StatusAccepted)

	// Behind the API's back the submitter judges the same pods: the farm's
	// member cluster serves no Argo kinds, so that case is
	// internal/control/submitter's TestArgoJudgedAsTheControllerBuildsIt,
	// on clusters that run Argo's controller.

	for _, table := range []string{"runnables", "deployables", "audit_log"} {
		var n int
		if err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, "SELECT count(*) FROM "+table+" WHERE CAST("+
			map[string]string{"runnables": "spec", "deployables": "spec", "audit_log": "details"}[table]+" AS TEXT) LIKE ?"), "%hunter2%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s hold the Secret's value in clear", n, table)
		}
	}
}
