package store

import (
	"fmt"
	"testing"

	"github.com/purser-io/purser/internal/hub/audit"
)

// TestBulkPrepared: on SQLite a full chunk's statements are prepared
// after the first transaction that ran them, and the next transactions
// run them prepared with the same outcome: rows created, a name taken
// answered as not created, the audit chain whole. On PostgreSQL nothing
// is kept (its driver keeps its own).
func TestBulkPrepared(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			chunk := func(round int) []*Runnable {
				recs := make([]*Runnable, bulkRows)
				for i := range recs {
					// Round 2 takes round 1's names again on its even rows.
					name := fmt.Sprintf("r-%d-%04d", round, i)
					if round == 2 && i%2 == 0 {
						name = fmt.Sprintf("r-1-%04d", i)
					}
					recs[i] = &Runnable{UID: fmt.Sprintf("u-%d-%04d", round, i), Namespace: "a", Name: name, Generation: 1, Spec: []byte(`{}`), SpecHash: "h", Phase: "Queued", Submitter: "alice"}
				}
				return recs
			}
			var created [4][]bool
			for round := 1; round <= 3; round++ {
				mustTx(t, s, func(tx *Tx) error {
					var err error
					if created[round], err = tx.Runnables().CreateMany(ctx, chunk(round)); err != nil {
						return err
					}
					entries := make([]*audit.Entry, bulkRows)
					msgs := make([]*OutboxMessage, bulkRows)
					for i := range entries {
						entries[i] = &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable", Namespace: "a", Name: fmt.Sprint("r-", round, i), Summary: "s", Outcome: "Queued"}
						msgs[i] = &OutboxMessage{Subject: "s", MsgID: fmt.Sprint("m-", round, i)}
					}
					if err := tx.Outbox().EnqueueMany(ctx, msgs); err != nil {
						return err
					}
					return tx.Audit().AppendMany(ctx, entries)
				})
			}
			kept := len(s.bulk.stmts)
			if eng.name == EngineSQLite && kept != 3 {
				t.Errorf("%d statements kept prepared, want 3 (runnables, outbox, audit of a full chunk)", kept)
			}
			if eng.name == EnginePostgres && kept != 0 {
				t.Errorf("%d statements kept prepared on PostgreSQL, want none", kept)
			}
			if n := count(created[1], true); n != bulkRows {
				t.Errorf("round 1 created %d of %d", n, bulkRows)
			}
			if n := count(created[2], true); n != bulkRows/2 || created[2][0] || !created[2][1] {
				t.Errorf("round 2, run prepared, created %d, want %d (its even rows' names are taken)", n, bulkRows/2)
			}
			if n := count(created[3], true); n != bulkRows {
				t.Errorf("round 3 created %d of %d", n, bulkRows)
			}
			var names int
			mustRead(t, s, func(tx *Tx) error {
				got, err := tx.Runnables().ListByNamePrefixes(ctx, "a", []string{"r-"}, 10*bulkRows)
				names = len(got)
				return err
			})
			if names != 2*bulkRows+bulkRows/2 {
				t.Errorf("%d runnables stored, want %d", names, 2*bulkRows+bulkRows/2)
			}
			if pending, err := s.PendingOutbox(ctx, 1000); err != nil || len(pending) != 1000 {
				t.Errorf("outbox: %d messages (of the first 1,000 asked), %v", len(pending), err)
			}
			if res, err := s.VerifyAudit(ctx); err != nil || !res.OK || res.Entries != 3*bulkRows {
				t.Errorf("audit chain after three chunks: %+v, %v", res, err)
			}
		})
	}
}

func count(v []bool, want bool) int {
	n := 0
	for _, b := range v {
		if b == want {
			n++
		}
	}
	return n
}
