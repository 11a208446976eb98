package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// MAC authenticates entries: an HMAC-SHA256 of an entry's Hash under a
// key that purser's writers hold (derived from the key file every
// component that writes the database is given) and the database does
// not. Someone who can write the database but not read that file can
// still append an entry whose hash chain is correct; they cannot give it
// a MAC that checks, so verify names it and no anchor vouches for it.
type MAC struct {
	key []byte
}

// NewMAC returns a MAC under key.
func NewMAC(key []byte) *MAC { return &MAC{key: key} }

// Sum is the MAC of an entry with that hash.
func (m *MAC) Sum(entryHash string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(macDomain))
	h.Write([]byte(entryHash))
	return hex.EncodeToString(h.Sum(nil))
}

// Check reports whether mac is the MAC of an entry with that hash.
func (m *MAC) Check(entryHash, mac string) bool {
	want, err := hex.DecodeString(m.Sum(entryHash))
	if err != nil {
		return false
	}
	got, err := hex.DecodeString(mac)
	return err == nil && hmac.Equal(want, got)
}

// macDomain separates these MACs from any other use of the key.
const macDomain = "purser.audit.entry-mac.v1\n"

// MaxClockStep is how far an entry may be dated before its predecessor.
// Entries are dated when their transaction appends them and numbered when
// it commits, by replicas whose clocks differ a little, so a small step
// back is honest; a month is not.
const MaxClockStep = 10 * time.Minute

// Witness checks what a hash chain cannot: that every entry was written
// by one of purser's writers (its MAC, once the chain's entries carry
// them), and that no entry is dated before its predecessor by more than
// MaxClockStep. Entries from before MACs were written (an older purser)
// have none; the first entry with a MAC begins the part of the chain
// where every entry must have one. Feed it entries in Seq order.
type Witness struct {
	mac      *MAC // nil: MACs are not checked
	macs     bool // an entry with a MAC was seen
	prev     time.Time
	unsigned int64 // entries before the first MAC
	from     int64 // entries from this seq on must carry a MAC (RequireFrom); 0: from the first that does
	first    int64 // the first entry seen with a MAC
}

// NewWitness returns a Witness; with a nil mac, only the dates are checked.
func NewWitness(mac *MAC) *Witness { return &Witness{mac: mac} }

// Add checks e, after its predecessors, and returns a *ChainError naming
// e.Seq when e was not written by purser or is dated too early.
func (w *Witness) Add(e Entry) error {
	if w.mac != nil {
		switch {
		case e.MAC == "" && (w.macs || (w.from > 0 && e.Seq >= w.from)):
			return &ChainError{Seq: e.Seq, Reason: "unsigned: it carries no MAC, so it was not written by one of purser's components (appended to the database by hand?)"}
		case e.MAC == "":
			w.unsigned++
		case !w.mac.Check(e.Hash, e.MAC):
			return &ChainError{Seq: e.Seq, Reason: "forged: its MAC does not check under the key of purser's writers"}
		default:
			if !w.macs {
				w.first = e.Seq
			}
			w.macs = true
		}
	}
	if !w.prev.IsZero() && e.Time.Before(w.prev.Add(-MaxClockStep)) {
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("dated %s, %s before the entry it follows: entries are not written back in time",
			CanonicalTime(e.Time).Format(time.RFC3339), w.prev.Sub(e.Time).Round(time.Second))}
	}
	if e.Time.After(w.prev) {
		w.prev = e.Time
	}
	return nil
}

// Begin sets where the checks stand after e, an entry checked before:
// its date, and whether MACs have begun.
func (w *Witness) Begin(e Entry) {
	w.prev = e.Time
	w.macs = w.macs || e.MAC != ""
}

// RequireFrom makes every entry from seq on (seq > 0) carry a MAC,
// whatever the entries before it carry: what an anchor recorded of where
// MACs began.
func (w *Witness) RequireFrom(seq int64) { w.from = seq }

// MACsFrom is the seq of the first entry seen with a MAC; 0 if none.
func (w *Witness) MACsFrom() int64 { return w.first }

// Unsigned is how many entries came before the first with a MAC: the
// chain as an older purser wrote it, which only its hashes and anchors
// vouch for.
func (w *Witness) Unsigned() int64 { return w.unsigned }
