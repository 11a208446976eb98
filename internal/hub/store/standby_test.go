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
