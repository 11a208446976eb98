package audit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// chain builds n linked entries starting at genesis.
func chain(n int) []Entry {
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	out := make([]Entry, 0, n)
	prev := GenesisHash
	for i := 1; i <= n; i++ {
		e := Entry{
			Seq:       int64(i),
			Time:      base.Add(time.Duration(i) * time.Second),
			Actor:     "alice",
			Action:    "create",
			Kind:      "Runnable",
			Namespace: "team-a",
			Name:      "job-" + strings.Repeat("x", i),
			Summary:   "submitted",
			Outcome:   "Success",
			Details:   json.RawMessage(`{"generation":1}`),
			PrevHash:  prev,
		}
		e.Hash = ComputeHash(e)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func TestComputeHashCoversEveryField(t *testing.T) {
	e := chain(1)[0]
	orig := ComputeHash(e)
	mutations := map[string]func(*Entry){
		"Seq":       func(e *Entry) { e.Seq++ },
		"Time":      func(e *Entry) { e.Time = e.Time.Add(time.Microsecond) },
		"Actor":     func(e *Entry) { e.Actor = "mallory" },
		"Action":    func(e *Entry) { e.Action = "delete" },
		"Kind":      func(e *Entry) { e.Kind = "Deployable" },
		"Namespace": func(e *Entry) { e.Namespace = "team-b" },
		"Name":      func(e *Entry) { e.Name = "other" },
		"Summary":   func(e *Entry) { e.Summary = "nothing to see" },
		"Outcome":   func(e *Entry) { e.Outcome = "Failure" },
		"Details":   func(e *Entry) { e.Details = json.RawMessage(`{"generation":2}`) },
		"PrevHash":  func(e *Entry) { e.PrevHash = strings.Repeat("0", 64) },
	}
	for field, mutate := range mutations {
		t.Run(field, func(t *testing.T) {
			m := e
			mutate(&m)
			if ComputeHash(m) == orig {
				t.Fatalf("changing %s does not change the hash", field)
			}
		})
	}
	t.Run("Hash is not covered", func(t *testing.T) {
		m := e
		m.Hash = "whatever"
		if ComputeHash(m) != orig {
			t.Fatal("Hash must not be part of its own digest")
		}
	})
}

func TestComputeHashUnambiguous(t *testing.T) {
	// Without length prefixes these two would encode to the same bytes.
	a := Entry{Actor: "ab", Action: "c"}
	b := Entry{Actor: "a", Action: "bc"}
	if ComputeHash(a) == ComputeHash(b) {
		t.Fatal("adjacent fields are ambiguous")
	}
	var nilDetails, emptyDetails Entry
	emptyDetails.Details = json.RawMessage{}
	if ComputeHash(nilDetails) != ComputeHash(emptyDetails) {
		t.Fatal("nil and empty Details must hash the same: a database returns NULL for both")
	}
}

func TestComputeHashTimeCanonical(t *testing.T) {
	e := chain(1)[0]
	orig := ComputeHash(e)
	// Sub-microsecond digits and the time zone do not survive a PostgreSQL
	// round trip, so they must not matter.
	m := e
	m.Time = e.Time.Add(999 * time.Nanosecond).In(time.FixedZone("CEST", 2*3600))
	if ComputeHash(m) != orig {
		t.Fatal("hash depends on sub-microsecond precision or time zone")
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name       string
		tamper     func([]Entry) []Entry
		prevHash   string
		wantOK     bool
		wantSeq    int64
		wantReason string
	}{
		{name: "intact", tamper: func(c []Entry) []Entry { return c }, wantOK: true},
		{name: "empty", tamper: func([]Entry) []Entry { return nil }, wantOK: true},
		{name: "summary edited", tamper: func(c []Entry) []Entry { c[2].Summary = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "actor edited", tamper: func(c []Entry) []Entry { c[2].Actor = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "action edited", tamper: func(c []Entry) []Entry { c[2].Action = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "kind edited", tamper: func(c []Entry) []Entry { c[2].Kind = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "namespace edited", tamper: func(c []Entry) []Entry { c[2].Namespace = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "name edited", tamper: func(c []Entry) []Entry { c[2].Name = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "outcome edited", tamper: func(c []Entry) []Entry { c[2].Outcome = "x"; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "details edited", tamper: func(c []Entry) []Entry { c[2].Details = nil; return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "time edited", tamper: func(c []Entry) []Entry { c[2].Time = c[2].Time.Add(time.Hour); return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{name: "hash edited", tamper: func(c []Entry) []Entry { c[2].Hash = strings.Repeat("f", 64); return c }, wantSeq: 3, wantReason: "hash mismatch"},
		{
			name: "entry rewritten with a fresh hash",
			tamper: func(c []Entry) []Entry {
				c[2].Summary = "x"
				c[2].Hash = ComputeHash(c[2])
				return c
			},
			wantSeq: 4, wantReason: "prevHash does not match seq 3",
		},
		{name: "prevHash edited", tamper: func(c []Entry) []Entry { c[2].PrevHash = c[0].Hash; return c }, wantSeq: 3, wantReason: "prevHash does not match seq 2"},
		{name: "seq edited", tamper: func(c []Entry) []Entry { c[2].Seq = 7; return c }, wantSeq: 7, wantReason: "seq gap: expected 3, got 7"},
		{name: "entry removed", tamper: func(c []Entry) []Entry { return append(c[:2], c[3:]...) }, wantSeq: 4, wantReason: "seq gap: expected 3, got 4"},
		{name: "entries swapped", tamper: func(c []Entry) []Entry { c[2], c[3] = c[3], c[2]; return c }, wantSeq: 4, wantReason: "seq gap: expected 3, got 4"},
		{name: "first entry removed", tamper: func(c []Entry) []Entry { return c[1:] }, wantSeq: 2, wantReason: "seq gap: expected 1, got 2"},
		{name: "genesis prevHash forged", tamper: func(c []Entry) []Entry { c[0].PrevHash = "abc"; return c }, wantSeq: 1, wantReason: "prevHash does not match seq 0"},
		{name: "resume mid-chain", tamper: func(c []Entry) []Entry { return c[2:] }, prevHash: chain(5)[1].Hash, wantOK: true},
		{name: "resume with wrong prevHash", tamper: func(c []Entry) []Entry { return c[2:] }, prevHash: chain(5)[0].Hash, wantSeq: 3, wantReason: "prevHash does not match seq 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := tt.tamper(chain(5))
			ok, seq, reason := Verify(entries, tt.prevHash)
			if ok != tt.wantOK || seq != tt.wantSeq || reason != tt.wantReason {
				t.Fatalf("Verify = (%v, %d, %q), want (%v, %d, %q)", ok, seq, reason, tt.wantOK, tt.wantSeq, tt.wantReason)
			}
		})
	}
}

func TestVerifierStreamsBatchesAndStaysBroken(t *testing.T) {
	entries := chain(10)
	v := NewVerifier(0, GenesisHash)
	for _, batch := range [][]Entry{entries[:3], entries[3:7], entries[7:]} {
		for _, e := range batch {
			if err := v.Add(e); err != nil {
				t.Fatalf("Add(seq %d): %v", e.Seq, err)
			}
		}
	}
	if v.Count() != 10 {
		t.Fatalf("Count = %d, want 10", v.Count())
	}
	if seq, hash := v.Last(); seq != 10 || hash != entries[9].Hash {
		t.Fatalf("Last = (%d, %s), want (10, %s)", seq, hash, entries[9].Hash)
	}

	bad := chain(3)
	bad[1].Outcome = "forged"
	v = NewVerifier(0, GenesisHash)
	_ = v.Add(bad[0])
	err := v.Add(bad[1])
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Seq != 2 || ce.Reason != "hash mismatch" {
		t.Fatalf("Add = %v, want ChainError at seq 2", err)
	}
	if err := v.Add(bad[2]); !errors.As(err, &ce) || ce.Seq != 2 {
		t.Fatalf("Add after a break = %v, want the first break again", err)
	}
	if v.Count() != 1 {
		t.Fatalf("Count = %d, want 1", v.Count())
	}
	if got := err.Error(); got != "audit chain broken at seq 2: hash mismatch" {
		t.Fatalf("Error() = %q", got)
	}
}
