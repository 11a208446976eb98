package anchor

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The signing key is an ed25519 private key in a PEM "PRIVATE KEY" block
// (PKCS #8), the form `openssl genpkey -algorithm ed25519` writes, so that
// an operator can make one without purser and keep it in a Kubernetes
// Secret. It lives beside the api, never in the database: whoever can
// rewrite the database must not be able to sign what it publishes.

// LoadKeyFile reads a signing key.
func LoadKeyFile(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit signing key %s: no PEM PRIVATE KEY block (make one with: openssl genpkey -algorithm ed25519)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit signing key %s: a %T, not an ed25519 key", path, k)
	}
	return key, nil
}

// EnsureKeyFile loads the signing key at path, creating it (readable by
// its owner only) when there is none, as `purser up` does in its data
// folder.
func EnsureKeyFile(path string) (ed25519.PrivateKey, error) {
	key, err := LoadKeyFile(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	// O_EXCL: two processes starting at once must not each write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	return key, nil
}
