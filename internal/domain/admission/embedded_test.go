package admission

import (
	"strings"
	"testing"
)

func TestEmbeddedObjects(t *testing.T) {
	rules := []EmbeddedRule{{Kind: "Bundle.example.com", Paths: []string{"spec.objects[]", "spec.extra.manifest"}}}
	for _, tc := range []struct {
		name    string
		doc     string
		want    []string // path kind/namespace, in order
		inText  []bool
		wantErr string
	}{
		{name: "a List's items", doc: `
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- {apiVersion: v1, kind: Secret, metadata: {name: b, namespace: kube-system}, stringData: {k: v}}
`, want: []string{"items[0] ConfigMap/", "items[1] Secret/kube-system"}, inText: []bool{false, false}},
		{name: "a typed list", doc: `{apiVersion: v1, kind: ConfigMapList, items: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]}`,
			want: []string{"items[0] ConfigMap/"}},
		{name: "a Workflow's resource template", doc: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  templates:
  - name: make-secret
    resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: Secret
        metadata: {name: stolen, namespace: kube-system}
        stringData: {token: hunter2}
  - name: plain
    container: {image: busybox}
`, want: []string{"spec.templates[0].resource.manifest Secret/kube-system"}, inText: []bool{true}},
		{name: "a CronWorkflow's resource template", doc: `
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
spec:
  workflowSpec:
    templates:
    - resource: {action: apply, manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'}
`, want: []string{"spec.workflowSpec.templates[0].resource.manifest ConfigMap/"}},
		{name: "a manifest from an artifact", doc: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource: {action: create, manifestFrom: {artifact: {name: m}}}
`, wantErr: "manifestFrom: a manifest read from an artifact cannot be checked"},
		{name: "flags that change the namespace", doc: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource: {action: create, flags: ["--kubeconfig=/etc/admin.conf"], manifest: "{apiVersion: v1, kind: ConfigMap}"}
`, wantErr: `flag "--kubeconfig=/etc/admin.conf" would point kubectl at another cluster`},
		{name: "a manifest that does not parse", doc: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource: {action: create, manifest: "kind: [unclosed"}
`, wantErr: "the manifest does not parse"},
		{name: "a policy rule's paths", doc: `
apiVersion: example.com/v1
kind: Bundle
spec:
  objects:
  - {apiVersion: v1, kind: ServiceAccount, metadata: {name: sa}}
  - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: crb}}
  extra:
    manifest: "{apiVersion: v1, kind: Namespace, metadata: {name: other}}"
`, want: []string{"spec.objects[0] ServiceAccount/", "spec.objects[1] ClusterRoleBinding/", "spec.extra.manifest Namespace/"}},
		{name: "a rule's list that is not one", doc: `{apiVersion: example.com/v1, kind: Bundle, spec: {objects: {a: b}}}`, wantErr: "spec.objects is not a list"},
		{name: "a Job embeds nothing", doc: `{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {containers: []}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EmbeddedObjects(decode(t, tc.doc), rules)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range got {
				kind, _ := e.Object["kind"].(string)
				ns := ""
				if md, ok := e.Object["metadata"].(map[string]any); ok {
					ns, _ = md["namespace"].(string)
				}
				paths = append(paths, e.Path+" "+kind+"/"+ns)
			}
			if strings.Join(paths, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("embedded:\n got  %v\n want %v", paths, tc.want)
			}
			for i, want := range tc.inText {
				if i < len(got) && got[i].InString != want {
					t.Errorf("%s: InString = %v, want %v", got[i].Path, got[i].InString, want)
				}
			}
		})
	}
}

func TestCheckRBAC(t *testing.T) {
	binding := func(ref, subjects string) map[string]any {
		return decode(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b}, roleRef: `+ref+`, subjects: `+subjects+`}`)
	}
	role := `{apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}`
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		granted []string
		wantErr string
	}{
		{name: "a Role to the namespace's service account", obj: binding(role, `[{kind: ServiceAccount, name: app}]`)},
		{name: "the namespace's service accounts group", obj: binding(role, `[{kind: Group, name: "system:serviceaccounts:team-a"}]`)},
		{name: "a person", obj: binding(role, `[{kind: User, name: alice}]`)},
		{name: "cluster-admin to the unauthenticated", obj: binding(`{kind: ClusterRole, name: cluster-admin}`, `[{kind: Group, name: "system:unauthenticated"}]`),
			wantErr: `grants ClusterRole "cluster-admin"`},
		{name: "a granted ClusterRole", obj: binding(`{kind: ClusterRole, name: view}`, `[{kind: ServiceAccount, name: app}]`), granted: []string{"view"}},
		{name: "the unauthenticated group", obj: binding(role, `[{kind: Group, name: "system:unauthenticated"}]`),
			wantErr: `group "system:unauthenticated" reaches beyond namespace team-a`},
		{name: "another namespace's service account", obj: binding(role, `[{kind: ServiceAccount, name: default, namespace: kube-system}]`),
			wantErr: "service account kube-system/default is of another namespace"},
		{name: "the anonymous user", obj: binding(role, `[{kind: User, name: "system:anonymous"}]`), wantErr: `user "system:anonymous" is one of Kubernetes' own`},
		{name: "not a binding", obj: decode(t, `{apiVersion: v1, kind: ConfigMap}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRBAC(tc.obj, "team-a", tc.granted)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
