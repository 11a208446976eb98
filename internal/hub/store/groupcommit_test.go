package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/purser-io/purser/internal/hub/audit"
)

// testGroupCommit: many concurrent audited changes through a
// GroupCommit, of which some fail (an error of their own after writing,
// or a unique key taken by another): each caller gets its own outcome,
// the failed ones left no row and no audit entry, and the chain holds
// exactly the others' entries and verifies.
func testGroupCommit(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Create(ctx, &Cluster{Name: "taken", Spec: []byte(`{}`)}) })
	g := NewGroupCommit(s, 2, 8)
	defer g.Close()
	errOwn := errors.New("refused by the caller")
	const n = 60
	results := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = g.Tx(ctx, func(tx *Tx) error {
				name := fmt.Sprintf("c-%02d", i)
				if i%10 == 7 {
					name = "taken" // a unique key another holds
				}
				if err := tx.Clusters().Create(ctx, &Cluster{Name: name, Spec: []byte(`{}`)}); err != nil {
					return err
				}
				if err := tx.Audit().Append(ctx, &audit.Entry{Actor: "test", Action: "create", Kind: "Cluster", Name: name}); err != nil {
					return err
				}
				if i%10 == 3 {
					return errOwn // after writing: its row and entry must go
				}
				return nil
			})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range results {
		switch {
		case i%10 == 7:
			if !errors.Is(err, ErrConflict) {
				t.Errorf("transaction %d: %v, want a conflict", i, err)
			}
		case i%10 == 3:
			if !errors.Is(err, errOwn) {
				t.Errorf("transaction %d: %v, want its own error", i, err)
			}
		case err != nil:
			t.Errorf("transaction %d: %v", i, err)
		default:
			ok++
		}
	}
	var clusters []*Cluster
	var entries []*audit.Entry
	mustRead(t, s, func(tx *Tx) (err error) {
		if clusters, err = tx.Clusters().List(ctx); err != nil {
			return err
		}
		entries, err = tx.Audit().List(ctx, AuditFilter{Actor: "test", Limit: 1000})
		return err
	})
	if len(clusters) != ok+1 || len(entries) != ok {
		t.Errorf("%d committed: %d clusters (with the taken one), %d audit entries", ok, len(clusters), len(entries))
	}
	for _, e := range entries {
		var i int
		if _, err := fmt.Sscanf(e.Name, "c-%d", &i); err != nil {
			t.Fatalf("audit entry %q: %v", e.Name, err)
		}
		if i%10 == 3 || i%10 == 7 {
			t.Errorf("audit entry of a failed transaction: %+v", e)
		}
	}
	res, err := s.VerifyAudit(ctx)
	if err != nil || !res.OK || res.Entries != int64(ok) {
		t.Errorf("chain after group commits: %+v, %v", res, err)
	}
	// A caller whose context ended before its group started is left out.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.Tx(cctx, func(tx *Tx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller: %v", err)
	}
}
