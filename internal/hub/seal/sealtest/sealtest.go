// Package sealtest gives tests a sealer with a fresh key, as `purser up`
// makes one for its data folder.
package sealtest

import (
	"crypto/rand"
	"testing"

	"github.com/purser-io/purser/internal/hub/seal"
)

// New returns a sealer with a random key, and the key, for tests that
// start another process on the same sealed rows.
func New(t testing.TB) (*seal.Sealer, []byte) {
	t.Helper()
	key := make([]byte, seal.KeySize)
	rand.Read(key)
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer, key
}
