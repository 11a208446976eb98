// Package auth decides who a request comes from: bearer tokens listed,
// hashed, in a tokens file, or an OpenID Connect provider's ID tokens; and
// it follows the tokens and policy files as they change (Identities).
// What a user may do is the policy's (internal/domain/policy). Both files
// are YAML so that a platform team keeps them in version control.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/domain/policy"
)

// TokensFile is the format of the tokens file:
//
//	tokens:
//	- user: alice
//	  groups: [team-a]
//	  sha256: 9f86d0...   # hex SHA-256 of the token; the token itself is never stored
type TokensFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one token of the tokens file.
type TokenEntry struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	SHA256 string   `json:"sha256"`
}

// Authenticator maps tokens to users.
type Authenticator struct {
	byHash map[string]policy.User
}

// HashToken is the form in which a token is stored.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a new random token.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// LoadTokens reads a tokens file.
func LoadTokens(path string) (*Authenticator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return ParseTokens(path, data)
}

// ParseTokens reads the content of the tokens file at path.
func ParseTokens(path string, data []byte) (*Authenticator, error) {
	var f TokensFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	a, err := NewAuthenticator(f)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return a, nil
}

// NewAuthenticator checks a tokens file's content and indexes it.
func NewAuthenticator(f TokensFile) (*Authenticator, error) {
	a := &Authenticator{byHash: map[string]policy.User{}}
	for i, t := range f.Tokens {
		h := strings.ToLower(strings.TrimSpace(t.SHA256))
		if t.User == "" {
			return nil, fmt.Errorf("tokens[%d]: user is empty", i)
		}
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("tokens[%d] (%s): sha256 must be 64 hex digits", i, t.User)
		}
		if _, dup := a.byHash[h]; dup {
			return nil, fmt.Errorf("tokens[%d] (%s): the same token is listed twice", i, t.User)
		}
		a.byHash[h] = policy.User{Name: t.User, Groups: t.Groups}
	}
	return a, nil
}

// Authenticate returns the user a token belongs to.
func (a *Authenticator) Authenticate(token string) (policy.User, bool) {
	if token == "" {
		return policy.User{}, false
	}
	u, ok := a.byHash[HashToken(token)]
	return u, ok
}

// ApprovalRequired is the policy in force's.
func (id *Identities) ApprovalRequired(ns, kind string) bool {
	return id.Policy().ApprovalRequired(ns, kind)
}
