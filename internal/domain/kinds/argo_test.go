package kinds

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func decode(t testing.TB, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func wf(spec string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec:\n" + spec
}

// findPod returns the pod at a path starting with prefix.
func findPod(pods []PodTemplate, prefix string) *PodTemplate {
	for i := range pods {
		if strings.HasPrefix(pods[i].Path, prefix) {
			return &pods[i]
		}
	}
	return nil
}

// The workflow controller's pods: templateDefaults merged into each
// template, the template winning, lists merged by their keys; the pod's
// fields from the template or else the workflow; podSpecPatch applied.
func TestArgoPods(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  string
		check func(t *testing.T, pods []PodTemplate)
	}{
		{name: "templateDefaults' container reaches a plain container template", spec: `
  templateDefaults:
    container:
      securityContext: {privileged: true}
      volumeMounts: [{name: root, mountPath: /host}]
    volumes: [{name: root, hostPath: {path: /}}]
  templates:
  - name: main
    container: {image: busybox, volumeMounts: [{name: tmp, mountPath: /tmp}]}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec.templates[0] (main)")
			c := p.Spec.Containers[0]
			if c.Name != "main" || c.Image != "busybox" || c.SecurityContext == nil || !*c.SecurityContext.Privileged {
				t.Errorf("main container: %+v", c)
			}
			if len(c.VolumeMounts) != 2 {
				t.Errorf("volumeMounts merged by mountPath: %+v", c.VolumeMounts)
			}
			if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].HostPath == nil {
				t.Errorf("volumes: %+v", p.Spec.Volumes)
			}
		}},
		{name: "the template's own value wins over the default", spec: `
  templateDefaults:
    container: {image: default, securityContext: {runAsUser: 0}}
    serviceAccountName: from-defaults
  templates:
  - name: a
    serviceAccountName: own
    container: {image: own, securityContext: {runAsUser: 1000}}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec.templates[0]")
			c := p.Spec.Containers[0]
			if c.Image != "own" || *c.SecurityContext.RunAsUser != 1000 || p.Spec.ServiceAccountName != "own" {
				t.Errorf("pod: %+v", p.Spec)
			}
		}},
		{name: "sidecars and volumes merged by name", spec: `
  templateDefaults:
    sidecars: [{name: s, image: default, securityContext: {privileged: true}}]
    volumes: [{name: v, emptyDir: {}}, {name: d, emptyDir: {}}]
  templates:
  - name: a
    container: {image: x}
    sidecars: [{name: s, image: own}]
    volumes: [{name: v, hostPath: {path: /etc}}]
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec.templates[0]")
			if len(p.Spec.Containers) != 2 || p.Spec.Containers[1].Image != "own" || p.Spec.Containers[1].SecurityContext == nil {
				t.Errorf("sidecar: %+v", p.Spec.Containers)
			}
			if len(p.Spec.Volumes) != 2 {
				t.Fatalf("volumes: %+v", p.Spec.Volumes)
			}
			for _, v := range p.Spec.Volumes {
				if v.Name == "v" && v.HostPath == nil {
					t.Errorf("volume v: %+v", v)
				}
			}
		}},
		{name: "a default container reaches a containerSet template only as a controller before v4 merges", spec: `
  templateDefaults:
    container: {image: evil, securityContext: {privileged: true}}
  templates:
  - name: set
    containerSet: {containers: [{name: a, image: x}]}
  - name: steps
    steps: [[{name: s, template: set}]]
`, check: func(t *testing.T, pods []PodTemplate) {
			if len(pods) != 2 {
				t.Fatalf("pods: %+v", pods)
			}
			if pods[0].Spec.Containers[0].Name != "a" {
				t.Errorf("v4: %+v", pods[0].Spec.Containers)
			}
			old := findPod(pods, "spec.templates[0] (set) with templateDefaults as a controller before v4")
			if old == nil || old.Spec.Containers[0].Image != "evil" {
				t.Errorf("before v4: %+v", pods)
			}
		}},
		{name: "the workflow's pod fields and podMetadata", spec: `
  hostNetwork: true
  securityContext: {runAsUser: 0}
  podMetadata: {annotations: {a: b}}
  volumes: [{name: w, hostPath: {path: /var}}]
  templates:
  - name: s
    script: {image: python, source: "print(1)"}
    metadata: {labels: {l: m}}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := pods[0]
			if !p.Spec.HostNetwork || p.Spec.SecurityContext == nil || len(p.Spec.Volumes) != 1 || p.Metadata.Annotations["a"] != "b" || p.Metadata.Labels["l"] != "m" {
				t.Errorf("pod: %+v %+v", p.Metadata, p.Spec)
			}
		}},
		{name: "podSpecPatch of the workflow, then of the template", spec: `
  podSpecPatch: '{"hostPID": true, "containers": [{"name": "main", "securityContext": {"privileged": true}}]}'
  templates:
  - name: a
    podSpecPatch: |
      hostIPC: true
    container: {image: x}
  - name: r
    resource: {action: create, manifest: "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}"}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec.templates[0]")
			if !p.Spec.HostPID || !p.Spec.HostIPC || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "x" || !*p.Spec.Containers[0].SecurityContext.Privileged {
				t.Errorf("patched pod: %+v", p.Spec)
			}
			r := findPod(pods, "spec.templates[1]")
			if r == nil || !r.Spec.HostPID {
				t.Errorf("the resource template's pod carries the patch too: %+v", pods)
			}
		}},
		{name: "a podSpecPatch with parameters cannot be judged", spec: `
  templates:
  - name: a
    podSpecPatch: '{"hostPID": {{inputs.parameters.pid}}}'
    container: {image: x}
`, check: func(t *testing.T, pods []PodTemplate) {
			if !strings.Contains(pods[0].Unjudgeable, "parameters") {
				t.Errorf("pod: %+v", pods[0])
			}
		}},
		{name: "templateDefaults' podSpecPatch reaches every template", spec: `
  templateDefaults:
    podSpecPatch: '{"hostPID": true}'
  templates:
  - {name: a, container: {image: x}}
`, check: func(t *testing.T, pods []PodTemplate) {
			if !pods[0].Spec.HostPID {
				t.Errorf("pod: %+v", pods[0].Spec)
			}
		}},
		{name: "the workflow's podSpecPatch reaches the agent pod of http templates", spec: `
  podSpecPatch: '{"containers": [{"name": "mine", "image": "x", "securityContext": {"privileged": true}}]}'
  templates:
  - {name: h, http: {url: "https://example.com"}}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec (the agent pod")
			if p == nil || len(p.Spec.Containers) != 1 || !*p.Spec.Containers[0].SecurityContext.Privileged {
				t.Errorf("pods: %+v", pods)
			}
		}},
		{name: "defaults of the same type merged twice (steps)", spec: `
  templateDefaults:
    steps: [[{name: x}]]
    container: {image: d}
  templates:
  - {name: s, steps: [[{name: a, template: c}]]}
  - {name: c, container: {image: own}}
`, check: func(t *testing.T, pods []PodTemplate) {
			if len(pods) != 1 || pods[0].Spec.Containers[0].Image != "own" {
				t.Errorf("pods: %+v", pods)
			}
		}},
		{name: "templateDefaults reach the templates a templateRef runs", spec: `
  templateDefaults:
    container: {securityContext: {privileged: true}}
  templates:
  - name: s
    steps: [[{name: a, templateRef: {name: elsewhere, template: plain}}]]
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec.templateDefaults (container")
			if p == nil || !*p.Spec.Containers[0].SecurityContext.Privileged {
				t.Errorf("pods: %+v", pods)
			}
		}},
		{name: "the workflow's podSpecPatch reaches the templates a workflowTemplateRef runs", spec: `
  workflowTemplateRef: {name: elsewhere}
  podSpecPatch: '{"hostPID": true}'
  serviceAccountName: wf
  executor: {serviceAccountName: purser-agent}
`, check: func(t *testing.T, pods []PodTemplate) {
			p := findPod(pods, "spec (the pod of a template it references)")
			if p == nil || !p.Spec.HostPID || len(p.Spec.Containers) != 0 || p.Spec.ServiceAccountName != "wf" {
				t.Errorf("pods: %+v", pods)
			}
			if e := findPod(pods, "spec (the pod of a template it references).executor"); e == nil || e.Spec.ServiceAccountName != "purser-agent" {
				t.Errorf("the executor's account: %+v", pods)
			}
		}},
		{name: "templateDefaults of a workflow that references nothing are judged only merged", spec: `
  templateDefaults:
    container: {resources: {requests: {cpu: 1}}}
  templates:
  - {name: s, steps: [[{name: a, template: c}]]}
  - {name: c, container: {image: x}}
`, check: func(t *testing.T, pods []PodTemplate) {
			if len(pods) != 1 {
				t.Errorf("pods: %+v", pods)
			}
		}},
		{name: "steps, dag and suspend make no pod", spec: `
  templateDefaults:
    container: {image: x}
  templates:
  - {name: s, steps: [[{name: a, template: d}]]}
  - {name: d, dag: {tasks: []}}
  - {name: p, suspend: {}}
`, check: func(t *testing.T, pods []PodTemplate) {
			if len(pods) != 0 {
				t.Errorf("pods: %+v", pods)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := Default().PodTemplates(decode(t, wf(tc.spec)))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pods)
		})
	}
}

func TestArgoPodErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"  templates:\n  - {name: a, container: {image: x}, podSpecPatch: 'hostPID: [1'}\n", "podSpecPatch does not parse"},
		{"  templates:\n  - {name: a, container: {image: x}, podSpecPatch: '{\"hostPID\": \"yes\"}'}\n", "podSpecPatch is not a pod spec"},
		{"  templateDefaults: {container: {securityContext: {privileged: maybe}}}\n  templates: []\n", "templateDefaults"},
		{"  templates:\n  - {name: a, container: {image: [x]}}\n", "spec.templates[0]: not a template"},
	} {
		if _, err := Default().PodTemplates(decode(t, wf(tc.spec))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// kubectl's flags as pflag reads them.
func TestParseKubectlFlags(t *testing.T) {
	for _, tc := range []struct {
		flags      []string
		ns         string
		positional string
		wantErr    string
	}{
		{flags: []string{"-nkube-system"}, ns: "kube-system"},
		{flags: []string{"-n", "kube-system"}, ns: "kube-system"},
		{flags: []string{"-n=kube-system"}, ns: "kube-system"},
		{flags: []string{"--namespace=kube-system"}, ns: "kube-system"},
		{flags: []string{"--namespace", "kube-system"}, ns: "kube-system"},
		{flags: []string{"-n", "a", "--namespace=b"}, ns: "b"},
		{flags: []string{"secret", "generic", "x", "--from-literal=password=hunter2", "-nkube-system"}, wantErr: `"--from-literal=password=hunter2"`},
		{flags: []string{"pod", "p", "--wait", "false", "-n", "team-a"}, ns: "team-a", positional: "pod p false"},
		{flags: []string{"--validate=false", "--server-side", "-o", "json"}},
		{flags: []string{"--validate", "x"}, positional: "x"},
		{flags: []string{"-f", "https://example.com/x.yaml"}, wantErr: `flag "-f"`},
		{flags: []string{"--filename=https://example.com/x.yaml"}, wantErr: `flag "--filename=https://example.com/x.yaml"`},
		{flags: []string{"-Rf", "dir"}, wantErr: `flag "-Rf"`},
		{flags: []string{"-A"}, wantErr: "every namespace"},
		{flags: []string{"--kubeconfig", "/etc/kubernetes/admin.conf"}, wantErr: "another cluster"},
		{flags: []string{"-s", "https://10.0.0.1"}, wantErr: "another cluster"},
		{flags: []string{"--raw", "/api/v1/namespaces/kube-system/secrets"}, wantErr: "cannot be judged"},
		{flags: []string{"--something-new"}, wantErr: "unknown flag"},
		{flags: []string{"-n"}, wantErr: "needs an argument"},
		{flags: []string{"--", "-nkube-system"}, positional: "-nkube-system"},
	} {
		got, err := ParseKubectlFlags(tc.flags)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want %q", tc.flags, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.flags, err)
			continue
		}
		if got.Namespace != tc.ns || strings.Join(got.Positional, " ") != tc.positional {
			t.Errorf("%q: namespace %q, positional %q; want %q, %q", tc.flags, got.Namespace, got.Positional, tc.ns, tc.positional)
		}
	}
}

// Resource templates: every document of the manifest; flags' namespace on
// each; objects named in flags refused unless the action creates nothing;
// templateDefaults' resource merged in.
func TestArgoNested(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string // path kind ns
		wantErr    string
	}{
		{name: "every document", spec: `
  templates:
  - resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: a}
        ---
        ---
        apiVersion: v1
        kind: Secret
        metadata: {name: s, namespace: kube-system}
`, want: []string{"spec.templates[0].resource.manifest ConfigMap ", "spec.templates[0].resource.manifest (document 2) Secret "}},
		{name: "a JSON stream", spec: `
  templates:
  - resource: {action: apply, manifest: '{"apiVersion":"v1","kind":"ConfigMap"} {"apiVersion":"v1","kind":"Secret"}'}
`, want: []string{"spec.templates[0].resource.manifest ConfigMap ", "spec.templates[0].resource.manifest (document 2) Secret "}},
		{name: "flags name the namespace", spec: `
  templates:
  - resource: {action: create, flags: ["-nkube-system"], manifest: "{apiVersion: v1, kind: ConfigMap}"}
`, want: []string{"spec.templates[0].resource.manifest ConfigMap kube-system"}},
		{name: "flags alone name the namespace", spec: `
  templates:
  - resource: {action: delete, flags: ["pods", "--all", "-n", "kube-system"]}
`, want: []string{"spec.templates[0].resource.flags  kube-system"}},
		{name: "the workflow's own namespace as a parameter", spec: `
  templates:
  - resource: {action: create, flags: ["-n", "{{workflow.namespace}}"], manifest: "{apiVersion: v1, kind: ConfigMap}"}
  - resource: {action: create, flags: ["-n", "{{inputs.parameters.ns}}"], manifest: "{apiVersion: v1, kind: ConfigMap}"}
`, want: []string{"spec.templates[0].resource.manifest ConfigMap ", "spec.templates[1].resource.manifest ConfigMap {{inputs.parameters.ns}}"}},
		{name: "flags-only secret", spec: `
  templates:
  - resource: {action: create, flags: ["secret", "generic", "x", "--from-literal=password=hunter2", "-nkube-system"]}
`, wantErr: "--from-literal=password=hunter2"},
		{name: "objects named in flags", spec: `
  templates:
  - resource: {action: create, flags: ["namespace", "x"]}
`, wantErr: `"namespace x" names what kubectl create acts on outside the manifest`},
		{name: "templateDefaults' flags", spec: `
  templateDefaults:
    resource: {flags: ["--namespace=kube-system"]}
  templates:
  - resource: {action: create, manifest: "{apiVersion: v1, kind: ConfigMap}"}
`, want: []string{"spec.templates[0].resource.manifest ConfigMap kube-system"}},
		{name: "templateDefaults' flags reach the resource templates it references", spec: `
  templateDefaults:
    resource: {flags: ["-nkube-system"]}
  templates:
  - {name: s, steps: [[{name: a, templateRef: {name: elsewhere, template: make}}]]}
`, want: []string{"spec.templateDefaults.resource.flags  kube-system"}},
		{name: "a document that is not an object", spec: `
  templates:
  - resource: {action: create, manifest: "{apiVersion: v1, kind: ConfigMap}\n---\n- a\n"}
`, wantErr: "document 2 of the manifest is not an object"},
		{name: "a manifest from an artifact", spec: `
  templates:
  - resource: {action: create, manifestFrom: {artifact: {name: m}}}
`, wantErr: "manifestFrom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Default().Nested(decode(t, wf(tc.spec)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, n := range got {
				kind, _ := n.Object["kind"].(string)
				s = append(s, n.Path+" "+kind+" "+n.Namespace)
			}
			if strings.Join(s, "|") != strings.Join(tc.want, "|") {
				t.Errorf("nested:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The FlinkDeployment's driver gives admission each role's pod as
// flink.PodTemplate merges it, and the service account.
func TestFlinkPods(t *testing.T) {
	pods, err := Default().PodTemplates(decode(t, `{apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment, spec: {serviceAccount: flink, taskManager: {podTemplate: {spec: {hostNetwork: true}}}}}`))
	if err != nil || len(pods) != 2 || !pods[0].Spec.HostNetwork || pods[1].Spec.ServiceAccountName != "flink" {
		t.Errorf("pods %+v, %v", pods, err)
	}
}

// Every built-in workload's template is where its driver says.
func TestWorkloadPods(t *testing.T) {
	for _, doc := range []string{
		`{apiVersion: v1, kind: Pod, spec: {containers: [{name: c, image: x}]}}`,
		`{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {containers: [{name: c, image: x}]}}}}`,
		`{apiVersion: batch/v1, kind: CronJob, spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: x}]}}}}}}`,
		`{apiVersion: apps/v1, kind: DaemonSet, spec: {template: {spec: {containers: [{name: c, image: x}]}}}}`,
		`{apiVersion: example.com/v1, kind: Unknown, spec: {template: {spec: {containers: [{name: c, image: x}]}}}}`,
	} {
		pods, err := Default().PodTemplates(decode(t, doc))
		if err != nil || len(pods) != 1 || pods[0].Spec.Containers[0].Image != "x" {
			t.Errorf("%s: %+v %v", doc, pods, err)
		}
	}
}
