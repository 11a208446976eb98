package client

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Login is what `purser login` keeps of a sign-in with the server's OIDC
// provider: the ID token sent as the bearer token, and what refreshes it.
// It is cached per server, readable by its owner only, apart from the
// client config (which `purser up` rewrites).
type Login struct {
	Server       string    `json:"server"`
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"clientID"`
	TokenURL     string    `json:"tokenURL"`
	IDToken      string    `json:"idToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry"`
}

// LoginCachePath is where the login for server is kept: under the user's
// cache folder ($XDG_CACHE_HOME), one file per server.
func LoginCachePath(server string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("login cache: %w", err)
	}
	sum := sha256.Sum256([]byte(server))
	return filepath.Join(dir, "purser", "login", hex.EncodeToString(sum[:8])+".json"), nil
}

// SaveLogin writes l to its server's cache file.
func SaveLogin(l *Login) error {
	path, err := LoginCachePath(l.Server)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("login cache: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("login cache: %w", err)
	}
	return os.Rename(tmp, path)
}

// LoadLogin reads the login cached for server; nil when there is none.
func LoadLogin(server string) (*Login, error) {
	path, err := LoginCachePath(server)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("login cache: %w", err)
	}
	var l Login
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("login cache %s: %w", path, err)
	}
	return &l, nil
}

// RemoveLogin forgets the login for server.
func RemoveLogin(server string) error {
	path, err := LoginCachePath(server)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// expiryMargin refreshes a token that would expire during the request.
const expiryMargin = 30 * time.Second

// Token returns a valid ID token, refreshing it with the refresh token
// (and saving the result) when it expires.
func (l *Login) Token(ctx context.Context) (string, error) {
	if time.Now().Add(expiryMargin).Before(l.Expiry) {
		return l.IDToken, nil
	}
	if l.RefreshToken == "" {
		return "", fmt.Errorf("the login to %s expired at %s; run purser login again", l.Server, l.Expiry.Format(time.RFC3339))
	}
	cfg := oauth2.Config{ClientID: l.ClientID, Endpoint: oauth2.Endpoint{TokenURL: l.TokenURL}}
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: l.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err != nil {
		return "", fmt.Errorf("refresh the login to %s (run purser login again): %w", l.Server, err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", fmt.Errorf("refresh the login to %s: the provider returned no ID token; run purser login again", l.Server)
	}
	if err := l.SetToken(tok, id); err != nil {
		return "", err
	}
	return id, SaveLogin(l)
}

// SetToken records a token response and its ID token. The ID token's own
// expiry bounds its use, whatever the access token's says.
func (l *Login) SetToken(tok *oauth2.Token, idToken string) error {
	exp, err := jwtExpiry(idToken)
	if err != nil {
		return err
	}
	l.IDToken, l.Expiry = idToken, exp
	if tok.RefreshToken != "" {
		l.RefreshToken = tok.RefreshToken
	}
	return nil
}

// jwtExpiry reads an ID token's "exp" without checking its signature: the
// client only needs to know when to refresh; the server verifies it.
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("the ID token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("the ID token's claims: %w", err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		return time.Time{}, errors.New("the ID token has no expiry")
	}
	return time.Unix(claims.Exp, 0), nil
}
