// Package audit defines the hash chain that makes purser's audit log
// tamper-evident (invariant 6 of the design).
//
// Every mutation, approval, placement, eviction and failover is recorded as
// an Entry in the same database transaction as the change itself (see
// internal/hub/store). Each entry carries the hash of its predecessor, so editing,
// removing or reordering any stored entry breaks the chain at that point, and
// Verifier names the first entry where it breaks.
//
// This package is pure: it computes and checks hashes and never touches the
// database, so the same code verifies a chain read from SQLite, PostgreSQL or
// an exported file.
package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"
)

// GenesisHash is the PrevHash of the first entry (Seq 1) of every chain.
// An empty string, rather than a fixed digest, keeps the first row readable
// and cannot collide with a real hash, which is always 64 hex digits.
const GenesisHash = ""

// Entry is one record of the audit log.
type Entry struct {
	Seq       int64
	Time      time.Time
	Actor     string
	Action    string
	Kind      string
	Namespace string
	Name      string
	Summary   string
	Outcome   string
	// Details is hashed byte for byte, so it must be stored verbatim (TEXT,
	// not a re-encoding type such as PostgreSQL JSONB).
	Details  json.RawMessage
	PrevHash string
	Hash     string
	// MAC authenticates Hash under the key of purser's writers (MAC); it
	// is not part of the hashed encoding, and empty in entries an older
	// purser wrote.
	MAC string
}

// hashDomain prefixes every hashed encoding so that a digest of an audit
// entry can never be confused with a digest of anything else, and so that a
// future change of encoding can be introduced under a new version tag.
const hashDomain = "purser.audit.v1"

// CanonicalTime is t as the chain sees it: UTC, truncated to microseconds.
// Microseconds are the finest precision PostgreSQL's timestamptz keeps, so a
// time that went through a database round trip still hashes the same.
func CanonicalTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// ComputeHash returns the hex SHA-256 of e's canonical encoding, which covers
// every field except Hash itself. Each field is written with an explicit
// length prefix, so moving bytes from one field into its neighbour always
// changes the digest.
func ComputeHash(e Entry) string {
	h := sha256.New()
	writeField(h, []byte(hashDomain))
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], uint64(e.Seq))
	writeField(h, seq[:])
	writeField(h, []byte(CanonicalTime(e.Time).Format(time.RFC3339Nano)))
	for _, s := range []string{e.Actor, e.Action, e.Kind, e.Namespace, e.Name, e.Summary, e.Outcome} {
		writeField(h, []byte(s))
	}
	writeField(h, e.Details)
	writeField(h, []byte(e.PrevHash))
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// ChainError reports the first entry at which a chain does not verify.
type ChainError struct {
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit chain broken at seq %d: %s", e.Seq, e.Reason)
}

// Verifier checks a chain fed to it one entry at a time, in Seq order, so
// that a caller can stream a log of any length in batches without holding it
// in memory. Once an entry fails, every later Add returns the same error: a
// broken chain cannot be trusted past its first break.
type Verifier struct {
	lastSeq  int64
	lastHash string
	count    int64
	err      *ChainError
}

// NewVerifier returns a Verifier that expects the entry after (prevSeq,
// prevHash). NewVerifier(0, GenesisHash) verifies a chain from its start;
// resuming from a trusted checkpoint passes that entry's Seq and Hash.
func NewVerifier(prevSeq int64, prevHash string) *Verifier {
	return &Verifier{lastSeq: prevSeq, lastHash: prevHash}
}

// Add checks e against its predecessor and its own Hash. It returns a
// *ChainError naming e.Seq and one of the reasons "seq gap: expected N, got
// M", "prevHash does not match seq N" or "hash mismatch".
func (v *Verifier) Add(e Entry) error {
	if v.err != nil {
		return v.err
	}
	// Seq is checked first so that a removed entry is reported as missing
	// rather than as a mismatched link, which is the more useful diagnosis.
	if want := v.lastSeq + 1; e.Seq != want {
		v.err = &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("seq gap: expected %d, got %d", want, e.Seq)}
		return v.err
	}
	if e.PrevHash != v.lastHash {
		v.err = &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("prevHash does not match seq %d", v.lastSeq)}
		return v.err
	}
	if ComputeHash(e) != e.Hash {
		v.err = &ChainError{Seq: e.Seq, Reason: "hash mismatch"}
		return v.err
	}
	v.lastSeq, v.lastHash = e.Seq, e.Hash
	v.count++
	return nil
}

// Count is the number of entries that verified.
func (v *Verifier) Count() int64 { return v.count }

// Last is the Seq and Hash of the last entry that verified (or the starting
// point given to NewVerifier when none did).
func (v *Verifier) Last() (seq int64, entryHash string) { return v.lastSeq, v.lastHash }

// Verify checks a whole chain held in memory. prevHash is the Hash of the
// entry before entries[0]; GenesisHash means entries start the chain, so the
// first must have Seq 1. For any other prevHash the first entry's Seq is
// taken as given, since the hash alone does not say which seq it belonged to;
// use NewVerifier to check that too.
func Verify(entries []Entry, prevHash string) (ok bool, brokenSeq int64, reason string) {
	var prevSeq int64
	if prevHash != GenesisHash && len(entries) > 0 {
		prevSeq = entries[0].Seq - 1
	}
	v := NewVerifier(prevSeq, prevHash)
	for _, e := range entries {
		if err := v.Add(e); err != nil {
			var ce *ChainError
			if !errors.As(err, &ce) {
				return false, e.Seq, err.Error()
			}
			return false, ce.Seq, ce.Reason
		}
	}
	return true, 0, ""
}
