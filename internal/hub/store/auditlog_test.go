package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

func appendEntries(t *testing.T, s *Store, n int) []*audit.Entry {
	t.Helper()
	out := make([]*audit.Entry, 0, n)
	mustTx(t, s, func(tx *Tx) error {
		out = out[:0]
		for i := range n {
			e := &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable", Namespace: "team-a",
				Name: fmt.Sprintf("r-%d", i), Summary: "submitted", Outcome: "Success"}
			if err := tx.Audit().Append(t.Context(), e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out
}

// 20 concurrent API-like transactions each record a change and its audit
// entry; the entries must form one linear chain with no gaps or forks.
func testAuditConcurrentChain(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	const workers, perWorker = 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				r := newRunnable(fmt.Sprintf("ns-%d", w), fmt.Sprintf("r-%d", i))
				errs <- s.Tx(ctx, func(tx *Tx) error {
					if err := tx.Runnables().Create(ctx, r); err != nil {
						return err
					}
					return tx.Audit().Append(ctx, &audit.Entry{Actor: "u", Action: "create", Kind: "Runnable",
						Namespace: r.Namespace, Name: r.Name, Summary: "submitted", Outcome: "Success",
						Details: json.RawMessage(`{"uid":"` + r.UID + `"}`)})
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Tx: %v", err)
		}
	}

	var entries []*audit.Entry
	mustRead(t, s, func(tx *Tx) error {
		var err error
		entries, err = tx.Audit().List(ctx, AuditFilter{Limit: 1000})
		if err != nil {
			return err
		}
		// Every entry describes a change that was committed with it.
		for _, e := range entries {
			if _, err := tx.Runnables().Get(ctx, e.Namespace, e.Name); err != nil {
				t.Errorf("seq %d records %s/%s, which is not there: %v", e.Seq, e.Namespace, e.Name, err)
			}
		}
		return nil
	})
	if len(entries) != workers*perWorker {
		t.Fatalf("%d entries, want %d", len(entries), workers*perWorker)
	}
	prev := audit.GenesisHash
	for i, e := range entries {
		if e.Seq != int64(i+1) || e.PrevHash != prev {
			t.Fatalf("entry %d: seq %d prevHash %q, want seq %d prevHash %q", i, e.Seq, e.PrevHash, i+1, prev)
		}
		prev = e.Hash
	}
	res, err := s.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (VerifyResult{Entries: workers * perWorker, OK: true}); res != want {
		t.Fatalf("VerifyAudit = %+v, want %+v", res, want)
	}
}

// Direct SQL edits, deletions and truncations are reported at the right seq.
func testAuditTampering(t *testing.T, eng engine) {
	for _, tc := range []struct {
		name   string
		tamper string
		want   VerifyResult
	}{
		{"summary edited", `UPDATE audit_log SET summary = 'nothing happened' WHERE seq = 4`,
			VerifyResult{Entries: 3, BrokenSeq: 4, Reason: "hash mismatch"}},
		{"actor edited", `UPDATE audit_log SET actor = 'mallory' WHERE seq = 1`,
			VerifyResult{Entries: 0, BrokenSeq: 1, Reason: "hash mismatch"}},
		{"time edited", `UPDATE audit_log SET logged_at = (SELECT logged_at FROM audit_log WHERE seq = 1) WHERE seq = 6`,
			VerifyResult{Entries: 5, BrokenSeq: 6, Reason: "hash mismatch"}},
		{"row rewritten with its hash recomputed elsewhere", `UPDATE audit_log SET hash = 'forged' WHERE seq = 5`,
			VerifyResult{Entries: 4, BrokenSeq: 5, Reason: "hash mismatch"}},
		{"row deleted", `DELETE FROM audit_log WHERE seq = 7`,
			VerifyResult{Entries: 6, BrokenSeq: 8, Reason: "seq gap: expected 7, got 8"}},
		{"tail cut off", `DELETE FROM audit_log WHERE seq >= 9`,
			VerifyResult{Entries: 8, BrokenSeq: 9, Reason: "missing: the log ends at seq 8 but the head records seq 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := eng.open(t)
			appendEntries(t, s, 10)
			if res, err := s.VerifyAudit(t.Context()); err != nil || !res.OK || res.Entries != 10 {
				t.Fatalf("before tampering: %+v, %v", res, err)
			}
			rawExec(t, s, tc.tamper)
			res, err := s.VerifyAudit(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res != tc.want {
				t.Fatalf("VerifyAudit = %+v, want %+v", res, tc.want)
			}
		})
	}
}

// Whoever can write the database can forge a chain that verifies on its
// own: rewrite a tail with recomputed hashes, or cut it off and move the
// head back. Anchors published before catch both.
func testAuditAnchored(t *testing.T, eng engine) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		forge  func(t *testing.T, dsn string, s *Store, entries []*audit.Entry)
		reason string
		broken int64
	}{
		{"tail rewritten with recomputed hashes", func(t *testing.T, dsn string, _ *Store, entries []*audit.Entry) {
			storetest.ForgeAuditTail(t, dsn, entries, 6)
		}, "rewritten: the hash differs from the anchor published at 2026-11-29T12:00:00Z", 10},
		{"tail cut off and the head moved back", func(t *testing.T, _ string, s *Store, entries []*audit.Entry) {
			rawExec(t, s, `DELETE FROM audit_log WHERE seq > 8`)
			rawExec(t, s, `UPDATE audit_head SET last_seq = 8, last_hash = ? WHERE id = 1`, entries[7].Hash)
		}, "missing: seq 10 was anchored at 2026-11-29T12:00:00Z, but the log ends at seq 8 (entries removed, or the database restored from an older backup)", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := eng.newDSN(t)
			s := openDSN(t, dsn)
			entries := appendEntries(t, s, 10)
			anchors := []audit.Anchor{{Seq: 3, Hash: entries[2].Hash, PublishedAt: at}, {Seq: 10, Hash: entries[9].Hash, PublishedAt: at}}
			if res, err := s.VerifyAuditAnchored(t.Context(), anchors); err != nil || res != (VerifyResult{Entries: 10, OK: true, Anchors: 2}) {
				t.Fatalf("before the forgery: %+v, %v", res, err)
			}
			tc.forge(t, dsn, s, entries)
			if res, err := s.VerifyAudit(t.Context()); err != nil || !res.OK {
				t.Fatalf("the forgery does not verify on its own: %+v, %v", res, err)
			}
			res, err := s.VerifyAuditAnchored(t.Context(), anchors)
			if err != nil {
				t.Fatal(err)
			}
			want := VerifyResult{Entries: tc.broken - 1, BrokenSeq: tc.broken, Reason: tc.reason, Anchors: 2}
			if res != want {
				t.Fatalf("VerifyAuditAnchored = %+v, want %+v", res, want)
			}
		})
	}
}

// VerifyAudit reads in batches of 1000; breaks on either side of a batch
// boundary are still found.
func testAuditManyBatches(t *testing.T, eng engine) {
	s := eng.open(t)
	appendEntries(t, s, 2500)
	res, err := s.VerifyAudit(t.Context())
	if err != nil || res != (VerifyResult{Entries: 2500, OK: true}) {
		t.Fatalf("VerifyAudit = %+v, %v", res, err)
	}
	rawExec(t, s, `UPDATE audit_log SET name = 'x' WHERE seq = 2001`)
	res, err = s.VerifyAudit(t.Context())
	if err != nil || res != (VerifyResult{Entries: 2000, BrokenSeq: 2001, Reason: "hash mismatch"}) {
		t.Fatalf("VerifyAudit = %+v, %v", res, err)
	}
	// An empty log verifies.
	empty := eng.open(t)
	res, err = empty.VerifyAudit(t.Context())
	if err != nil || res != (VerifyResult{OK: true}) {
		t.Fatalf("empty log: VerifyAudit = %+v, %v", res, err)
	}
}

func testListAudit(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	specs := []audit.Entry{
		{Time: t0, Actor: "alice", Action: "create", Kind: "Runnable", Namespace: "a", Name: "x"},
		{Time: t0.Add(time.Hour), Actor: "bob", Action: "approve", Kind: "Runnable", Namespace: "a", Name: "x"},
		{Time: t0.Add(2 * time.Hour), Actor: "alice", Action: "create", Kind: "Deployable", Namespace: "a", Name: "x"},
		{Time: t0.Add(3 * time.Hour), Actor: "alice", Action: "delete", Kind: "Runnable", Namespace: "b", Name: "y"},
		// Sub-microsecond digits are dropped before hashing and storing.
		{Time: t0.Add(4*time.Hour + 999), Actor: "system", Action: "failover", Kind: "Runnable", Namespace: "a", Name: "x",
			Details: json.RawMessage(`{"from":"dc1","to":"dc2"}`)},
	}
	mustTx(t, s, func(tx *Tx) error {
		for i := range specs {
			e := specs[i]
			if err := tx.Audit().Append(ctx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	seqs := func(f AuditFilter) string {
		var got []string
		mustRead(t, s, func(tx *Tx) error {
			entries, err := tx.Audit().List(ctx, f)
			for _, e := range entries {
				got = append(got, fmt.Sprint(e.Seq))
			}
			return err
		})
		return strings.Join(got, ",")
	}
	for _, tc := range []struct {
		f    AuditFilter
		want string
	}{
		{AuditFilter{}, "1,2,3,4,5"},
		{AuditFilter{Namespace: "a", Kind: "Runnable", Name: "x"}, "1,2,5"},
		{AuditFilter{Actor: "alice"}, "1,3,4"},
		{AuditFilter{Action: "create"}, "1,3"},
		{AuditFilter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, "2,3"},
		{AuditFilter{Since: t0.Add(4 * time.Hour)}, "5"},
		{AuditFilter{AfterSeq: 2, Limit: 2}, "3,4"},
		{AuditFilter{Kind: "Cluster"}, ""},
		{AuditFilter{Newest: true}, "5,4,3,2,1"},
		{AuditFilter{Newest: true, Limit: 2}, "5,4"},
		{AuditFilter{Newest: true, BeforeSeq: 4, Limit: 2}, "3,2"},
		{AuditFilter{Newest: true, Actor: "alice"}, "4,3,1"},
	} {
		if got := seqs(tc.f); got != tc.want {
			t.Errorf("AuditLog.List(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	mustRead(t, s, func(tx *Tx) error {
		entries, err := tx.Audit().List(ctx, AuditFilter{AfterSeq: 4})
		if err != nil {
			return err
		}
		e := entries[0]
		if e.Time != t0.Add(4*time.Hour) || string(e.Details) != `{"from":"dc1","to":"dc2"}` || e.Hash != audit.ComputeHash(*e) {
			t.Errorf("stored entry does not round-trip: %+v", e)
		}
		return nil
	})
}

// With a MAC set, every appended entry carries one that checks, in
// groups too; the chain verifies; an entry whose MAC is changed, or
// removed after the first with one, does not.
func testAuditMACs(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	appendEntries(t, s, 2) // an older purser's: no MAC
	m := audit.NewMAC([]byte("writers' key"))
	s.SetAuditMAC(m)
	signed := appendEntries(t, s, 3)
	for _, e := range signed {
		if !m.Check(e.Hash, e.MAC) {
			t.Fatalf("entry %d: MAC %q does not check", e.Seq, e.MAC)
		}
	}
	res, err := s.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || !res.MACsChecked || res.Unsigned != 2 || res.Entries != 5 {
		t.Fatalf("verify: %+v, want ok with MACs checked and the 2 older entries unsigned", res)
	}
	if _, err := s.CheckAuditAppended(ctx, 2, signed[0].PrevHash, 5, 0); err != nil {
		t.Fatalf("the signed entries do not check: %v", err)
	}
	rawExec(t, s, "UPDATE audit_log SET mac = NULL WHERE seq = ?", 4)
	res, err = s.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.BrokenSeq != 4 || !strings.Contains(res.Reason, "unsigned") {
		t.Fatalf("verify with entry 4's MAC removed: %+v", res)
	}
	if _, err := s.CheckAuditAppended(ctx, 3, signed[0].Hash, 5, 3); err == nil {
		t.Fatal("the publisher's check passed an unsigned entry after MACs began")
	}
}
