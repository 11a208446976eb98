package kinds

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzArgoPods: whatever a tenant writes as a workflow, computing its
// pods and nested objects returns an answer or an error, never panics;
// and a pod's containers are never dropped by templateDefaults.
func FuzzArgoPods(f *testing.F) {
	for _, seed := range []string{
		wf("  templateDefaults:\n    container: {securityContext: {privileged: true}, volumeMounts: [{name: r, mountPath: /h}]}\n    volumes: [{name: r, hostPath: {path: /}}]\n  templates:\n  - {name: a, container: {image: x}}\n"),
		wf("  podSpecPatch: '{\"hostPID\": true}'\n  templates:\n  - {name: a, script: {image: x, source: s}, podSpecPatch: 'hostIPC: true'}\n"),
		wf("  templates:\n  - resource: {action: create, manifest: \"{kind: ConfigMap}\\n---\\n{kind: Secret, metadata: {namespace: kube-system}}\"}\n"),
		wf("  templates:\n  - resource: {action: create, flags: [secret, generic, x, --from-literal=password=hunter2, -nkube-system]}\n"),
		wf("  templateDefaults: {containerSet: {containers: [{name: a}]}, sidecars: [{name: s}]}\n  templates:\n  - {name: s, steps: [[{name: a}]]}\n  - {name: c, containerSet: {containers: [{name: b}]}}\n"),
		`{apiVersion: argoproj.io/v1alpha1, kind: CronWorkflow, spec: {workflowSpec: {templates: [{container: {}}]}}}`,
	} {
		f.Add(seed)
	}
	reg := Default()
	f.Fuzz(func(t *testing.T, doc string) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			return
		}
		pods, err := reg.PodTemplates(obj)
		if err == nil {
			for _, p := range pods {
				if p.Path == "" {
					t.Errorf("a pod without a path: %+v", p)
				}
			}
		}
		_, _ = reg.Nested(obj)
	})
}
