package auth

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/domain/policy"
)

// How claims name a user and groups, for every setting of the claims and
// prefixes.
func TestUserOfClaims(t *testing.T) {
	for name, c := range map[string]struct {
		cfg    OIDCConfig
		claims string
		want   policy.User
		err    string
	}{
		"email and groups":        {OIDCConfig{}, `{"email":"a@x.io","email_verified":true,"groups":["g1","g2"]}`, policy.User{Name: "a@x.io", Groups: []string{"g1", "g2"}}, ""},
		"no email_verified claim": {OIDCConfig{}, `{"email":"a@x.io"}`, policy.User{Name: "a@x.io"}, ""},
		"unverified email":        {OIDCConfig{}, `{"email":"a@x.io","email_verified":false}`, policy.User{}, "not verified"},
		"no such claim":           {OIDCConfig{}, `{"sub":"123"}`, policy.User{}, `no string claim "email"`},
		"sub, prefixed":           {OIDCConfig{UsernameClaim: "sub", UsernamePrefix: "sso:", GroupsPrefix: "sso:"}, `{"sub":"123","groups":["g"]}`, policy.User{Name: "sso:123", Groups: []string{"sso:g"}}, ""},
		"one group as a string":   {OIDCConfig{GroupsClaim: "roles"}, `{"email":"a@x.io","roles":"ops"}`, policy.User{Name: "a@x.io", Groups: []string{"ops"}}, ""},
		"groups of numbers":       {OIDCConfig{}, `{"email":"a@x.io","groups":[1,2]}`, policy.User{}, "neither a string nor a list"},
		"name not a string":       {OIDCConfig{}, `{"email":42}`, policy.User{}, "no string claim"},
	} {
		t.Run(name, func(t *testing.T) {
			c.cfg.IssuerURL, c.cfg.ClientID = "https://idp.example.com", "purser"
			o, err := NewOIDC(c.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var claims map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.claims), &claims); err != nil {
				t.Fatal(err)
			}
			u, err := o.userOf(claims)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("userOf = %+v, %v; want an error with %q", u, err, c.err)
			case c.err == "" && (err != nil || u.Name != c.want.Name || !slices.Equal(u.Groups, c.want.Groups)):
				t.Fatalf("userOf = %+v, %v; want %+v", u, err, c.want)
			}
		})
	}
	for _, bad := range []OIDCConfig{{}, {IssuerURL: "https://x"}, {IssuerURL: "idp.example.com", ClientID: "p"}} {
		if _, err := NewOIDC(bad, nil); err == nil {
			t.Errorf("NewOIDC(%+v): no error", bad)
		}
	}
}
