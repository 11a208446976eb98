package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAuthorizeKind(t *testing.T) {
	p, err := NewPolicy(PolicyFile{
		Admins: []string{"root", "group:platform"},
		Namespaces: map[string]NamespacePolicy{
			"team-a": {Kinds: KindRules{
				Deny:          []string{"RoleBinding.rbac.authorization.k8s.io"},
				ClusterScoped: []string{"ClusterWorkflowTemplate.argoproj.io"},
			}},
			"team-b":     {Kinds: KindRules{Allow: []string{"Job.batch", "ConfigMap", "*.argoproj.io"}}},
			AnyNamespace: {Kinds: KindRules{Deny: []string{"*.admissionregistration.k8s.io"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := User{Name: "alice"}
	ops := User{Name: "ops", Groups: []string{"platform"}}
	gk := schema.ParseGroupKind
	cases := []struct {
		name       string
		u          User
		t          Target
		allowed    bool
		rule       string
		unresolved bool
	}{
		{"namespaced kind in its namespace", alice, Target{Kind: gk("Job.batch"), Scope: ScopeNamespaced, Namespace: "team-a"}, true, RuleNamespacedKinds, false},
		{"cluster-scoped kind", alice, Target{Kind: gk("ClusterRoleBinding.rbac.authorization.k8s.io"), Scope: ScopeCluster, Namespace: "team-a"}, false, RuleClusterScoped, false},
		{"a Namespace is cluster-scoped", alice, Target{Kind: gk("Namespace"), Scope: ScopeCluster, Namespace: "team-a"}, false, RuleClusterScoped, false},
		{"granted cluster-scoped kind", alice, Target{Kind: gk("ClusterWorkflowTemplate.argoproj.io"), Scope: ScopeCluster, Namespace: "team-a"}, true, "namespaces.team-a.kinds.clusterScoped", false},
		{"grant is per namespace", alice, Target{Kind: gk("ClusterWorkflowTemplate.argoproj.io"), Scope: ScopeCluster, Namespace: "team-c"}, false, RuleClusterScoped, false},
		{"denied namespaced kind", alice, Target{Kind: gk("RoleBinding.rbac.authorization.k8s.io"), Scope: ScopeNamespaced, Namespace: "team-a"}, false, "namespaces.team-a.kinds.deny", false},
		{"denied everywhere", alice, Target{Kind: gk("ValidatingWebhookConfiguration.admissionregistration.k8s.io"), Scope: ScopeCluster, Namespace: "team-b"}, false, "namespaces.*.kinds.deny", false},
		{"deny of unknown scope", alice, Target{Kind: gk("RoleBinding.rbac.authorization.k8s.io"), Namespace: "team-a"}, false, "namespaces.team-a.kinds.deny", false},
		{"other namespace", alice, Target{Kind: gk("ConfigMap"), Scope: ScopeNamespaced, Namespace: "team-a", ObjectNamespace: "team-b"}, false, RuleOwnNamespace, false},
		{"own namespace spelled out", alice, Target{Kind: gk("ConfigMap"), Scope: ScopeNamespaced, Namespace: "team-a", ObjectNamespace: "team-a"}, true, RuleNamespacedKinds, false},
		{"allow list: on it", alice, Target{Kind: gk("ConfigMap"), Scope: ScopeNamespaced, Namespace: "team-b"}, true, "namespaces.team-b.kinds.allow", false},
		{"allow list: group wildcard", alice, Target{Kind: gk("Workflow.argoproj.io"), Scope: ScopeNamespaced, Namespace: "team-b"}, true, "namespaces.team-b.kinds.allow", false},
		{"allow list: not on it", alice, Target{Kind: gk("Secret"), Scope: ScopeNamespaced, Namespace: "team-b"}, false, "namespaces.team-b.kinds.allow", false},
		{"allow list: core kind is not any group's", alice, Target{Kind: gk("Job"), Scope: ScopeNamespaced, Namespace: "team-b"}, false, "namespaces.team-b.kinds.allow", false},
		{"allow list does not grant cluster scope", alice, Target{Kind: gk("ClusterWorkflowTemplate.argoproj.io"), Scope: ScopeCluster, Namespace: "team-b"}, false, RuleClusterScoped, false},
		{"unknown scope, no list", alice, Target{Kind: gk("Widget.example.com"), Namespace: "team-a"}, true, RuleNamespacedKinds, true},
		{"unknown scope, not on the allow list", alice, Target{Kind: gk("Widget.example.com"), Namespace: "team-b"}, false, "namespaces.team-b.kinds.allow", false},
		{"admin: cluster-scoped", ops, Target{Kind: gk("ClusterRoleBinding.rbac.authorization.k8s.io"), Scope: ScopeCluster, Namespace: "team-a"}, true, RuleAdmins, false},
		{"admin: denied kind", User{Name: "root"}, Target{Kind: gk("RoleBinding.rbac.authorization.k8s.io"), Scope: ScopeNamespaced, Namespace: "team-a"}, true, RuleAdmins, false},
	}
	for _, c := range cases {
		d := p.AuthorizeKind(c.u, c.t)
		if d.Allowed != c.allowed || d.Rule != c.rule || d.Unresolved != c.unresolved {
			t.Errorf("%s: got %+v, want allowed=%v rule=%q unresolved=%v", c.name, d, c.allowed, c.rule, c.unresolved)
		}
		if !d.Allowed && !strings.Contains(d.Reason, KindName(c.t.Kind)) {
			t.Errorf("%s: the reason does not name the kind: %q", c.name, d.Reason)
		}
	}
}

// An empty policy, the zero value for components given none, allows
// namespaced kinds in their own namespace and nothing cluster-scoped.
func TestAuthorizeKindEmptyPolicy(t *testing.T) {
	p, _ := NewPolicy(PolicyFile{})
	u := User{Name: "anyone"}
	if d := p.AuthorizeKind(u, Target{Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Scope: ScopeNamespaced, Namespace: "x"}); !d.Allowed {
		t.Errorf("Job refused: %+v", d)
	}
	if d := p.AuthorizeKind(u, Target{Kind: schema.GroupKind{Kind: "Namespace"}, Scope: ScopeCluster, Namespace: "x"}); d.Allowed {
		t.Errorf("Namespace allowed: %+v", d)
	}
}

func TestKindRulesChecked(t *testing.T) {
	for _, bad := range []string{"rolebinding", "RoleBinding.RBAC", "*.", "", "Role Binding", "Job.batch/v1"} {
		_, err := NewPolicy(PolicyFile{Namespaces: map[string]NamespacePolicy{"a": {Kinds: KindRules{Deny: []string{bad}}}}})
		if err == nil {
			t.Errorf("pattern %q accepted", bad)
		} else if !strings.Contains(err.Error(), "kinds.deny[0]") {
			t.Errorf("pattern %q: the error does not name the field: %v", bad, err)
		}
	}
	for _, good := range []string{"*", "*.argoproj.io", "Secret", "ClusterWorkflowTemplate.argoproj.io", "RoleBinding.rbac.authorization.k8s.io"} {
		if _, err := NewPolicy(PolicyFile{Namespaces: map[string]NamespacePolicy{"a": {Kinds: KindRules{Allow: []string{good}}}}}); err != nil {
			t.Errorf("pattern %q refused: %v", good, err)
		}
	}
}

func TestResolveScope(t *testing.T) {
	gk := schema.ParseGroupKind
	cases := []struct {
		kind     string
		reported []bool
		want     Scope
	}{
		{"Namespace", nil, ScopeCluster},
		{"Job.batch", nil, ScopeNamespaced},
		{"Widget.example.com", nil, ScopeUnknown},
		{"Widget.example.com", []bool{true, true}, ScopeNamespaced},
		// One cluster serving it cluster-scoped makes it cluster-scoped.
		{"Widget.example.com", []bool{true, false}, ScopeCluster},
		// No report narrows a built-in cluster-scoped kind.
		{"ClusterRoleBinding.rbac.authorization.k8s.io", []bool{true}, ScopeCluster},
		{"ConfigMap", []bool{false}, ScopeCluster},
	}
	for _, c := range cases {
		if got := ResolveScope(gk(c.kind), c.reported); got != c.want {
			t.Errorf("%s with %v: %q, want %q", c.kind, c.reported, got, c.want)
		}
	}
}
