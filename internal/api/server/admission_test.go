package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// jobWith is a Runnable of a Job whose pod spec has extra (YAML, indented
// for the pod spec) beside its one container, whose securityContext is sc.
func jobWith(ns, name, extra, sc string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s, namespace: %s}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        spec:
          restartPolicy: Never
%s
          containers:
          - name: main
            image: busybox
            securityContext: {%s}
`, name, ns, extra, sc)
}

// TestWhatTheWorkMayDo: what a namespace editor may make a member cluster
// run is reviewed at the API as the kube-apiserver's Pod Security
// admission would (the library's own words), with purser's own service
// accounts reserved, objects inside objects checked as top-level ones,
// Secrets kept out of what is stored in clear, and RoleBindings held to
// their namespace; every refusal changes nothing.
func TestWhatTheWorkMayDo(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	before := h.counts()
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"privileged", "POST", "/api/v1/runnables", jobWith("team-a", "priv", "", "privileged: true"), http.StatusUnprocessableEntity,
			`violates PodSecurity \"baseline:latest\": privileged (container \"main\" must not set securityContext.privileged=true)`},
		{"host namespaces", "POST", "/api/v1/runnables", jobWith("team-a", "hostpid", "          hostPID: true\n          hostNetwork: true", ""), http.StatusUnprocessableEntity,
			`host namespaces (hostNetwork=true, hostPID=true)`},
		{"hostPath /", "POST", "/api/v1/runnables", jobWith("team-a", "hostpath", "          volumes: [{name: root, hostPath: {path: /}}]", ""), http.StatusUnprocessableEntity,
			`hostPath volumes (volume \"root\")`},
		{"purser's service account", "POST", "/api/v1/runnables", jobWith("team-a", "sa", "          serviceAccountName: purser-hub", ""), http.StatusUnprocessableEntity,
			`service account \"purser-hub\" is one purser's own components run as`},
		{"a node of its choosing", "POST", "/api/v1/runnables", jobWith("team-a", "node", "          nodeName: node-1", ""), http.StatusUnprocessableEntity,
			`nodeName \"node-1\" places the pod`},
		{"a Workflow making a Secret in kube-system", "POST", "/api/v1/runnables", `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: wf, namespace: team-a}
spec:
  template:
    apiVersion: argoproj.io/v1alpha1
    kind: Workflow
    spec:
      entrypoint: make
      templates:
      - name: make
        resource:
          action: create
          manifest: |
            apiVersion: v1
            kind: Secret
            metadata: {name: stolen, namespace: kube-system}
            stringData: {token: hunter2}
`, http.StatusForbidden, `Secret is namespaced and would land in namespace kube-system`},
		{"a Secret inside a Workflow", "POST", "/api/v1/runnables", `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: wf2, namespace: team-a}
spec:
  template:
    apiVersion: argoproj.io/v1alpha1
    kind: Workflow
    spec:
      entrypoint: make
      templates:
      - name: make
        resource: {action: create, manifest: '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "hunter2"}}'}
`, http.StatusUnprocessableEntity, `declare it as a Deployable of its own`},
		{"a List deployable with a Secret", "PUT", "/api/v1/deployables/team-a/bundle", `apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: bundle, namespace: team-a}
spec:
  template:
    apiVersion: v1
    kind: List
    items:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
    - {apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {token: hunter2}}
`, http.StatusUnprocessableEntity, `a List is not an object a cluster stores`},
		{"cluster-admin for the unauthenticated", "PUT", "/api/v1/deployables/team-b/open", `apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: open, namespace: team-b}
spec:
  template:
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata: {name: open}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
    subjects: [{kind: Group, name: "system:unauthenticated", apiGroup: rbac.authorization.k8s.io}]
`, http.StatusUnprocessableEntity, `grants ClusterRole \"cluster-admin\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.yaml("alice", tc.method, tc.path, tc.body).want(t, tc.code)
			if !strings.Contains(string(r.raw), tc.want) {
				t.Errorf("answer %s, want it to say %s", r.raw, tc.want)
			}
			if strings.Contains(string(r.raw), "hunter2") {
				t.Errorf("the refusal repeats a Secret's value: %s", r.raw)
			}
		})
	}
	if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refusals changed the database: %v -> %v", before, after)
	}

	// A namespace whose level is privileged may run the privileged Job,
	// never under purser's account.
	p := testPolicy()
	nsp := p.Namespaces["team-a"]
	nsp.PodSecurity = "privileged"
	p.Namespaces["team-a"] = nsp
	h.setPolicy(t, p)
	h.yaml("alice", "POST", "/api/v1/runnables", jobWith("team-a", "priv", "          hostPID: true", "privileged: true")).want(t, http.StatusAccepted)
	h.yaml("alice", "POST", "/api/v1/runnables", jobWith("team-a", "sa", "          serviceAccountName: purser-agent", "")).want(t, http.StatusUnprocessableEntity)

	// A restricted namespace asks for more than baseline.
	nsp.PodSecurity = "restricted"
	p.Namespaces["team-a"] = nsp
	h.setPolicy(t, p)
	r := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "plain", "true")).want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(r.raw), `restricted:latest`) {
		t.Errorf("a plain Job in a restricted namespace: %s", r.raw)
	}
}
