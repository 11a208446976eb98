package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/domain/policy"
)

func TestTokensFile(t *testing.T) {
	token := NewToken()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n- user: alice\n  groups: [team-a]\n  sha256: "+HashToken(token)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := a.Authenticate(token); !ok || u.Name != "alice" || u.Groups[0] != "team-a" {
		t.Fatalf("Authenticate = %+v, %v", u, ok)
	}
	for _, bad := range []string{"", "wrong", HashToken(token)} {
		if _, ok := a.Authenticate(bad); ok {
			t.Errorf("token %q authenticated", bad)
		}
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), token) {
		t.Error("tokens file holds the token in clear")
	}
}

func TestTokensFileErrors(t *testing.T) {
	for name, f := range map[string]TokensFile{
		"no user":    {Tokens: []TokenEntry{{SHA256: HashToken("x")}}},
		"bad hash":   {Tokens: []TokenEntry{{User: "a", SHA256: "abc"}}},
		"duplicated": {Tokens: []TokenEntry{{User: "a", SHA256: HashToken("x")}, {User: "b", SHA256: HashToken("x")}}},
	} {
		if _, err := NewAuthenticator(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPolicy(t *testing.T) {
	p, err := policy.NewPolicy(policy.PolicyFile{
		Admins: []string{"root", "group:platform"},
		Namespaces: map[string]policy.NamespacePolicy{
			"team-a": {
				Roles: map[policy.Role][]string{
					policy.RoleViewer:   {"group:team-a"},
					policy.RoleEditor:   {"alice"},
					policy.RoleApprover: {"carol"},
				},
				Approval: policy.Approval{Runnables: true},
			},
			policy.AnyNamespace: {Roles: map[policy.Role][]string{policy.RoleViewer: {"auditor"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := policy.User{Name: "alice"}
	bob := policy.User{Name: "bob", Groups: []string{"team-a"}}
	carol := policy.User{Name: "carol"}
	ops := policy.User{Name: "ops", Groups: []string{"platform"}}
	auditor := policy.User{Name: "auditor"}
	stranger := policy.User{Name: "stranger"}
	cases := []struct {
		u    policy.User
		ns   string
		verb policy.Verb
		want bool
	}{
		{alice, "team-a", policy.VerbRead, true},
		{alice, "team-a", policy.VerbWrite, true},
		{alice, "team-a", policy.VerbApprove, false},
		{alice, "team-b", policy.VerbRead, false},
		{bob, "team-a", policy.VerbRead, true},
		{bob, "team-a", policy.VerbWrite, false},
		{carol, "team-a", policy.VerbApprove, true},
		{carol, "team-a", policy.VerbWrite, false},
		{ops, "anything", policy.VerbWrite, true},
		{auditor, "team-z", policy.VerbRead, true},
		{auditor, "team-z", policy.VerbWrite, false},
		{stranger, "team-a", policy.VerbRead, false},
	}
	for _, c := range cases {
		if got := p.Allowed(c.u, c.ns, c.verb); got != c.want {
			t.Errorf("%s %s in %s: got %v, want %v", c.u.Name, c.verb, c.ns, got, c.want)
		}
	}
	if !p.IsAdmin(ops) || p.IsAdmin(alice) {
		t.Error("IsAdmin wrong")
	}
	if !p.ReadsEverywhere(auditor) || p.ReadsEverywhere(bob) {
		t.Error("ReadsEverywhere wrong")
	}
	if !p.ApprovalRequired("team-a", "Runnable") || p.ApprovalRequired("team-a", "Deployable") || p.ApprovalRequired("team-b", "Runnable") {
		t.Error("ApprovalRequired wrong")
	}
	if _, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{"x": {Roles: map[policy.Role][]string{"owner": {"a"}}}}}); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestAccessOf(t *testing.T) {
	p, _ := policy.NewPolicy(policy.PolicyFile{
		Admins: []string{"root"},
		Namespaces: map[string]policy.NamespacePolicy{
			"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}, policy.RoleApprover: {"carol"}}},
			"team-b": {Roles: map[policy.Role][]string{policy.RoleViewer: {"alice"}}},
		},
	})
	a := p.AccessOf(policy.User{Name: "alice"})
	if a.Admin || a.ReadsEverywhere || len(a.Namespaces) != 2 ||
		fmt.Sprint(a.Namespaces["team-a"]) != "[read write]" || fmt.Sprint(a.Namespaces["team-b"]) != "[read]" {
		t.Fatalf("alice: %+v", a)
	}
	if c := p.AccessOf(policy.User{Name: "carol"}); fmt.Sprint(c.Namespaces["team-a"]) != "[read approve]" {
		t.Fatalf("carol: %+v", c)
	}
	if r := p.AccessOf(policy.User{Name: "root"}); !r.Admin || !r.ReadsEverywhere {
		t.Fatalf("root: %+v", r)
	}
}
