// Package seal encrypts what purser keeps secret at rest: cluster
// kubeconfigs and the data of Secret deployables. It uses AES-256-GCM with
// one key read from a key file; the database only ever holds ciphertext.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// version prefixes every sealed value so that the format (and later the
// key) can change without guessing.
const version byte = 1

// KeySize is the length of an AES-256 key.
const KeySize = 32

// Sealer encrypts and decrypts with one key.
type Sealer struct {
	aead   cipher.AEAD
	macKey []byte
	key    []byte // only ever used to derive keys for other purposes
}

// New returns a Sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	// The fingerprint key is derived, so that the encryption key itself is
	// never used for two purposes.
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("purser fingerprint key"))
	return &Sealer{aead: aead, macKey: mac.Sum(nil), key: key}, nil
}

// AuditKey is the key that authenticates audit entries (audit.MAC),
// derived from the sealing key as the fingerprint key is: every component
// that writes the database holds the key file, the database never does.
func (s *Sealer) AuditKey() []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte("purser audit entry key"))
	return mac.Sum(nil)
}

// Fingerprint is a keyed hash of a secret value: equal values give equal
// fingerprints, so a change can be detected, but without the key a
// fingerprint cannot be used to guess the value.
func (s *Sealer) Fingerprint(data []byte) string {
	mac := hmac.New(sha256.New, s.macKey)
	mac.Write(data)
	return hex.EncodeToString(mac.Sum(nil))
}

// LoadKeyFile reads a key file holding the key in base64 (one line).
func LoadKeyFile(path string) (*Sealer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: read key file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("seal: key file %s is not base64: %w", path, err)
	}
	return New(key)
}

// EnsureKeyFile loads the key file, creating it with a new random key
// (mode 0600) if it does not exist, as `purser up` does in its data dir.
func EnsureKeyFile(path string) (*Sealer, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		key := make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("seal: create key file: %w", err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("seal: write key file: %w", werr)
		}
	}
	return LoadKeyFile(path)
}

// Seal encrypts plaintext; associated binds the ciphertext to its place
// (e.g. "cluster/dc1-a/kubeconfig") so that it cannot be moved to another
// row unnoticed.
func (s *Sealer) Seal(plaintext []byte, associated string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+s.aead.Overhead())
	out = append(out, version)
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, plaintext, []byte(associated)), nil
}

// Open decrypts what Seal produced for the same associated data.
func (s *Sealer) Open(sealed []byte, associated string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != version {
		return nil, errors.New("seal: not a sealed value")
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(associated))
	if err != nil {
		return nil, errors.New("seal: cannot decrypt: wrong key or tampered value")
	}
	return plain, nil
}
