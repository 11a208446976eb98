package anchor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// fixture is a database of one engine, a real NATS and the api's key.
type fixture struct {
	t       *testing.T
	dsn     string
	db      *store.Store
	nats    *streamtest.Server
	streams *stream.Client
	key     ed25519.PrivateKey
}

func newFixture(t *testing.T, eng storetest.Engine) *fixture {
	f := &fixture{t: t, dsn: eng.NewDSN(t)}
	var err error
	if f.db, err = store.Open(t.Context(), f.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.db.Close() })
	f.nats = streamtest.Start(t, "")
	f.streams = streamtest.Declared(t, f.nats.URL)
	if _, f.key, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	return f
}

// publisher starts a publisher on its own connection, as an api replica
// does; hooked, it is woken by the store's commits.
func (f *fixture) publisher(interval time.Duration, hooked bool) *anchor.Publisher {
	f.t.Helper()
	p, err := anchor.New(anchor.Config{Store: f.db, Stream: streamtest.Connect(f.t, f.nats.URL), Key: f.key, Interval: interval})
	if err != nil {
		f.t.Fatal(err)
	}
	if hooked {
		f.db.OnAuditCommit(p.Notify)
	}
	if err := p.Init(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(ctx) })
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	return p
}

func (f *fixture) append(from, n int) {
	f.t.Helper()
	for i := range n {
		err := f.db.Tx(f.t.Context(), func(tx *store.Tx) error {
			return tx.Audit().Append(f.t.Context(), &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable",
				Namespace: "team-a", Name: fmt.Sprintf("r-%d", from+i), Summary: "submitted", Outcome: "Queued"})
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) head() int64 {
	f.t.Helper()
	var seq int64
	if err := f.db.Read(f.t.Context(), func(tx *store.Tx) (err error) {
		seq, _, err = tx.Audit().Head(f.t.Context())
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return seq
}

// record reads the record as verification does.
func (f *fixture) record(p *anchor.Publisher) (anchor.Record, error) {
	return p.Record(f.t.Context(), f.head())
}

// waitAnchored waits until seq is anchored and returns the record then.
func (f *fixture) waitAnchored(p *anchor.Publisher, seq int64) anchor.Record {
	f.t.Helper()
	var rec anchor.Record
	sandboxtest.Eventually(f.t, streamtest.Timeout, fmt.Sprintf("seq %d anchored", seq), func(context.Context) error {
		var err error
		if rec, err = f.record(p); err != nil {
			return err
		}
		if len(rec.Anchors) == 0 || rec.Anchors[len(rec.Anchors)-1].Seq < seq {
			if problem := p.Problem(); problem != nil {
				return fmt.Errorf("anchors %+v, the publisher's problem: %w", rec.Anchors, problem)
			}
			return fmt.Errorf("anchors %+v", rec.Anchors)
		}
		return nil
	})
	return rec
}

// verify checks the chain against the record, as GET /history/verify.
func (f *fixture) verify(p *anchor.Publisher) (store.VerifyResult, error) {
	f.t.Helper()
	rec, err := f.record(p)
	if err != nil {
		return store.VerifyResult{}, err
	}
	res, err := f.db.VerifyAuditAnchored(f.t.Context(), rec.Anchors)
	if err != nil {
		f.t.Fatal(err)
	}
	return res, nil
}

// Two api replicas keep one linear record of the growing chain; a chain
// forged in the database (its tail rewritten with recomputed hashes)
// verifies on its own but not against the record, and neither replica
// anchors the forgery.
func TestAnchors(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng)
			a := f.publisher(time.Hour, true)
			b := f.publisher(20*time.Millisecond, false)

			f.append(0, 5)
			f.waitAnchored(a, 5)
			f.append(5, 3)
			rec := f.waitAnchored(b, 8)
			if rec.Anchors[0].Seq != 0 || rec.Anchors[0].Hash != audit.GenesisHash {
				t.Fatalf("the record does not begin with the empty chain: %+v", rec.Anchors[0])
			}
			if res, err := f.verify(a); err != nil || !res.OK || res.Entries != 8 {
				t.Fatalf("the honest chain: %+v, %v", res, err)
			}

			var entries []*audit.Entry
			if err := f.db.Read(t.Context(), func(tx *store.Tx) (err error) {
				entries, err = tx.Audit().List(t.Context(), store.AuditFilter{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			storetest.ForgeAuditTail(t, f.dsn, entries, 3)
			if res, err := f.db.VerifyAudit(t.Context()); err != nil || !res.OK {
				t.Fatalf("the forgery should verify on its own: %+v, %v", res, err)
			}
			res, err := f.verify(a)
			if err != nil {
				t.Fatal(err)
			}
			first := int64(0) // the first anchored entry from 3 on is where it shows
			for _, an := range rec.Anchors {
				if an.Seq >= 3 && (first == 0 || an.Seq < first) {
					first = an.Seq
				}
			}
			if res.OK || res.BrokenSeq != first || !strings.HasPrefix(res.Reason, "rewritten") {
				t.Fatalf("the forgery against the record %+v: %+v, want rewritten at seq %d", rec.Anchors, res, first)
			}
			// The forged head is not anchored: the replicas see that the
			// entry they anchored last changed.
			f.append(8, 1)
			waitProblem(t, a, "the chain was rewritten")
			waitProblem(t, b, "the chain was rewritten")
		})
	}
}

func waitProblem(t *testing.T, p *anchor.Publisher, want string) {
	t.Helper()
	sandboxtest.Eventually(t, streamtest.Timeout, fmt.Sprintf("the publisher's problem %q", want), func(context.Context) error {
		p.Notify()
		err := p.Problem()
		if err == nil {
			return errors.New("no problem yet")
		}
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("problem so far: %w", err)
		}
		return nil
	})
}

// The head is anchored on commit, not at the next poll: a tail cut right
// after the last write (the entries deleted and the head moved back) shows.
func TestTailCutAfterLastWrite(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng)
			p := f.publisher(time.Hour, true) // only commits wake it
			f.append(0, 4)
			f.waitAnchored(p, 4)

			storetest.CutAuditTail(t, f.dsn, 3)
			res, err := f.verify(p)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.BrokenSeq != 4 || !strings.Contains(res.Reason, "missing: seq 4 was anchored") {
				t.Fatalf("verify after the cut: %+v", res)
			}
			f.append(2, 1) // a new entry 3 where the old one was
			waitProblem(t, p, "no longer has the hash anchored")
		})
	}
}

// A deleted AUDIT stream fails verification, and so does the empty one
// the api declares again when it restarts, until an administrator begins
// a new record; old anchors copied into a recreated stream do not check.
// An api cut off from the primary reads from a standby, but its anchors
// come from the primary: a standby can hold commits the synchronous
// standby never got (in a DC soak an asynchronous standby's entry 478 was
// anchored, then the synchronous standby was promoted without it, and
// every verification after called the chain rewritten). The "standby"
// here is another database whose chain is longer and different, as a
// diverged standby's is.
func TestAnchorsThePrimaryNotAStandby(t *testing.T) {
	eng := storetest.Engines()[1]
	f := newFixture(t, eng)
	standbyDSN := eng.NewDSN(t)
	standby, err := store.Open(t.Context(), standbyDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Close() })
	(&fixture{t: t, db: standby}).append(100, 6)
	if err := f.db.AttachStandby(t.Context(), standbyDSN); err != nil {
		t.Fatal(err)
	}
	p := f.publisher(20*time.Millisecond, true)
	f.waitAnchored(p, 0)
	f.db.UseStandby(true)
	if seq := f.head(); seq != 6 {
		t.Fatalf("reads go to the primary (head %d), not the standby: the test would prove nothing", seq)
	}
	f.append(0, 3)
	sandboxtest.Eventually(t, streamtest.Timeout, "seq 3 anchored", func(context.Context) error {
		rec, err := p.Record(t.Context(), 3)
		if err != nil {
			return err
		}
		if n := len(rec.Anchors); n == 0 || rec.Anchors[n-1].Seq != 3 {
			if problem := p.Problem(); problem != nil {
				return fmt.Errorf("anchors %+v, the publisher's problem: %w", rec.Anchors, problem)
			}
			return fmt.Errorf("anchors %+v", rec.Anchors)
		}
		return nil
	})
	f.db.UseStandby(false)
	if res, err := f.verify(p); err != nil || !res.OK || res.Entries != 3 {
		t.Fatalf("the primary's chain against the record: %+v, %v", res, err)
	}
}

func TestDeletedOrRecreatedStream(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng)
			p := f.publisher(time.Hour, true)
			f.append(0, 3)
			old := f.waitAnchored(p, 3)
			oldMsgs := readMessages(t, f.streams)

			js := f.streams.JetStream()
			if err := js.DeleteStream(t.Context(), stream.AuditStream); err != nil {
				t.Fatal(err)
			}
			_, err := f.record(p)
			wantRecordError(t, err, "the AUDIT stream does not exist")

			// The api restarts: a publisher declares the stream again.
			q := f.publisher(time.Hour, true)
			_, err = f.record(q)
			wantRecordError(t, err, "holds none, but the chain has 3 entries")
			if err := q.Problem(); err == nil || !strings.Contains(err.Error(), "holds no anchor") {
				t.Fatalf("the publisher began a record over an existing chain: %v", err)
			}

			// The attacker copies the old, validly signed anchors in.
			for _, m := range oldMsgs {
				if err := f.streams.Publish(t.Context(), stream.SubjectAuditAnchors, fmt.Sprintf("copy-%d", m.Seq), m.Data); err != nil {
					t.Fatal(err)
				}
			}
			_, err = f.record(q)
			wantRecordError(t, err, "the stream was recreated")
			if err := q.CanRestart(t.Context()); !errors.Is(err, anchor.ErrRecordExists) {
				t.Fatalf("restart over a non-empty stream: %v", err)
			}

			// An administrator removes it and begins a new record.
			if err := js.DeleteStream(t.Context(), stream.AuditStream); err != nil {
				t.Fatal(err)
			}
			if err := f.streams.DeclareAudit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := q.Restart(t.Context(), "admin", "database restored"); err != nil {
				t.Fatal(err)
			}
			rec, err := f.record(q)
			if err != nil || len(rec.Anchors) != 1 || rec.Anchors[0].Restart == nil || rec.Anchors[0].Seq != 3 {
				t.Fatalf("the restarted record: %+v, %v (old %d anchors)", rec.Anchors, err, len(old.Anchors))
			}
			f.append(3, 1)
			f.waitAnchored(q, 4)
			if res, err := f.verify(q); err != nil || !res.OK {
				t.Fatalf("verify after the restart: %+v, %v", res, err)
			}
		})
	}
}

func wantRecordError(t *testing.T, err error, want string) {
	t.Helper()
	var re *audit.RecordError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
		t.Fatalf("record: %v, want a record error with %q", err, want)
	}
}

// readMessages reads the AUDIT stream's messages as an attacker could.
func readMessages(t *testing.T, c *stream.Client) []audit.RecordMessage {
	t.Helper()
	s, err := c.JetStream().Stream(t.Context(), stream.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.RecordMessage
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, audit.RecordMessage{Seq: seq, Data: m.Data})
	}
	return out
}

// After a rotation of the signing key the record goes on under the new
// key, and verifies with the old one trusted.
func TestKeyRotation(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0])
	old := f.publisher(time.Hour, true)
	f.append(0, 2)
	f.waitAnchored(old, 2)

	oldPub := f.key.Public().(ed25519.PublicKey)
	_, newKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := anchor.New(anchor.Config{Store: f.db, Stream: f.streams, Key: newKey, TrustedKeys: []ed25519.PublicKey{oldPub}})
	if err != nil {
		t.Fatal(err)
	}
	f.db.OnAuditCommit(p.Notify) // the old publisher's process is gone
	if err := p.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.append(2, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	rec := f.waitAnchored(p, 3)
	if last := rec.Anchors[len(rec.Anchors)-1]; last.Key != audit.PublicKeyString(newKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("the newest anchor is signed by %s", last.Key)
	}
	// Without the old key trusted, the old anchors do not check.
	keys := audit.NewKeys(newKey.Public().(ed25519.PublicKey))
	_, err = anchor.Read(t.Context(), f.streams, keys, f.head())
	wantRecordError(t, err, "not a trusted key")
}
