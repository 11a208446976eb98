package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/purser-io/purser/internal/domain/policy"
)

// OIDCConfig says which OpenID Connect provider's ID tokens are accepted
// as bearer tokens, and how their claims name users and groups of the
// policy. The names follow kube-apiserver's --oidc-* flags, which a
// platform team already knows.
type OIDCConfig struct {
	// IssuerURL is the provider's issuer ("iss"); its discovery document
	// is at IssuerURL/.well-known/openid-configuration. Empty: no OIDC.
	IssuerURL string `json:"issuerURL"`
	// ClientID is the client the console signs in with; tokens must name
	// it (or CLIClientID) in their audience.
	ClientID string `json:"clientID"`
	// CLIClientID is the client `purser login` uses, when the provider
	// keeps the command line apart (a public client without redirect
	// URIs, for the device flow); empty: ClientID.
	CLIClientID string `json:"cliClientID,omitempty"`
	// UsernameClaim names the user (default "email"; an email claim
	// counts only with email_verified true, when the token carries it).
	UsernameClaim string `json:"usernameClaim,omitempty"`
	// GroupsClaim holds the user's groups, a string or a list (default
	// "groups").
	GroupsClaim string `json:"groupsClaim,omitempty"`
	// UsernamePrefix and GroupsPrefix are put before what the claims say,
	// so that the provider's names cannot collide with the tokens file's
	// (e.g. "sso:").
	UsernamePrefix string `json:"usernamePrefix,omitempty"`
	GroupsPrefix   string `json:"groupsPrefix,omitempty"`
	// CAFile holds the PEM certificates that verify the provider; empty:
	// the system's roots.
	CAFile string `json:"caFile,omitempty"`
	// Scopes the clients ask for beyond "openid" (default: email, groups,
	// profile, offline_access).
	Scopes []string `json:"scopes,omitempty"`
}

// Enabled reports whether an issuer is configured.
func (c OIDCConfig) Enabled() bool { return c.IssuerURL != "" }

func (c OIDCConfig) withDefaults() OIDCConfig {
	if c.UsernameClaim == "" {
		c.UsernameClaim = "email"
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	if c.CLIClientID == "" {
		c.CLIClientID = c.ClientID
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{"email", "groups", "profile", "offline_access"}
	}
	return c
}

// OIDC verifies ID tokens of one provider with go-oidc (signature by the
// provider's published keys, issuer, audience, expiry) and maps their
// claims to a User.
type OIDC struct {
	cfg    OIDCConfig
	client *http.Client
	log    *slog.Logger

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	lastTry  time.Time
	lastErr  error
}

// discoveryRetry is how long a failed discovery is remembered before the
// next token tries again, so that a provider that is down at start does
// not need a restart of the api, nor get a request per API call.
const discoveryRetry = 10 * time.Second

// NewOIDC checks cfg. The provider is discovered on first use, and again
// after a failure, as kube-apiserver's authenticator does: the api starts
// even while the provider is unreachable, and tokens are refused until it
// answers.
func NewOIDC(cfg OIDCConfig, log *slog.Logger) (*OIDC, error) {
	if cfg.IssuerURL == "" || cfg.ClientID == "" {
		return nil, errors.New("oidc: the issuer URL and the client ID are both required")
	}
	if !strings.HasPrefix(cfg.IssuerURL, "https://") && !strings.HasPrefix(cfg.IssuerURL, "http://") {
		return nil, fmt.Errorf("oidc: issuer %q is not an http(s) URL", cfg.IssuerURL)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("oidc: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("oidc: %s holds no PEM certificate", cfg.CAFile)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return &OIDC{cfg: cfg.withDefaults(), client: client, log: log}, nil
}

// Config is the configuration in force, defaults filled in.
func (o *OIDC) Config() OIDCConfig { return o.cfg }

func (o *OIDC) tokenVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	if o.lastErr != nil && time.Since(o.lastTry) < discoveryRetry {
		return nil, o.lastErr
	}
	o.lastTry = time.Now()
	// The key set outlives this request: its fetches use a context of
	// their own, with the provider's HTTP client.
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.client), o.cfg.IssuerURL)
	if err != nil {
		o.lastErr = fmt.Errorf("oidc: discover %s: %w", o.cfg.IssuerURL, err)
		o.log.Warn("cannot reach the OIDC provider; its tokens are refused until it answers", "error", o.lastErr)
		return nil, o.lastErr
	}
	// The audience is checked below, against either client.
	o.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), o.client), &oidc.Config{SkipClientIDCheck: true})
	o.provider = p
	o.lastErr = nil
	return o.verifier, nil
}

// Endpoint is the provider's authorization and token endpoints, from its
// discovery document.
func (o *OIDC) Endpoint(ctx context.Context) (oauth2.Endpoint, error) {
	if _, err := o.tokenVerifier(ctx); err != nil {
		return oauth2.Endpoint{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.provider.Endpoint(), nil
}

// Exchange trades an authorization code of the console's client, with the
// PKCE verifier (RFC 7636) that only the browser that began the sign-in
// holds, for the ID token, which it checks as Authenticate does. The
// server does it so that the console needs neither the provider's CORS
// nor a hole in its own Content-Security-Policy.
func (o *OIDC) Exchange(ctx context.Context, code, verifier, redirectURI string) (string, policy.User, error) {
	ep, err := o.Endpoint(ctx)
	if err != nil {
		return "", policy.User{}, err
	}
	cfg := oauth2.Config{ClientID: o.cfg.ClientID, Endpoint: ep, RedirectURL: redirectURI}
	tok, err := cfg.Exchange(oidc.ClientContext(ctx, o.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", policy.User{}, fmt.Errorf("oidc: exchange the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", policy.User{}, errors.New("oidc: the provider returned no ID token")
	}
	u, err := o.Authenticate(ctx, raw)
	return raw, u, err
}

// LooksLikeJWT tells a token that may be an ID token (three base64url
// parts) from an opaque one of the tokens file, so that only those reach
// the verifier.
func LooksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// Authenticate verifies an ID token and returns its user.
func (o *OIDC) Authenticate(ctx context.Context, raw string) (policy.User, error) {
	v, err := o.tokenVerifier(ctx)
	if err != nil {
		return policy.User{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return policy.User{}, err
	}
	audienceOK := false
	for _, a := range tok.Audience {
		if a == o.cfg.ClientID || a == o.cfg.CLIClientID {
			audienceOK = true
		}
	}
	if !audienceOK {
		return policy.User{}, fmt.Errorf("oidc: the token is for %v, not for %s", tok.Audience, o.cfg.ClientID)
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return policy.User{}, err
	}
	u, err := o.userOf(claims)
	u.Expiry = tok.Expiry
	return u, err
}

// userOf maps claims to a user: a pure function of the configuration.
func (o *OIDC) userOf(claims map[string]json.RawMessage) (policy.User, error) {
	var name string
	if err := json.Unmarshal(claims[o.cfg.UsernameClaim], &name); err != nil || name == "" {
		return policy.User{}, fmt.Errorf("oidc: the token has no string claim %q to name its user", o.cfg.UsernameClaim)
	}
	if o.cfg.UsernameClaim == "email" {
		// An unverified address could be anyone's (kube-apiserver refuses
		// it too).
		if raw, ok := claims["email_verified"]; ok {
			var verified bool
			if err := json.Unmarshal(raw, &verified); err != nil || !verified {
				return policy.User{}, errors.New("oidc: the token's email is not verified")
			}
		}
	}
	u := policy.User{Name: o.cfg.UsernamePrefix + name}
	if raw, ok := claims[o.cfg.GroupsClaim]; ok {
		var groups []string
		if err := json.Unmarshal(raw, &groups); err != nil {
			var one string
			if err := json.Unmarshal(raw, &one); err != nil {
				return policy.User{}, fmt.Errorf("oidc: claim %q is neither a string nor a list of strings", o.cfg.GroupsClaim)
			}
			groups = []string{one}
		}
		for _, g := range groups {
			u.Groups = append(u.Groups, o.cfg.GroupsPrefix+g)
		}
	}
	return u, nil
}
