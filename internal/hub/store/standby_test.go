package store

import (
	"context"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
)

func testCheckWrites(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	for range 2 {
		if err := s.CheckWrites(ctx, "api-1"); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	mustRead(t, s, func(tx *Tx) error {
		return tx.queryRow(ctx, `SELECT COUNT(*) FROM write_checks WHERE name = 'api-1'`).Scan(&n)
	})
	if n != 1 {
		t.Fatalf("%d rows for one process", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWrites(ctx, "api-1"); err == nil {
		t.Fatal("a closed store takes writes")
	}
}

func testReadInfo(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx, info := WithReadInfo(t.Context())
	before := time.Now().Add(-time.Minute)
	read := func() {
		t.Helper()
		if err := s.Read(ctx, func(tx *Tx) error { _, err := tx.Clusters().List(ctx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if info.Standby || info.AsOf.Before(before) {
		t.Fatalf("a read of the primary: %+v", info)
	}
	// Without a standby attached, UseStandby changes nothing.
	s.UseStandby(true)
	read()
	if info.Standby {
		t.Fatalf("read from a standby that is not there: %+v", info)
	}
}

func testDurableAuditHead(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	mustTx(t, s, func(tx *Tx) error {
		return tx.Audit().Append(ctx, &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable",
			Namespace: "team-a", Name: "r-1", Summary: "submitted", Outcome: "Queued"})
	})
	var wantSeq int64
	var wantHash string
	mustRead(t, s, func(tx *Tx) (err error) {
		wantSeq, wantHash, err = tx.Audit().Head(ctx)
		return err
	})
	seq, hash, err := s.DurableAuditHead(ctx, "audit-anchor")
	if err != nil || seq != wantSeq || hash != wantHash {
		t.Fatalf("durable head %d %s, %v; want %d %s", seq, hash, err, wantSeq, wantHash)
	}
	var n int
	mustRead(t, s, func(tx *Tx) error {
		return tx.queryRow(ctx, `SELECT COUNT(*) FROM write_checks WHERE name = 'audit-anchor'`).Scan(&n)
	})
	if n != 1 {
		t.Fatalf("the head was not made durable by a write of its own: %d rows", n)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.DurableAuditHead(ended, "audit-anchor"); err == nil {
		t.Fatal("a head read under an ended context counts as durable")
	}
}

// A transaction whose client vanished mid-way (its DC lost: the FIN never
// reaches the server) must not hold its row locks for long: the server
// ends the session once it sits idle in its transaction beyond
// idle_in_transaction_session_timeout, which purser sets (15 s) unless
// the DSN does (1 s here).
func testAbandonedTransaction(t *testing.T, eng engine) {
	if eng.name != "postgres" {
		t.Skip("a PostgreSQL session setting")
	}
	ctx := t.Context()
	dsn := eng.newDSN(t)
	s := openDSN(t, dsn)
	var setting string
	mustRead(t, s, func(tx *Tx) error {
		return tx.queryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&setting)
	})
	if setting != "15s" {
		t.Fatalf("idle_in_transaction_session_timeout %q, want purser's 15s", setting)
	}
	held := openDSN(t, dsn+"&idle_in_transaction_session_timeout=1s")
	locked := make(chan struct{})
	wake := make(chan struct{})
	heldErr := make(chan error, 1)
	go func() {
		first := true
		heldErr <- held.Tx(ctx, func(tx *Tx) error {
			if _, err := tx.exec(ctx, `INSERT INTO write_checks (name, checked_at) VALUES ('held', now())
				ON CONFLICT (name) DO UPDATE SET checked_at = excluded.checked_at`); err != nil {
				return classify(err)
			}
			if first {
				first = false
				close(locked)
				<-wake // the client is gone: it sends nothing more
			}
			_, err := tx.exec(ctx, `SELECT 1`)
			return classify(err)
		})
	}()
	<-locked
	start := time.Now()
	if err := s.CheckWrites(ctx, "held"); err != nil {
		t.Fatalf("a write behind the abandoned transaction: %v", err)
	}
	waited := time.Since(start)
	close(wake)
	if err := <-heldErr; err == nil {
		t.Fatal("the abandoned transaction committed after the server ended its session")
	}
	if waited < 500*time.Millisecond || waited > 10*time.Second {
		t.Fatalf("the write behind it waited %s, want about the 1 s timeout", waited)
	}
}
