package store

import (
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
)

// TestDeferAudit: a transaction that defers its audit entries appends
// them at its end. On PostgreSQL another writer of the chain is not held
// up meanwhile (without DeferAudit it would wait for the first's commit):
// its entry comes first in the chain, the deferred one after, the chain
// whole.
func TestDeferAudit(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			entry := func(name string) *audit.Entry {
				return &audit.Entry{Actor: "alice", Action: "create", Kind: "Runnable", Namespace: "a", Name: name, Summary: "s", Outcome: "Queued"}
			}
			deferred, other := entry("deferred"), entry("other")
			if eng.name == EnginePostgres {
				appended, othersDone := make(chan struct{}), make(chan error, 1)
				firstDone := make(chan error, 1)
				go func() {
					firstDone <- s.Tx(ctx, func(tx *Tx) error {
						tx.DeferAudit()
						if err := tx.Audit().Append(ctx, deferred); err != nil {
							return err
						}
						close(appended)
						select { // the rest of the transaction, while another appends
						case err := <-othersDone:
							othersDone <- err
						case <-time.After(5 * time.Second):
						}
						return nil
					})
				}()
				<-appended
				othersDone <- s.Tx(ctx, func(tx *Tx) error { return tx.Audit().Append(ctx, other) })
				if err := <-firstDone; err != nil {
					t.Fatal(err)
				}
				if err := <-othersDone; err != nil {
					t.Fatal(err)
				}
				if other.Seq == 0 || deferred.Seq <= other.Seq {
					t.Errorf("seq of the other %d, of the deferred %d: want the deferred appended at its commit, after the other", other.Seq, deferred.Seq)
				}
			} else {
				mustTx(t, s, func(tx *Tx) error {
					tx.DeferAudit()
					if err := tx.Audit().Append(ctx, deferred); err != nil {
						return err
					}
					if deferred.Seq != 0 {
						t.Errorf("seq %d given at Append, want at the end", deferred.Seq)
					}
					return nil
				})
				if deferred.Seq == 0 {
					t.Errorf("the deferred entry was not appended")
				}
			}
			if res, err := s.VerifyAudit(ctx); err != nil || !res.OK {
				t.Errorf("audit chain: %+v, %v", res, err)
			}
		})
	}
}
