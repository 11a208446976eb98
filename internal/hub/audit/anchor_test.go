package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// record signs anchors of seqs as one record in a stream created at
// created, linking each to the one before.
func record(t *testing.T, key ed25519.PrivateKey, created time.Time, seqs ...int64) []RecordMessage {
	t.Helper()
	var out []RecordMessage
	prev := ""
	for i, seq := range seqs {
		a := Anchor{N: int64(i + 1), Seq: seq, Hash: "h" + string(rune('a'+seq)), Prev: prev, Stream: created, PublishedAt: created.Add(time.Duration(i) * time.Second)}
		msg, err := Sign(a, key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, RecordMessage{Seq: uint64(i + 1), Data: msg})
		prev = Digest(msg)
	}
	return out
}

func streamOf(created time.Time, msgs []RecordMessage) RecordStream {
	return RecordStream{Created: created, FirstSeq: 1, LastSeq: uint64(len(msgs)), Msgs: uint64(len(msgs)), AppendOnly: true}
}

func TestCheckRecord(t *testing.T) {
	key, other := newKey(t), newKey(t)
	keys := NewKeys(key.Public().(ed25519.PublicKey))
	created := time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.UTC)
	good := record(t, key, created, 0, 3, 5)

	resign := func(msgs []RecordMessage, i int, edit func(*Anchor), by ed25519.PrivateKey) []RecordMessage {
		out := append([]RecordMessage(nil), msgs...)
		a, err := OpenAnchor(out[i].Data, keys)
		if err != nil {
			t.Fatal(err)
		}
		edit(&a)
		data, err := Sign(a, by)
		if err != nil {
			t.Fatal(err)
		}
		out[i].Data = data
		return out
	}
	unsigned := append([]RecordMessage(nil), good...)
	unsigned[2].Data = []byte(`{"seq":5,"hash":"forged","publishedAt":"2026-12-01T08:00:00Z"}`)
	badSig := append([]RecordMessage(nil), good...)
	var env SignedAnchor
	if err := json.Unmarshal(good[2].Data, &env); err != nil {
		t.Fatal(err)
	}
	env.Anchor = json.RawMessage(strings.Replace(string(env.Anchor), `"seq":5`, `"seq":6`, 1))
	badSig[2].Data, _ = json.Marshal(env)

	for name, c := range map[string]struct {
		stream   RecordStream
		msgs     []RecordMessage
		chainSeq int64
		want     string // "" checks
	}{
		"intact":                  {streamOf(created, good), good, 5, ""},
		"empty, empty chain":      {RecordStream{Created: created, AppendOnly: true}, nil, 0, ""},
		"empty, chain has some":   {RecordStream{Created: created, AppendOnly: true}, nil, 4, "holds none, but the chain has 4 entries"},
		"not append-only":         {func() RecordStream { s := streamOf(created, good); s.AppendOnly = false; return s }(), good, 5, "not append-only"},
		"first message gone":      {RecordStream{Created: created, FirstSeq: 2, LastSeq: 3, Msgs: 2, AppendOnly: true}, good[1:], 5, "lost messages"},
		"unsigned":                {streamOf(created, unsigned), unsigned, 5, "anchor message 3: unsigned"},
		"bad signature":           {streamOf(created, badSig), badSig, 5, "signature does not verify"},
		"signed by another key":   {streamOf(created, good), resign(good, 1, func(*Anchor) {}, other), 5, "not a trusted key"},
		"replayed into a new one": {streamOf(created.Add(time.Hour), good), good, 5, "the stream was recreated"},
		"begun late":              {streamOf(created, record(t, key, created, 4, 5)), record(t, key, created, 4, 5), 5, "begins at seq 4"},
		"an anchor left out": {streamOf(created, append(append([]RecordMessage(nil), good[0]), RecordMessage{Seq: 2, Data: good[2].Data})),
			append(append([]RecordMessage(nil), good[0]), RecordMessage{Seq: 2, Data: good[2].Data}), 5, "anchor 3 of its record stands at position 2"},
		"conflicting for one seq": {streamOf(created, resign(good, 2, func(a *Anchor) { a.Seq = 3 }, key)), resign(good, 2, func(a *Anchor) { a.Seq = 3 }, key), 5, "conflicting anchors for seq 3"},
		"restart in the middle":   {streamOf(created, resign(good, 2, func(a *Anchor) { a.Restart = &Restart{Actor: "x"} }, key)), resign(good, 2, func(a *Anchor) { a.Restart = &Restart{Actor: "x"} }, key), 5, "restart in the middle"},
		"restarted by an admin": {streamOf(created, resign(record(t, key, created, 4, 5), 0, func(a *Anchor) { a.Restart = &Restart{Actor: "admin", Reason: "restore"} }, key)),
			// The second anchor's Prev names the first as it was before the
			// edit, so only a record of one restart anchor is tested here.
			nil, 5, "read 0 anchors of the 2"},
	} {
		t.Run(name, func(t *testing.T) {
			anchors, err := CheckRecord(c.stream, c.msgs, keys, c.chainSeq)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("CheckRecord: %v", err)
			case c.want == "" && len(anchors) != len(c.msgs):
				t.Fatalf("CheckRecord returned %d anchors of %d", len(anchors), len(c.msgs))
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("CheckRecord = %v, want an error with %q", err, c.want)
			}
		})
	}

	restart := resign(record(t, key, created, 4), 0, func(a *Anchor) { a.Restart = &Restart{Actor: "admin", Reason: "restore"} }, key)
	if anchors, err := CheckRecord(streamOf(created, restart), restart, keys, 4); err != nil || anchors[0].Restart.Actor != "admin" {
		t.Fatalf("a record restarted by an admin: %v, %v", anchors, err)
	}
}

func TestPublicKeyString(t *testing.T) {
	pub := newKey(t).Public().(ed25519.PublicKey)
	got, err := ParsePublicKey(PublicKeyString(pub))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for _, bad := range []string{"", "abc", "ed25519:", "ed25519:AAAA", "rsa:" + PublicKeyString(pub)[8:]} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q): no error", bad)
		}
	}
}
