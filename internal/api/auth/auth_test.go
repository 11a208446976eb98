package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	p, err := NewPolicy(PolicyFile{
		Admins: []string{"root", "group:platform"},
		Namespaces: map[string]NamespacePolicy{
			"team-a": {
				Roles: map[Role][]string{
					RoleViewer:   {"group:team-a"},
					RoleEditor:   {"alice"},
					RoleApprover: {"carol"},
				},
				Approval: Approval{Runnables: true},
			},
			AnyNamespace: {Roles: map[Role][]string{RoleViewer: {"auditor"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := User{Name: "alice"}
	bob := User{Name: "bob", Groups: []string{"team-a"}}
	carol := User{Name: "carol"}
	ops := User{Name: "ops", Groups: []string{"platform"}}
	auditor := User{Name: "auditor"}
	stranger := User{Name: "stranger"}
	cases := []struct {
		u    User
		ns   string
		verb Verb
		want bool
	}{
		{alice, "team-a", VerbRead, true},
		{alice, "team-a", VerbWrite, true},
		{alice, "team-a", VerbApprove, false},
		{alice, "team-b", VerbRead, false},
		{bob, "team-a", VerbRead, true},
		{bob, "team-a", VerbWrite, false},
		{carol, "team-a", VerbApprove, true},
		{carol, "team-a", VerbWrite, false},
		{ops, "anything", VerbWrite, true},
		{auditor, "team-z", VerbRead, true},
		{auditor, "team-z", VerbWrite, false},
		{stranger, "team-a", VerbRead, false},
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
	if _, err := NewPolicy(PolicyFile{Namespaces: map[string]NamespacePolicy{"x": {Roles: map[Role][]string{"owner": {"a"}}}}}); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestAccessOf(t *testing.T) {
	p, _ := NewPolicy(PolicyFile{
		Admins: []string{"root"},
		Namespaces: map[string]NamespacePolicy{
			"team-a": {Roles: map[Role][]string{RoleEditor: {"alice"}, RoleApprover: {"carol"}}},
			"team-b": {Roles: map[Role][]string{RoleViewer: {"alice"}}},
		},
	})
	a := p.AccessOf(User{Name: "alice"})
	if a.Admin || a.ReadsEverywhere || len(a.Namespaces) != 2 ||
		fmt.Sprint(a.Namespaces["team-a"]) != "[read write]" || fmt.Sprint(a.Namespaces["team-b"]) != "[read]" {
		t.Fatalf("alice: %+v", a)
	}
	if c := p.AccessOf(User{Name: "carol"}); fmt.Sprint(c.Namespaces["team-a"]) != "[read approve]" {
		t.Fatalf("carol: %+v", c)
	}
	if r := p.AccessOf(User{Name: "root"}); !r.Admin || !r.ReadsEverywhere {
		t.Fatalf("root: %+v", r)
	}
}
