package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/auth/oidctest"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// ID tokens of a real provider (Dex) name users and groups of the policy;
// a token of another audience, an expired-looking forgery, or garbage
// authenticate no one.
func TestOIDCTokensOfDex(t *testing.T) {
	dex := oidctest.Start(t, oidctest.Config{Users: []oidctest.User{{Email: "erin@example.com", Password: "erin-pw", Groups: []string{"team-a", "auditors"}}}})
	dir := t.TempDir()
	tokensPath, policyPath := filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, "policy.yaml")
	write(t, tokensPath, "tokens: []\n")
	write(t, policyPath, "namespaces:\n  team-a:\n    roles:\n      editor: [\"group:sso:team-a\"]\n")

	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: dex.Issuer, ClientID: oidctest.ClientID, GroupsPrefix: "sso:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := auth.LoadIdentities(auth.IdentitiesConfig{TokensFile: tokensPath, PolicyFile: policyPath, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	raw := dex.PasswordToken(t, "erin@example.com", "erin-pw")
	u, ok := id.Authenticate(t.Context(), raw)
	if !ok || u.Name != "erin@example.com" || !slices.Equal(u.Groups, []string{"sso:team-a", "sso:auditors"}) {
		t.Fatalf("Authenticate(erin's ID token) = %+v, %v", u, ok)
	}
	p := id.Policy()
	if !p.Allowed(u, "team-a", policy.VerbWrite) || p.Allowed(u, "team-b", policy.VerbRead) || p.IsAdmin(u) {
		t.Fatalf("erin's rights: %+v", p.AccessOf(u))
	}

	// The same token checked for another client's audience.
	other, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: dex.Issuer, ClientID: "someone-else"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Authenticate(t.Context(), raw); err == nil || !strings.Contains(err.Error(), "not for someone-else") {
		t.Fatalf("a token of another audience: %v", err)
	}
	// A token whose claims were edited (groups added) no longer verifies.
	parts := strings.Split(raw, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var m map[string]any
	if err := json.Unmarshal(claims, &m); err != nil {
		t.Fatalf("claims of a Dex token: %v", err)
	}
	m["groups"] = []string{"platform"}
	edited, _ := json.Marshal(m)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(edited) + "." + parts[2]
	for name, tok := range map[string]string{"edited claims": forged, "garbage": "a.b.c", "opaque": "0123abcd"} {
		if u, ok := id.Authenticate(t.Context(), tok); ok {
			t.Errorf("%s authenticated as %+v", name, u)
		}
	}
}

// A provider that is down at start does not stop the api: its tokens are
// refused until it answers.
func TestOIDCProviderDownAtStart(t *testing.T) {
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: "http://127.0.0.1:1/dex", ClientID: "purser"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Authenticate(t.Context(), "a.b.c"); err == nil || !strings.Contains(err.Error(), "discover") {
		t.Fatalf("token while the provider is down: %v", err)
	}
}

// The policy and the tokens file are reloaded when they change; a file
// that does not parse leaves the last good one in force and says so.
func TestIdentitiesReload(t *testing.T) {
	dir := t.TempDir()
	tokensPath, policyPath := filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, "policy.yaml")
	write(t, tokensPath, "tokens:\n- {user: alice, sha256: "+auth.HashToken("alice-token")+"}\n")
	write(t, policyPath, "admins: [root]\n")
	id, err := auth.LoadIdentities(auth.IdentitiesConfig{TokensFile: tokensPath, PolicyFile: policyPath, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	runIdentities(t, id)
	alice := policy.User{Name: "alice"}
	if id.Policy().IsAdmin(alice) {
		t.Fatal("alice is admin before the edit")
	}

	write(t, policyPath, "admins: [root, alice]\n")
	write(t, tokensPath, "tokens:\n- {user: alice, sha256: "+auth.HashToken("alice-token")+"}\n- {user: bob, sha256: "+auth.HashToken("bob-token")+"}\n")
	waitFor(t, "both files reloaded", func() bool { _, ok := id.Authenticate(ctx, "bob-token"); return ok && id.Policy().IsAdmin(alice) })
	if id.Reloads() != 2 {
		t.Fatalf("reloads = %d, want 2", id.Reloads())
	}

	write(t, policyPath, "admins: [root\n") // a typo
	waitFor(t, "the typo reported", func() bool { return id.Problem() != nil })
	if !strings.Contains(id.Problem().Error(), "policy.yaml") || !strings.Contains(id.Problem().Error(), "serving the version loaded at") {
		t.Fatalf("problem: %v", id.Problem())
	}
	if !id.Policy().IsAdmin(alice) {
		t.Fatal("the broken file replaced the last good policy")
	}
	write(t, policyPath, "\n") // empty, as an editor that truncates first leaves it for a moment
	waitFor(t, "the empty file reported", func() bool { return id.Problem() != nil && strings.Contains(id.Problem().Error(), "is empty") })
	if !id.Policy().IsAdmin(alice) {
		t.Fatal("the empty file replaced the last good policy")
	}
	if err := os.Remove(tokensPath); err != nil { // gone: the last good tokens stay
		t.Fatal(err)
	}
	waitFor(t, "the removed tokens file reported", func() bool { return strings.Contains(id.Problem().Error(), "tokens.yaml") })
	if _, ok := id.Authenticate(ctx, "bob-token"); !ok {
		t.Fatal("the removed tokens file logged bob out")
	}

	write(t, policyPath, "admins: [root]\n")
	write(t, tokensPath, "tokens: []\n")
	waitFor(t, "the fixed files reloaded", func() bool { return id.Problem() == nil && !id.Policy().IsAdmin(alice) })
	if _, ok := id.Authenticate(ctx, "bob-token"); ok {
		t.Fatal("bob's token outlived its removal from the tokens file")
	}
}

// A component that only decides on the policy (the submitter, the
// syncer) follows the policy file without a tokens file, and its kind
// decisions change with the file; no token authenticates there.
func TestPolicyOnlyIdentities(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.yaml")
	write(t, policyPath, "admins: [root]\n")
	id, err := auth.LoadIdentities(auth.IdentitiesConfig{PolicyFile: policyPath, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	runIdentities(t, id)
	alice := policy.User{Name: "alice"}
	crb := policy.Target{Kind: schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}, Scope: policy.ScopeCluster,
		Namespace: "team-a", ObjectNamespace: "team-a"}
	if d := id.AuthorizeKind(alice, crb); d.Allowed {
		t.Fatalf("alice may put a ClusterRoleBinding before the edit: %+v", d)
	}
	if _, ok := id.Authenticate(ctx, "anything"); ok {
		t.Fatal("a token authenticated without a tokens file")
	}
	write(t, policyPath, "admins: [root, alice]\n")
	waitFor(t, "the edit reloaded", func() bool { return id.AuthorizeKind(alice, crb).Allowed })
	write(t, policyPath, "admins: [root\n") // a typo: the last good one stays
	waitFor(t, "the typo reported", func() bool { return id.Problem() != nil })
	if !id.AuthorizeKind(alice, crb).Allowed {
		t.Fatal("the broken file replaced the last good policy")
	}
}

// runIdentities runs id's reloads until the test ends, and fails the test
// when Run returns an error.
func runIdentities(t *testing.T, id *auth.Identities) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- id.Run(t.Context()) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("identities: %v", err)
		}
	})
}

func write(t *testing.T, path, data string) {
	t.Helper()
	// Through a rename, as editors and Kubernetes volumes replace files.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits, through sandboxtest.Eventually, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	sandboxtest.Eventually(t, 30*time.Second, what, func(context.Context) error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}
