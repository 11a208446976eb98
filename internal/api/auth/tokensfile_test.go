package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	const before = "# who may call purser\ntokens:\n- user: admin # the first\n  sha256: " +
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
	if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	alice, err := AddToken(path, "alice", []string{"team-a", "auditors"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := AddToken(path, "bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := a.Authenticate(alice); !ok || u.Name != "alice" || strings.Join(u.Groups, ",") != "team-a,auditors" {
		t.Errorf("alice's token: %+v, %v", u, ok)
	}
	if u, ok := a.Authenticate(bob); !ok || u.Name != "bob" || len(u.Groups) != 0 {
		t.Errorf("bob's token: %+v, %v", u, ok)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{"# who may call purser", "# the first", "user: admin"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the file lost %q:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), alice) || strings.Contains(string(data), bob) {
		t.Errorf("a token is stored in clear:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}

	// No file yet, or an empty list: one is made.
	for _, start := range []string{"", "tokens: []\n"} {
		p := filepath.Join(t.TempDir(), "tokens.yaml")
		if start != "" {
			if err := os.WriteFile(p, []byte(start), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := AddToken(p, "carol", nil)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := LoadTokens(p); err != nil {
			t.Fatalf("from %q: %v", start, err)
		} else if u, ok := a.Authenticate(tok); !ok || u.Name != "carol" {
			t.Fatalf("from %q: %+v", start, u)
		}
	}

	// Bad names and a broken file change nothing.
	for _, user := range []string{"", "group:admins", "two words"} {
		if _, err := AddToken(path, user, nil); err == nil {
			t.Errorf("user %q accepted", user)
		}
	}
	broken := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(broken, []byte("tokens:\n- user: x\n  sha: short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AddToken(broken, "dave", nil); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("a broken file: %v", err)
	}
	if data, _ := os.ReadFile(broken); strings.Contains(string(data), "dave") {
		t.Error("a broken file was written")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
		t.Error("a refused name changed the file")
	}
}

func TestCheckPolicy(t *testing.T) {
	tokens := &TokensFile{Tokens: []TokenEntry{{User: "admin"}, {User: "alice"}}}
	for _, tc := range []struct {
		name, policy string
		err          []string
		warnings     []string
	}{
		{name: "valid", policy: "admins: [admin]\nnamespaces:\n  team-a:\n    roles: {editor: [alice]}\n    approval: {runnables: true}\n"},
		{name: "YAML with its line", policy: "admins: [admin]\nnamespaces:\n  team-a:\n    roles: {editor: [alice]\n", err: []string{"line"}},
		{name: "unknown fields by path", policy: "admin: [x]\nnamespaces:\n  team-a:\n    rols: {editor: [alice]}\n",
			err: []string{"admin: unknown field", "namespaces.team-a.rols: unknown field"}},
		{name: "unknown role", policy: "namespaces:\n  team-a:\n    roles: {writer: [alice]}\n", err: []string{`unknown role "writer"`}},
		{name: "a key twice", policy: "admins: [a]\nadmins: [b]\n", err: []string{"already set"}},
		{name: "a priority class of another shape", policy: "priorityClasses: {urgent: high}\n", err: []string{"integer or {value, namespaces}"}},
		{name: "a priority class for a namespace the policy does not name", policy: "admins: [admin]\npriorityClasses: {urgent: {value: 9, namespaces: [team-z]}}\n",
			warnings: []string{"priorityClasses.urgent.namespaces: team-z is no namespace of the policy"}},
		{name: "what loads but does nothing", policy: "namespaces:\n  Team_A:\n    roles: {editor: [\"group:\", alice, bob]}\n  team-b:\n    roles: {viewer: [alice]}\n    approval: {deployables: true}\n",
			warnings: []string{
				`namespaces.Team_A.roles.editor: "group:" names no group`,
				"namespaces.Team_A: not a namespace name",
				"namespaces.team-b: changes wait for approval, but nobody may approve them",
				"user bob has no token in the tokens file",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := CheckPolicy([]byte(tc.policy), tokens)
			if len(tc.err) > 0 {
				for _, e := range tc.err {
					if err == nil || !strings.Contains(err.Error(), e) {
						t.Errorf("error %v lacks %q", err, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", rep.Warnings, tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.HasPrefix(rep.Warnings[i], w) {
					t.Errorf("warning %d: %q, want %q", i, rep.Warnings[i], w)
				}
			}
		})
	}
}
