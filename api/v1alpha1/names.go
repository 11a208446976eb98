package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
)

// generatedSuffixLength is what GenerateName appends, as Kubernetes does.
const generatedSuffixLength = 5

// The alphabet has no vowels, so that generated names never spell words,
// and no 0, 1 or 3, which read like letters.
const generatedAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// GenerateName returns prefix followed by five random lowercase letters and
// digits. Names are not guaranteed unique: the store's unique key decides,
// and the caller retries on conflict.
func GenerateName(prefix string) string {
	b := make([]byte, len(prefix), len(prefix)+generatedSuffixLength)
	copy(b, prefix)
	for range generatedSuffixLength {
		b = append(b, generatedAlphabet[rand.IntN(len(generatedAlphabet))])
	}
	return string(b)
}

// SpecHash identifies a spec by content, so that submitting the same
// object twice is recognised as one submission. encoding/json writes struct
// fields in declaration order and map keys sorted, which makes the encoding
// canonical; int64 3 and float64 3 hash alike, as they are the same JSON.
//
// A spec that JSON cannot encode (NaN, channels) hashes to "", which must
// never be taken as a match; nothing Decode returns is such a spec.
func SpecHash(spec any) string {
	data, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
