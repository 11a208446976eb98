package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

func runnableOf(ns, name, template string) string {
	return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Runnable\nmetadata: {name: %s, namespace: %s}\nspec:\n  template:\n%s", name, ns, indent(template, "    "))
}

func deployableOf(ns, name, template string) string {
	return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: %s, namespace: %s}\nspec:\n  template:\n%s", name, ns, indent(template, "    "))
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

const (
	adminBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tenant-is-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
`
	otherNamespace = `apiVersion: v1
kind: Namespace
metadata: {name: team-b}
`
	roleBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: admins}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]
`
	clusterTemplate = `apiVersion: argoproj.io/v1alpha1
kind: ClusterWorkflowTemplate
metadata: {name: shared}
spec: {templates: [{name: main, container: {image: busybox}}]}
`
	gizmo = `apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g}
`
	secretTmpl = `apiVersion: v1
kind: Secret
metadata: {name: s}
stringData: {k: v}
`
)

// TestKindAuthorization: scope and kind are part of authorization at the
// API. A tenant editor is refused (403, naming the kind and the rule)
// cluster-scoped kinds, kinds their namespace denies or does not allow,
// and a kind a member cluster reported as cluster-scoped; an admin is
// not; nothing refused changes anything.
func TestKindAuthorization(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			h.yaml("admin", "POST", "/api/v1/clusters", clusterYAML("dc1-a", "tok")).want(t, http.StatusCreated)
			before := h.counts()
			for _, c := range []struct {
				what, method, path, body, kind, rule string
			}{
				{"a ClusterRoleBinding to cluster-admin", "PUT", "/api/v1/deployables/team-a/crb", deployableOf("team-a", "crb", adminBinding),
					"ClusterRoleBinding.rbac.authorization.k8s.io", "cluster-scoped kinds need a global admin"},
				{"a Runnable whose template is another team's Namespace", "POST", "/api/v1/runnables", runnableOf("team-a", "ns", otherNamespace),
					"Namespace", "cluster-scoped kinds need a global admin"},
				{"a RoleBinding where the namespace denies them", "PUT", "/api/v1/deployables/team-a/rb", deployableOf("team-a", "rb", roleBinding),
					"RoleBinding.rbac.authorization.k8s.io", "namespaces.team-a.kinds.deny"},
				{"a Secret where only Jobs and ConfigMaps are allowed", "PUT", "/api/v1/deployables/team-k/s", deployableOf("team-k", "s", secretTmpl),
					"Secret", "namespaces.team-k.kinds.allow"},
				{"a cluster-scoped CRD granted to another namespace only", "PUT", "/api/v1/deployables/team-k/cwt", deployableOf("team-k", "cwt", clusterTemplate),
					"ClusterWorkflowTemplate.argoproj.io", "namespaces.team-k.kinds.allow"},
			} {
				r := h.yaml("alice", c.method, c.path, c.body)
				if r.code != http.StatusForbidden || !strings.Contains(r.str("message"), c.kind) || !strings.Contains(string(r.raw), c.rule) {
					t.Errorf("%s: %d %s; want 403 naming %s and %q", c.what, r.code, r.raw, c.kind, c.rule)
				}
			}
			if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("refused requests changed the database: %v -> %v", before, after)
			}

			// Gizmo has no driver: where the policy does not list it as
			// opaque, it is refused (422), since what its controller
			// would run cannot be judged; nothing is written.
			r := h.yaml("alice", "PUT", "/api/v1/deployables/team-b/g0", deployableOf("team-b", "g0", gizmo)).want(t, http.StatusUnprocessableEntity)
			if !strings.Contains(string(r.raw), "no driver for kind Gizmo.example.com") || !strings.Contains(string(r.raw), "namespaces.team-b.kinds.opaque") {
				t.Errorf("an undriven kind: %s; want the 422 to name the kind and the policy's opaque list", r.raw)
			}
			if after := h.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a refused undriven kind changed the database: %v -> %v", before, after)
			}
			// No member cluster has reported Gizmo yet: its scope is
			// unknown, and the cluster it goes to decides (the submitter
			// and the syncer check again).
			h.yaml("alice", "PUT", "/api/v1/deployables/team-a/g1", deployableOf("team-a", "g1", gizmo)).want(t, http.StatusCreated)
			// Once a registered cluster's discovery says it is
			// cluster-scoped, it is refused.
			if err := h.store.Tx(context.Background(), func(tx *store.Tx) error {
				return tx.Kinds().Replace(context.Background(), "dc1-a", time.Now(),
					[]store.ServedKind{{Group: "example.com", Version: "v1", Kind: "Gizmo", Namespaced: false}})
			}); err != nil {
				t.Fatal(err)
			}
			r = h.yaml("alice", "PUT", "/api/v1/deployables/team-a/g2", deployableOf("team-a", "g2", gizmo)).want(t, http.StatusForbidden)
			if !strings.Contains(r.str("message"), "Gizmo.example.com is cluster-scoped") {
				t.Errorf("reported cluster-scoped kind: %s", r.raw)
			}
			// A granted cluster-scoped kind, and an admin's, pass.
			h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cwt", deployableOf("team-a", "cwt", clusterTemplate)).want(t, http.StatusCreated)
			h.yaml("admin", "PUT", "/api/v1/deployables/team-a/crb", deployableOf("team-a", "crb", adminBinding)).want(t, http.StatusCreated)
			h.yaml("admin", "POST", "/api/v1/runnables", runnableOf("team-a", "ns", otherNamespace)).want(t, http.StatusAccepted)
			// And every namespaced kind in a namespace without lists.
			h.yaml("alice", "PUT", "/api/v1/deployables/team-a/cfg", configMapDeployable("team-a", "cfg", "v")).want(t, http.StatusCreated)
		})
	}
}
