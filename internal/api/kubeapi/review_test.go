package kubeapi

import (
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/purser-io/purser/internal/domain/policy"
)

// The answers of can-i and of the rules review for wildcards tell what
// the policy grants: a namespace's reader reads its namespaced resources,
// not Nodes or CRDs, so '*' is no for them and the rules name each
// resource; a reader of every namespace reads everything.
func TestReviewWildcards(t *testing.T) {
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}, Namespaces: map[string]policy.NamespacePolicy{
		"team-a": {Roles: map[policy.Role][]string{policy.RoleViewer: {"bob"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Policy: func() *policy.Policy { return pol }})
	cat := &catalogue{}
	for i := range builtin {
		cat.all = append(cat.all, &builtin[i])
	}
	bob, admin := policy.User{Name: "bob"}, policy.User{Name: "admin"}
	for _, tc := range []struct {
		user                policy.User
		group, resource, ns string
		allowed             bool
		reasonHas           string
	}{
		{user: bob, resource: "*", ns: "team-a", reasonHas: `"nodes"`},
		{user: bob, group: "*", resource: "*", ns: "team-a", reasonHas: "cluster-scoped"},
		{user: bob, group: "apps", resource: "*", ns: "team-a", allowed: true},
		{user: bob, group: "*", resource: "jobs", ns: "team-a", allowed: true},
		{user: bob, resource: "configmaps", ns: "team-a", allowed: true},
		{user: bob, resource: "nodes", ns: "team-a", reasonHas: "cluster-scoped"},
		{user: bob, resource: "configmaps", ns: "team-b", reasonHas: "no role there"},
		{user: bob, resource: "*", ns: "", reasonHas: "every resource the wildcard stands for"},
		{user: admin, group: "*", resource: "*", ns: "team-a", allowed: true},
		{user: admin, resource: "*", allowed: true},
		{user: bob, resource: "widgets", ns: "team-a", reasonHas: "tracks no resource"},
	} {
		st := a.judgeAccess(tc.user, cat, &authorizationv1.ResourceAttributes{Verb: "list", Group: tc.group, Resource: tc.resource, Namespace: tc.ns})
		if st.Allowed != tc.allowed || !strings.Contains(st.Reason, tc.reasonHas) {
			t.Errorf("%s: can-i list %s.%s -n %q: allowed %v (%s), want %v with %q", tc.user.Name, tc.resource, tc.group, tc.ns, st.Allowed, st.Reason, tc.allowed, tc.reasonHas)
		}
	}

	rules := func(u policy.User, ns string) (out []string) {
		for _, r := range a.rules(u, cat, ns).ResourceRules {
			if !slices.Equal(r.Verbs, readVerbs) {
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, res+"."+g)
				}
			}
		}
		return out
	}
	got := rules(bob, "team-a")
	for _, want := range []string{"configmaps.", "pods.", "jobs.batch", "workflows.argoproj.io"} {
		if !slices.Contains(got, want) {
			t.Errorf("bob's rules in team-a lack %s: %v", want, got)
		}
	}
	for _, never := range []string{"*.*", "nodes.", "customresourcedefinitions.apiextensions.k8s.io"} {
		if slices.Contains(got, never) {
			t.Errorf("bob's rules in team-a grant %s: %v", never, got)
		}
	}
	if got := rules(bob, "team-b"); len(got) != 0 {
		t.Errorf("bob's rules in team-b: %v, want none", got)
	}
	if got := rules(admin, "team-a"); !slices.Equal(got, []string{"*.*"}) {
		t.Errorf("admin's rules: %v, want *.*", got)
	}
}

// The caps per user count what is held, per user, and free it once.
func TestPerUser(t *testing.T) {
	p := newPerUser(2)
	r1, _, ok1 := p.acquire("mallory")
	_, _, ok2 := p.acquire("mallory")
	_, held, ok3 := p.acquire("mallory")
	if !ok1 || !ok2 || ok3 || held != 2 {
		t.Fatalf("two then a third: %v %v %v (held %d)", ok1, ok2, ok3, held)
	}
	if _, _, ok := p.acquire("victor"); !ok {
		t.Fatal("another user is held by mallory's cap")
	}
	r1()
	r1() // a second release frees nothing more
	if _, _, ok := p.acquire("mallory"); !ok {
		t.Fatal("a released one is not free again")
	}
	if _, _, ok := p.acquire("mallory"); ok {
		t.Fatal("a double release freed two")
	}
}
