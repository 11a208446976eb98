package admission

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, doc string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

const job = `
apiVersion: batch/v1
kind: Job
metadata: {name: report}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
`

// A Job whose pod is what the baseline level allows, changed one way.
func jobWith(t *testing.T, edit func(pod map[string]any)) map[string]any {
	obj := decode(t, job)
	pod := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	edit(pod)
	return obj
}

func container(pod map[string]any) map[string]any {
	return pod["containers"].([]any)[0].(map[string]any)
}

func TestCheck(t *testing.T) {
	checker, err := NewChecker("purser-agent", "purser-member")
	if err != nil {
		t.Fatal(err)
	}
	restrictedPod := func(pod map[string]any) {
		pod["securityContext"] = map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
		container(pod)["securityContext"] = map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}}
	}
	for _, tc := range []struct {
		name  string
		obj   map[string]any
		level Level
		want  []string // substrings, one per violation; none: allowed
	}{
		{name: "a plain Job at baseline", obj: decode(t, job), level: LevelBaseline},
		{name: "privileged", level: LevelBaseline, obj: jobWith(t, func(p map[string]any) {
			container(p)["securityContext"] = map[string]any{"privileged": true}
		}), want: []string{`violates PodSecurity "baseline:latest": privileged (container "main" must not set securityContext.privileged=true)`}},
		{name: "host namespaces and network", level: LevelBaseline, obj: jobWith(t, func(p map[string]any) {
			p["hostPID"], p["hostNetwork"] = true, true
		}), want: []string{"host namespaces (hostNetwork=true, hostPID=true)"}},
		{name: "a hostPath volume", level: LevelBaseline, obj: jobWith(t, func(p map[string]any) {
			p["volumes"] = []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}}
		}), want: []string{`hostPath volumes (volume "root")`}},
		{name: "purser's service account, even at privileged", level: LevelPrivileged, obj: jobWith(t, func(p map[string]any) {
			p["serviceAccountName"] = "purser-agent"
		}), want: []string{`service account "purser-agent" is one purser's own components run as`}},
		{name: "nodeName below privileged", level: LevelBaseline, obj: jobWith(t, func(p map[string]any) {
			p["nodeName"] = "node-1"
		}), want: []string{`nodeName "node-1" places the pod`}},
		{name: "everything at privileged", level: LevelPrivileged, obj: jobWith(t, func(p map[string]any) {
			container(p)["securityContext"] = map[string]any{"privileged": true}
			p["hostPID"], p["nodeName"] = true, "node-1"
		})},
		{name: "restricted wants more than baseline", level: LevelRestricted, obj: decode(t, job),
			want: []string{`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`}},
		{name: "a restricted pod", level: LevelRestricted, obj: jobWith(t, restrictedPod)},
		{name: "a CronJob's pod", level: LevelBaseline, obj: decode(t, `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 1 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          hostIPC: true
          containers: [{name: c, image: busybox}]
`), want: []string{"host namespaces (hostIPC=true)"}},
		{name: "a Deployment-shaped custom kind", level: LevelBaseline, obj: decode(t, `
apiVersion: example.com/v1
kind: Thing
metadata: {name: t}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]
`), want: []string{`non-default capabilities (container "c" must not include "SYS_ADMIN"`}},
		{name: "a Workflow's script and sidecar templates", level: LevelBaseline, obj: decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: wf-}
spec:
  entrypoint: main
  volumes: [{name: host, hostPath: {path: /var/run}}]
  templates:
  - name: main
    steps: [[{name: a, template: run}]]
  - name: run
    script:
      image: busybox
      source: id
      securityContext: {privileged: true}
    sidecars:
    - {name: side, image: busybox}
`), want: []string{`spec.templates[1] (run): violates PodSecurity "baseline:latest": hostPath volumes (volume "host"), privileged (container "main" must not set securityContext.privileged=true)`}},
		{name: "a Workflow's pod spec patch", level: LevelBaseline, obj: decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: run
  podSpecPatch: '{"hostPID": true}'
  templates:
  - name: run
    container: {image: busybox}
`), want: []string{"host namespaces (hostPID=true)"}},
		{name: "a Workflow's executor account", level: LevelBaseline, obj: decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: run
  executor: {serviceAccountName: purser-member}
  templates:
  - name: run
    container: {image: busybox}
`), want: []string{`spec.templates[0] (run).executor: service account "purser-member"`}},
		{name: "a CronWorkflow", level: LevelBaseline, obj: decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: cwf}
spec:
  schedule: "* * * * *"
  workflowSpec:
    entrypoint: run
    hostNetwork: true
    templates:
    - name: run
      container: {image: busybox}
`), want: []string{"host namespaces (hostNetwork=true)"}},
		{name: "a FlinkDeployment's JobManager, merged with the common template", level: LevelBaseline, obj: decode(t, `
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: f}
spec:
  serviceAccount: flink
  podTemplate:
    spec:
      containers: [{name: flink-main-container}]
  jobManager:
    podTemplate:
      spec:
        containers: [{name: flink-main-container, securityContext: {privileged: true}}]
  taskManager: {}
`), want: []string{`spec.jobManager.podTemplate (merged with spec.podTemplate): violates PodSecurity "baseline:latest": privileged (container "flink-main-container"`}},
		{name: "a FlinkDeployment's common template reaches both roles", level: LevelBaseline, obj: decode(t, `
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: f}
spec:
  podTemplate:
    spec:
      hostPID: true
      containers: [{name: flink-main-container}]
`), want: []string{"spec.jobManager.podTemplate", "spec.taskManager.podTemplate"}},
		{name: "a FlinkDeployment under purser's account", level: LevelPrivileged, obj: decode(t, `
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: f}
spec:
  serviceAccount: purser-agent
`), want: []string{`spec.serviceAccount: service account "purser-agent"`}},
		{name: "a ConfigMap has no pods", level: LevelRestricted, obj: decode(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: b}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checker.Check(tc.level, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(tc.want), Summary(got))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("violation %d:\n got  %s\n want %s", i, got[i], w)
				}
			}
		})
	}
}

func TestNotAPodSpec(t *testing.T) {
	checker, err := NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	_, err = checker.Check(LevelBaseline, decode(t, `{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {containers: "not a list"}}}}`))
	if err == nil || !strings.Contains(err.Error(), "spec.template.spec: not a pod spec") {
		t.Errorf("err = %v, want one naming spec.template.spec", err)
	}
}

func TestParseLevel(t *testing.T) {
	for _, s := range []string{"privileged", "baseline", "restricted"} {
		if l, err := ParseLevel(s); err != nil || string(l) != s {
			t.Errorf("ParseLevel(%q) = %q, %v", s, l, err)
		}
	}
	if _, err := ParseLevel("root"); err == nil || !strings.Contains(err.Error(), "privileged, baseline, restricted") {
		t.Errorf("ParseLevel(root) = %v", err)
	}
}

func TestReview(t *testing.T) {
	checker, err := NewChecker("purser-agent")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	review := func(runnable bool, level Level) Review {
		kinds = nil
		return Review{Checker: checker, Level: level, Namespace: "team-a", Runnable: runnable,
			Kind: func(obj map[string]any, path string) error {
				kind, _ := obj["kind"].(string)
				md, _ := obj["metadata"].(map[string]any)
				ns, _ := md["namespace"].(string)
				kinds = append(kinds, path+" "+kind)
				if ns != "" && ns != "team-a" {
					return fmt.Errorf("%s: %s would land in namespace %s", path, kind, ns)
				}
				return nil
			}}
	}
	workflow := decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - name: make
    resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: Secret
        metadata: {name: s, namespace: kube-system}
        stringData: {token: hunter2}
`)
	err = review(true, LevelBaseline).Check(workflow)
	if err == nil || !strings.Contains(err.Error(), "would land in namespace kube-system") {
		t.Fatalf("a Workflow creating a Secret in kube-system: %v", err)
	}
	if strings.Join(kinds, ";") != "spec.template.spec.templates[0].resource.manifest Secret" {
		t.Errorf("kinds asked: %v", kinds)
	}

	inNamespace := decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource:
      action: create
      manifest: '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": "b"}}'
`)
	var refusal *Refusal
	if err := review(true, LevelBaseline).Check(inNamespace); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), "declare it as a Deployable") {
		t.Fatalf("a Secret inside a runnable: %v", err)
	}

	// kubectl's -n wins over the manifest, so the flag is what is judged,
	// however pflag lets it be written; and with no manifest at all.
	for _, flags := range []string{`["-nkube-system"]`, `["-n", "kube-system"]`, `["--namespace=kube-system"]`, `["--namespace", "kube-system"]`, `["-n=kube-system"]`} {
		for _, manifest := range []string{`, manifest: "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}"`, ``} {
			wf := decode(t, `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, spec: {templates: [{resource: {action: delete, flags: `+flags+manifest+`}}]}}`)
			if err := review(true, LevelBaseline).Check(wf); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), `in namespace "kube-system", not "team-a"`) {
				t.Errorf("flags %s%s: %v", flags, manifest, err)
			}
		}
	}
	own := decode(t, `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, spec: {templates: [{resource: {action: create, flags: ["-nteam-a"], manifest: "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}"}}]}}`)
	if err := review(true, LevelBaseline).Check(own); err != nil {
		t.Errorf("-n of the runnable's own namespace: %v", err)
	}
	// The second document of a manifest is judged as the first is.
	second := decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: c}
        ---
        apiVersion: v1
        kind: Secret
        metadata: {name: s}
        stringData: {token: hunter2}
`)
	if err := review(true, LevelBaseline).Check(second); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), "manifest (document 2): a Secret here") {
		t.Fatalf("a Secret in a second document: %v", err)
	}

	list := decode(t, `{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}`)
	if err := review(false, LevelBaseline).Check(list); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), "a List is not an object a cluster stores") {
		t.Fatalf("a List deployable: %v", err)
	}

	// Kinds without a driver: one named like a List is judged by its kind
	// unless it is a list as kubectl reads one (items), and the items of
	// any object kubectl reads as a list are judged, whatever its kind.
	undriven := review(true, LevelBaseline)
	undriven.Undriven = func(gk schema.GroupKind) error {
		if gk.Group == "example.com" {
			return fmt.Errorf("no driver for kind %s.%s", gk.Kind, gk.Group)
		}
		return nil
	}
	for name, c := range map[string]struct{ doc, want string }{
		"a custom kind named like a List": {`{apiVersion: example.com/v1, kind: GizmoList, spec: {podTemplate: {spec: {hostPID: true}}}}`, "no driver for kind GizmoList.example.com"},
		"a *List whose items are no list": {`{apiVersion: example.com/v1, kind: GizmoList, items: surprise}`, "a GizmoList is not an object a cluster stores"},
		"a privileged Pod as a ConfigMap's item in a manifest": {`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource:
      action: create
      manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}]}}]}'
`, "privileged"},
		"a Gizmo as a ConfigMap's item in a manifest": {`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource: {action: create, manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "items": [{"apiVersion": "example.com/v1", "kind": "Gizmo"}]}'}
`, "items[0]: no driver for kind Gizmo.example.com"},
	} {
		err := undriven.Check(decode(t, c.doc))
		if !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, c.want)
		}
	}
	// At the top, the object is created as written (by the writer's
	// client, not kubectl): a Gizmo with items is a Gizmo, and a
	// ConfigMap's odd items field is no list of objects.
	if err := undriven.Check(decode(t, `{apiVersion: example.com/v1, kind: Gizmo, items: []}`)); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), "no driver for kind Gizmo.example.com") {
		t.Errorf("a Gizmo with items: %v", err)
	}
	if err := undriven.Check(decode(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, items: [1, "two"]}`)); err != nil {
		t.Errorf("a ConfigMap with an items field of its own: %v", err)
	}
	// A list of Gizmos' kind (nested, with items) is no Gizmo: its items are what is judged.
	if err := undriven.Check(decode(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
spec:
  templates:
  - resource: {action: create, manifest: '{"apiVersion": "example.com/v1", "kind": "GizmoList", "items": []}'}
`)); err != nil {
		t.Errorf("an empty list of Gizmos in a manifest: %v", err)
	}

	secret := decode(t, `{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {a: b}}`)
	if err := review(false, LevelRestricted).Check(secret); err != nil {
		t.Fatalf("a deployable's own Secret: %v", err)
	}

	binding := decode(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b}, roleRef: {kind: ClusterRole, name: cluster-admin}, subjects: [{kind: Group, name: "system:unauthenticated"}]}`)
	if err := review(false, LevelBaseline).Check(binding); !errors.As(err, &refusal) || !strings.Contains(refusal.Error(), `ClusterRole "cluster-admin"`) {
		t.Fatalf("a RoleBinding of cluster-admin: %v", err)
	}

	privileged := decode(t, `{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {containers: [{name: c, image: x, securityContext: {privileged: true}}]}}}}`)
	if err := review(true, LevelBaseline).Check(privileged); !errors.As(err, &refusal) || refusal.Violations[0].Path != "spec.template.spec.template.spec" {
		t.Fatalf("a privileged Job: %v", err)
	}
	if err := review(true, LevelPrivileged).Check(privileged); err != nil {
		t.Fatalf("a privileged Job in a privileged namespace: %v", err)
	}
}
