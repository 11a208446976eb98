package submitter_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/hub/store"
)

// TestArgoJudgedAsTheControllerBuildsIt: Workflows stored behind the
// API's back, whose spec looks plain but which Argo's controller would
// turn into a privileged pod (templateDefaults) or a Secret in another
// namespace (a second manifest document, kubectl's -n), are refused by
// the submitter before it creates anything, on clusters that run Argo.
func TestArgoJudgedAsTheControllerBuildsIt(t *testing.T) {
	f, cs := startWithPlatformAdmins(t)
	tenant := &store.Author{Name: "alice", Groups: []string{"team-a"}}
	for _, tc := range []struct{ name, spec string }{
		{"defaults", `
  templateDefaults:
    container: {securityContext: {privileged: true}}
    volumes: [{name: root, hostPath: {path: /}}]
  templates:
  - {name: main, container: {image: busybox}}
`},
		{"patched", `
  podSpecPatch: '{"hostPID": true}'
  templates:
  - {name: main, container: {image: busybox}}
`},
		{"second-doc", `
  templates:
  - name: main
    resource:
      action: create
      flags: ["-nkube-system"]
      manifest: |
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}}
`},
	} {
		var tmpl map[string]any
		if err := yaml.Unmarshal([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: "+tc.name+"}\nspec:\n  entrypoint: main\n"+tc.spec), &tmpl); err != nil {
			t.Fatal(err)
		}
		f.submit(tc.name, runnableSpec{author: tenant, template: tmpl})
	}
	workflows := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
	for name, want := range map[string]string{"defaults": `privileged (container "main"`, "patched": "hostPID=true",
		"second-doc": `-nkube-system would make the action run in namespace "kube-system"`} {
		_, msg, attempts := f.waitPhase(name, v1alpha1.PhaseFailed)
		if len(attempts) != 1 || attempts[0].Reason != admission.ReasonDenied || !strings.Contains(msg, want) {
			t.Errorf("%s: %s (want %s); attempts %+v", name, msg, want, attempts)
		}
		for _, c := range cs {
			if _, err := f.dyn[c.Name()].Resource(workflows).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s reached %s (%v)", name, c.Name(), err)
			}
		}
	}
}
