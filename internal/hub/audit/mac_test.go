package audit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMAC(t *testing.T) {
	m, other := NewMAC([]byte("purser's key")), NewMAC([]byte("another key"))
	sum := m.Sum("abc")
	if !m.Check("abc", sum) {
		t.Fatal("a MAC does not check under its own key")
	}
	for _, tc := range []struct{ hash, mac string }{{"abd", sum}, {"abc", other.Sum("abc")}, {"abc", ""}, {"abc", "zz"}} {
		if m.Check(tc.hash, tc.mac) {
			t.Errorf("Check(%q, %q) = true", tc.hash, tc.mac)
		}
	}
}

func TestWitness(t *testing.T) {
	m := NewMAC([]byte("k"))
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	entry := func(seq int64, at time.Time, mac bool) Entry {
		e := Entry{Seq: seq, Time: at, Hash: strings.Repeat("a", int(seq))}
		if mac {
			e.MAC = m.Sum(e.Hash)
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		from     int64
		entries  []Entry
		wantSeq  int64 // the entry refused; 0: none
		want     string
		unsigned int64
	}{
		{name: "all signed", entries: []Entry{entry(1, t0, true), entry(2, t0.Add(time.Second), true)}},
		{name: "an older purser's entries, then signed ones", entries: []Entry{entry(1, t0, false), entry(2, t0, false), entry(3, t0, true)}, unsigned: 2},
		{name: "an unsigned entry after a signed one", entries: []Entry{entry(1, t0, true), entry(2, t0, false)}, wantSeq: 2, want: "unsigned"},
		{name: "a forged MAC", entries: []Entry{entry(1, t0, true), {Seq: 2, Time: t0, Hash: "bb", MAC: m.Sum("cc")}}, wantSeq: 2, want: "forged"},
		{name: "MACs stripped where an anchor says they began", from: 1, entries: []Entry{entry(1, t0, false)}, wantSeq: 1, want: "unsigned"},
		{name: "a small step back in time", entries: []Entry{entry(1, t0, true), entry(2, t0.Add(-time.Minute), true)}},
		{name: "a month back", entries: []Entry{entry(1, t0, true), entry(2, t0.AddDate(0, -1, 0), true)}, wantSeq: 2, want: "before the entry it follows"},
		{name: "back in time against the newest, not the last", entries: []Entry{entry(1, t0, true), entry(2, t0.Add(time.Hour), true),
			entry(3, t0.Add(time.Minute), true)}, wantSeq: 3, want: "before the entry it follows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWitness(m)
			w.RequireFrom(tc.from)
			var refused *ChainError
			for _, e := range tc.entries {
				if err := w.Add(e); err != nil {
					if !errors.As(err, &refused) {
						t.Fatalf("Add: %v, not a *ChainError", err)
					}
					break
				}
			}
			switch {
			case tc.wantSeq == 0 && refused != nil:
				t.Fatalf("refused entry %d: %s", refused.Seq, refused.Reason)
			case tc.wantSeq != 0 && (refused == nil || refused.Seq != tc.wantSeq || !strings.Contains(refused.Reason, tc.want)):
				t.Fatalf("refused %+v, want entry %d for %q", refused, tc.wantSeq, tc.want)
			}
			if tc.wantSeq == 0 && w.Unsigned() != tc.unsigned {
				t.Errorf("Unsigned = %d, want %d", w.Unsigned(), tc.unsigned)
			}
		})
	}
}
