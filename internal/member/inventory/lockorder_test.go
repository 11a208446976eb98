package inventory

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestBatchesTakeTheirClustersInOneOrder: a batch of events waiting for a
// cluster another writer holds must hold no other cluster meanwhile. A
// batch that stores records of cluster b and deletes records of cluster a
// waits for a without holding b, so the holder of a can take b and finish:
// on PostgreSQL, two batches crossing like this used to hold one cluster
// each and wait for the other's (a deadlock, rolled back and retried).
func TestBatchesTakeTheirClustersInOneOrder(t *testing.T) {
	dsn := storetest.NewPostgresDatabase(t)
	ctx := t.Context()
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()

	// Another transaction holds cluster a's lock (as a writer of a's
	// inventory does until it commits).
	holder, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close() }()
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('purser.inventory'), hashtext('a'))`); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	batch := eventBatch{
		rows:      []store.InventoryRow{{Cluster: "b", APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "x", UID: "u-b", ResourceVersion: "5", ObservedAt: now}},
		tombs:     []store.InventoryTombstone{{Cluster: "a", UID: "u-a", ResourceVersion: "7", DeletedAt: now}},
		lastEvent: map[string]time.Time{"a": now, "b": now},
	}
	batchDone := make(chan error, 1)
	go func() {
		batchDone <- s.Tx(ctx, func(tx *store.Tx) error {
			_, err := storeEvents(ctx, tx, batch)
			return err
		})
	}()

	// Once the batch waits for a lock, cluster b must still be free.
	sandboxtest.Eventually(t, 30*time.Second, "the batch waiting for cluster a", func(ctx context.Context) error {
		var waiting int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return errors.New("no advisory lock waited for yet")
		}
		return nil
	})
	var gotB bool
	if err := raw.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext('purser.inventory'), hashtext('b'))`).Scan(&gotB); err != nil {
		t.Fatal(err)
	}
	if !gotB {
		t.Fatal("the batch holds cluster b while it waits for cluster a: two ingesters with crossing batches deadlock")
	}
	if _, err := raw.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext('purser.inventory'), hashtext('b'))`); err != nil {
		t.Fatal(err)
	}

	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext('purser.inventory'), hashtext('a'))`); err != nil {
		t.Fatal(err)
	}
	if err := <-batchDone; err != nil {
		t.Fatalf("the batch, once a was released: %v", err)
	}
	var stored int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM inventory WHERE cluster = 'b' AND uid = 'u-b'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 1 {
		t.Fatalf("cluster b's record stored %d times, want 1", stored)
	}
}
