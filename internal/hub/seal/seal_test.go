package seal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestSealRoundTripAndBinding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	s, err := EnsureKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	secret := []byte("password=hunter2")
	sealed, err := s.Seal(secret, "deployable/uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("sealed value contains the plaintext")
	}
	again, _ := s.Seal(secret, "deployable/uid-1")
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of the same value are equal: nonce reused")
	}
	plain, err := s.Open(sealed, "deployable/uid-1")
	if err != nil || !bytes.Equal(plain, secret) {
		t.Fatalf("open: %q, %v", plain, err)
	}
	if _, err := s.Open(sealed, "deployable/uid-2"); err == nil {
		t.Fatal("opened a value bound to another place")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := s.Open(sealed, "deployable/uid-1"); err == nil {
		t.Fatal("opened a tampered value")
	}
	// The same file gives the same key.
	s2, err := EnsureKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open(again, "deployable/uid-1"); err != nil {
		t.Fatalf("reloaded key cannot open: %v", err)
	}
}

func TestBadKeys(t *testing.T) {
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("accepted a 16-byte key")
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("not base64!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(path); err == nil {
		t.Error("accepted a key file that is not base64")
	}
}

func TestFingerprint(t *testing.T) {
	a, _ := New(bytes.Repeat([]byte{1}, KeySize))
	b, _ := New(bytes.Repeat([]byte{2}, KeySize))
	if first, again := a.Fingerprint([]byte("x")), a.Fingerprint([]byte("x")); first != again {
		t.Error("same value, different fingerprints")
	}
	if a.Fingerprint([]byte("x")) == a.Fingerprint([]byte("y")) {
		t.Error("different values, same fingerprint")
	}
	if a.Fingerprint([]byte("x")) == b.Fingerprint([]byte("x")) {
		t.Error("fingerprint does not depend on the key")
	}
}

func TestSplitAndJoinSecret(t *testing.T) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"p": "s3cret"}, "data": map[string]any{"q": "eA=="}}
	inClear, values, err := SplitSecret(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inClear["stringData"]; ok || inClear["kind"] != "Secret" {
		t.Fatalf("clear part: %v", inClear)
	}
	if _, ok := tmpl["stringData"]; !ok {
		t.Fatal("SplitSecret changed its input")
	}
	back, err := JoinSecret(inClear, values)
	if err != nil || back["stringData"].(map[string]any)["p"] != "s3cret" || back["data"].(map[string]any)["q"] != "eA==" {
		t.Fatalf("joined: %v, %v", back, err)
	}
}

// TestSealedPatches: a Secret's overrides' patches travel with its
// values; what stays in clear is their shape.
func TestSealedPatches(t *testing.T) {
	_, values, err := SplitSecret(map[string]any{"kind": "Secret", "stringData": map[string]any{"p": "base"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenPatches(values); err != nil || got != nil {
		t.Fatalf("values sealed without patches: %v %v", got, err)
	}
	patches := []json.RawMessage{json.RawMessage(`{"stringData":{"p":"dc2"}}`), json.RawMessage(`[{"op":"add","path":"/stringData/q","value":"dc3"}]`)}
	sealed, err := SealPatches(values, patches)
	if err != nil {
		t.Fatal(err)
	}
	back, err := OpenPatches(sealed)
	if err != nil || len(back) != 2 || string(back[0]) != string(patches[0]) || string(back[1]) != string(patches[1]) {
		t.Fatalf("opened %s, %v", back, err)
	}
	if joined, err := JoinSecret(map[string]any{"kind": "Secret"}, sealed); err != nil || joined["stringData"].(map[string]any)["p"] != "base" {
		t.Fatalf("the values beside the patches: %v %v", joined, err)
	}
	for in, want := range map[string]string{
		`{"stringData":{"p":"dc2","gone":null},"metadata":{"labels":{"a":"b"}}}`:               `{"metadata":{"labels":{"a":"(redacted)"}},"stringData":{"gone":null,"p":"(redacted)"}}`,
		`[{"op":"add","path":"/stringData/q","value":"dc3"},{"op":"remove","path":"/data/x"}]`: `[{"op":"add","path":"/stringData/q","value":"(redacted)"},{"op":"remove","path":"/data/x"}]`,
	} {
		if got, err := RedactPatch(json.RawMessage(in)); err != nil || string(got) != want {
			t.Errorf("RedactPatch(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}
