package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSharing(t *testing.T) {
	p, err := NewPolicy(PolicyFile{
		PriorityClasses: map[string]PriorityClass{"urgent": {Value: 1000}},
		Namespaces: map[string]NamespacePolicy{
			"big": {FairShareWeight: 3},
			"*":   {FairShareWeight: 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.PriorityClass("urgent"); !ok || v != 1000 {
		t.Errorf("urgent: %d %v", v, ok)
	}
	if _, ok := p.PriorityClass("nope"); ok {
		t.Error("an undefined class resolves")
	}
	if p.FairShareWeight("big") != 3 || p.FairShareWeight("other") != 2 {
		t.Errorf("weights %v %v", p.FairShareWeight("big"), p.FairShareWeight("other"))
	}
	if _, err := NewPolicy(PolicyFile{Namespaces: map[string]NamespacePolicy{"a": {FairShareWeight: -1}}}); err == nil {
		t.Error("a negative weight is accepted")
	}
}

// TestPriorityClasses: the policy's classes in both forms, who may use
// which, the defaults, and what stops a policy from loading.
func TestPriorityClasses(t *testing.T) {
	p, err := ParsePolicy("policy.yaml", []byte(`
admins: [root]
priorityClasses:
  batch: 0
  normal: 10
  urgent: {value: 1000, namespaces: [team-a]}
  ops: {value: 5000, namespaces: [ops]}
defaultPriorityClass: normal
namespaces:
  team-a: {roles: {editor: [alice], admin: [ann]}, defaultPriorityClass: urgent}
  team-b: {roles: {editor: [bob]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.PriorityClass("urgent"); !ok || v != 1000 {
		t.Errorf("urgent: %d %v", v, ok)
	}
	if got := strings.Join(p.PriorityClassesFor("team-a"), ","); got != "batch,normal,urgent" {
		t.Errorf("team-a may use %s", got)
	}
	if got := strings.Join(p.PriorityClassesFor("team-b"), ","); got != "batch,normal" {
		t.Errorf("team-b may use %s", got)
	}
	if p.DefaultPriorityClass("team-a") != "urgent" || p.DefaultPriorityClass("team-b") != "normal" {
		t.Errorf("defaults %q %q", p.DefaultPriorityClass("team-a"), p.DefaultPriorityClass("team-b"))
	}
	class, integer := intstr.FromString, func(v int32) *intstr.IntOrString { x := intstr.FromInt32(v); return &x }
	ptr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	for _, tc := range []struct {
		user, ns string
		prio     *intstr.IntOrString
		refused  string
	}{
		{"alice", "team-a", nil, ""},
		{"alice", "team-a", ptr(class("urgent")), ""},
		{"bob", "team-b", ptr(class("normal")), ""},
		{"bob", "team-b", ptr(class("urgent")), `priority class "urgent" is not one namespace team-b may use; namespace team-b may use the priority classes batch, normal`},
		{"bob", "team-b", ptr(class("nope")), `defines no priority class "nope"`},
		{"bob", "team-b", integer(2147483647), "an integer priority (2147483647) is for the farm's admins; namespace team-b may use the priority classes batch, normal"},
		{"ann", "team-a", integer(5), "is for the farm's admins"}, // a namespace's admin is no farm admin
		{"root", "team-b", integer(2147483647), ""},
		{"root", "team-b", ptr(class("ops")), ""},
		{"root", "team-b", ptr(class("nope")), `defines no priority class "nope"`},
	} {
		r := p.AuthorizePriority(User{Name: tc.user}, tc.ns, tc.prio)
		switch {
		case tc.refused == "" && r != nil:
			t.Errorf("%s in %s, %v: refused: %s", tc.user, tc.ns, tc.prio, r.Reason)
		case tc.refused != "" && (r == nil || !strings.Contains(r.Reason, tc.refused)):
			t.Errorf("%s in %s, %v: %v, want a refusal saying %q", tc.user, tc.ns, tc.prio, r, tc.refused)
		}
	}

	for _, bad := range []struct{ policy, says string }{
		{"priorityClasses: {Urgent: 1}", "not a class name"},
		{"priorityClasses: {a: {value: 1, namespace: [x]}}", "unknown field"},
		{"priorityClasses: {a: 1.5}", "integer or {value, namespaces}"},
		{"priorityClasses: {a: 1}\ndefaultPriorityClass: b", "names no class"},
		{"priorityClasses: {a: {value: 1, namespaces: [x]}}\ndefaultPriorityClass: a", "open to every namespace"},
		{"priorityClasses: {a: {value: 1, namespaces: [x]}}\nnamespaces: {y: {defaultPriorityClass: a}}", "not a class the namespace may use"},
	} {
		if _, err := ParsePolicy("p", []byte(bad.policy)); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: %v, want an error saying %q", bad.policy, err, bad.says)
		}
	}
}

// TestPriorityValue: the queue values a spec.priority by what its author
// may give; the rest counts as 0.
func TestPriorityValue(t *testing.T) {
	p, err := ParsePolicy("policy.yaml", []byte(`
admins: [root]
priorityClasses: {normal: 10, urgent: {value: 1000, namespaces: [team-a]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	class := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	integer := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	for _, tc := range []struct {
		user, ns string
		prio     *intstr.IntOrString
		want     int32
	}{
		{"alice", "team-a", class("urgent"), 1000},
		{"bob", "team-b", class("urgent"), 0},
		{"bob", "team-b", class("normal"), 10},
		{"bob", "team-b", integer(2147483647), 0},
		{"root", "team-b", integer(2147483647), 2147483647},
		{"bob", "team-b", nil, 0},
	} {
		if got := p.Priority(User{Name: tc.user}, tc.ns, tc.prio); got != tc.want {
			t.Errorf("%s in %s, %v: %d, want %d", tc.user, tc.ns, tc.prio, got, tc.want)
		}
	}
}
