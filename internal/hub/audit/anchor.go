package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Anchor is the head of the chain as published outside the database (to
// the stream, by internal/hub/anchor): the Seq and Hash of the newest entry at
// PublishedAt. Whoever can rewrite the database can forge a chain that
// verifies on its own; it cannot also change what was published, so an
// entry that no longer has its anchored hash, or a chain that ends before
// an anchored Seq, shows the rewrite.
//
// Anchors are signed with a key the database does not hold, and form a
// record of their own: the N-th anchor names the digest of the one before
// (Prev) and the stream it was written to (Stream, the stream's creation
// time), so that a record with an anchor missing, added, replayed into a
// recreated stream or forged does not check (CheckRecord).
type Anchor struct {
	N    int64  `json:"n"`
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// Prev is the digest of anchor N-1; empty for the first.
	Prev string `json:"prev,omitempty"`
	// Stream is the creation time of the stream the record is kept in.
	Stream      time.Time `json:"stream"`
	PublishedAt time.Time `json:"publishedAt"`
	// Key is the public key that signs the anchor (PublicKeyString).
	Key string `json:"key"`
	// Restart, on a first anchor over a chain that was already long, says
	// who began the record again and why; a first anchor without it
	// anchors the empty chain.
	Restart *Restart `json:"restart,omitempty"`
	// MACsFrom is the seq of the chain's first entry with a MAC, once the
	// chain has one (0: none yet): from it on, every entry must carry one.
	// Kept outside the database, so that MACs stripped from the database
	// do not make MAC'd entries pass for an older purser's.
	MACsFrom int64 `json:"macsFrom,omitempty"`
}

// Restart is an administrator's decision to begin a new record of
// anchors over an existing chain (after a restore of the database, or
// once the old record is gone), itself an entry of the chain.
type Restart struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// SignedAnchor is an anchor as it travels: the exact bytes signed, and the
// signature.
type SignedAnchor struct {
	Anchor    json.RawMessage `json:"anchor"`
	Signature string          `json:"signature"`
}

// signingContext separates these signatures from any other use of the key.
const signingContext = "purser audit anchor v1\n"

// PublicKeyString is how a public key is shown, configured and compared:
// "ed25519:" and the key in base64.
func PublicKeyString(pub ed25519.PublicKey) string {
	return "ed25519:" + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a key written by PublicKeyString.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), "ed25519:")
	if !ok {
		return nil, fmt.Errorf("audit key %q: want ed25519:<base64>", s)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit key %q: not a base64 ed25519 public key of %d bytes", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// Sign returns the message that carries a, signed by key. It sets a.Key.
func Sign(a Anchor, key ed25519.PrivateKey) ([]byte, error) {
	a.Key = PublicKeyString(key.Public().(ed25519.PublicKey))
	body, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(key, append([]byte(signingContext), body...))
	return json.Marshal(SignedAnchor{Anchor: body, Signature: base64.StdEncoding.EncodeToString(sig)})
}

// Digest names a signed anchor in the next one's Prev.
func Digest(signed []byte) string {
	sum := sha256.Sum256(signed)
	return hex.EncodeToString(sum[:])
}

// Keys are the public keys whose anchors verify: the api's key, and the
// keys it had before a rotation.
type Keys map[string]ed25519.PublicKey

// NewKeys indexes keys by PublicKeyString.
func NewKeys(keys ...ed25519.PublicKey) Keys {
	k := Keys{}
	for _, pub := range keys {
		k[PublicKeyString(pub)] = pub
	}
	return k
}

// OpenAnchor checks the signature of a message written by Sign and returns
// the anchor. An unsigned message, a signature that does not verify, or a
// key not in keys is an error.
func OpenAnchor(msg []byte, keys Keys) (Anchor, error) {
	var s SignedAnchor
	if err := json.Unmarshal(msg, &s); err != nil {
		return Anchor{}, errors.New("not an anchor")
	}
	if len(s.Anchor) == 0 || s.Signature == "" {
		return Anchor{}, errors.New("unsigned")
	}
	var a Anchor
	if err := json.Unmarshal(s.Anchor, &a); err != nil {
		return Anchor{}, fmt.Errorf("malformed anchor: %w", err)
	}
	pub, ok := keys[a.Key]
	if !ok {
		return Anchor{}, fmt.Errorf("signed by %s, which is not a trusted key", a.Key)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || !ed25519.Verify(pub, append([]byte(signingContext), s.Anchor...), sig) {
		return Anchor{}, errors.New("the signature does not verify")
	}
	return a, nil
}

// RecordStream is what the stream holding a record says about itself.
type RecordStream struct {
	Created time.Time
	// FirstSeq and LastSeq are the stream's first and last message
	// numbers; Msgs how many it holds.
	FirstSeq, LastSeq, Msgs uint64
	// AppendOnly: no message can be deleted, the stream not purged, and
	// no limit drops old messages.
	AppendOnly bool
}

// RecordMessage is one message of the record's stream.
type RecordMessage struct {
	Seq  uint64 // the stream's message number
	Data []byte
}

// RecordError says why a record of anchors does not check.
type RecordError struct {
	Message uint64 // the stream message at fault; 0 for the stream itself
	Reason  string
}

func (e *RecordError) Error() string {
	if e.Message == 0 {
		return e.Reason
	}
	return fmt.Sprintf("anchor message %d: %s", e.Message, e.Reason)
}

// CheckRecord checks a whole record of anchors, as read from its stream,
// and returns its anchors, oldest first. chainSeq is the length of the
// chain the record is for: a chain with entries needs a record. The record
// checks when the stream is append-only and lost no message, every message
// is an anchor signed by one of keys, each links to the one before, the
// first anchors the empty chain (or is an administrator's restart), all
// name the stream they are in, and no seq is anchored twice.
func CheckRecord(st RecordStream, msgs []RecordMessage, keys Keys, chainSeq int64) ([]Anchor, *RecordError) {
	switch {
	case !st.AppendOnly:
		return nil, &RecordError{Reason: "the stream of anchors is not append-only: its messages can be deleted or dropped by a limit"}
	case st.Msgs == 0 && chainSeq > 0:
		return nil, &RecordError{Reason: fmt.Sprintf("the stream of anchors holds none, but the chain has %d entries: the stream was deleted or recreated", chainSeq)}
	case st.Msgs > 0 && (st.FirstSeq != 1 || st.Msgs != st.LastSeq):
		return nil, &RecordError{Reason: fmt.Sprintf("the stream of anchors lost messages: it holds %d, numbered %d to %d", st.Msgs, st.FirstSeq, st.LastSeq)}
	case uint64(len(msgs)) != st.Msgs:
		return nil, &RecordError{Reason: fmt.Sprintf("read %d anchors of the %d the stream holds", len(msgs), st.Msgs)}
	}
	out := make([]Anchor, 0, len(msgs))
	prevDigest := ""
	for i, m := range msgs {
		a, err := OpenAnchor(m.Data, keys)
		if err != nil {
			return nil, &RecordError{Message: m.Seq, Reason: err.Error()}
		}
		fail := func(format string, args ...any) ([]Anchor, *RecordError) {
			return nil, &RecordError{Message: m.Seq, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case m.Seq != uint64(i+1):
			return fail("out of place: message %d read at position %d", m.Seq, i+1)
		case a.N != int64(i+1):
			return fail("anchor %d of its record stands at position %d: anchors were removed or added", a.N, i+1)
		case !a.Stream.Equal(st.Created):
			return fail("written to a stream created at %s, but this one was created at %s: the stream was recreated and old anchors copied into it",
				a.Stream.UTC().Format(time.RFC3339Nano), st.Created.UTC().Format(time.RFC3339Nano))
		case a.Prev != prevDigest:
			return fail("does not follow the anchor before it")
		case i == 0 && a.Seq != 0 && a.Restart == nil:
			return fail("the record begins at seq %d, not with the empty chain: it was begun again without an administrator's restart", a.Seq)
		case i > 0 && a.Restart != nil:
			return fail("a restart in the middle of a record")
		case i > 0 && a.Seq == out[i-1].Seq && a.Hash != out[i-1].Hash:
			return fail("conflicting anchors for seq %d", a.Seq)
		case i > 0 && a.Seq <= out[i-1].Seq:
			return fail("anchors seq %d after seq %d: the record goes back", a.Seq, out[i-1].Seq)
		}
		out = append(out, a)
		prevDigest = Digest(m.Data)
	}
	return out, nil
}
