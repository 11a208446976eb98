package inventory

import (
	"strconv"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestReopenCleanups: a copy of an ended attempt that shows up after its
// removal was done (a create delivered late) sends that attempt's cleanup
// back to Pending; the current attempt's object, one being deleted, and
// an attempt whose old copy is kept (no cleanup) change nothing.
func TestReopenCleanups(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			s, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ended := time.Now().Add(-time.Minute)
			attempts := []*store.Attempt{
				{RunnableUID: "r1", Number: 1, Cluster: "a", StartedAt: ended, EndedAt: &ended, Result: "Evicted", Cleanup: store.CleanupDone},
				{RunnableUID: "r1", Number: 2, Cluster: "b", StartedAt: ended},
				{RunnableUID: "r2", Number: 1, Cluster: "a", StartedAt: ended, EndedAt: &ended, Result: "Evicted", Cleanup: store.CleanupDone},
				{RunnableUID: "r3", Number: 1, Cluster: "a", StartedAt: ended, EndedAt: &ended, Result: "Evicted"}, // purge mode Never
			}
			if err := s.Tx(ctx, func(tx *store.Tx) error {
				for _, uid := range []string{"r1", "r2", "r3"} {
					if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: "ns", Name: uid, UID: uid, Spec: []byte(`{}`), Phase: "Running"}); err != nil {
						return err
					}
				}
				for _, a := range attempts {
					if err := tx.Attempts().Put(ctx, a); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			row := func(uid, attempt, cluster string, object string) store.InventoryRow {
				return store.InventoryRow{Cluster: cluster, APIVersion: "batch/v1", Kind: "Job", Namespace: "ns", Name: uid, UID: uid + "-" + cluster,
					Labels: map[string]string{v1alpha1.LabelRunnableUID: uid, v1alpha1.LabelAttempt: attempt}, Object: []byte(object)}
			}
			rows := []store.InventoryRow{
				row("r1", "1", "a", `{"metadata":{}}`), // the late copy
				row("r1", "2", "b", `{"metadata":{}}`), // the current attempt's
				row("r2", "1", "a", `{"metadata":{"deletionTimestamp":"2026-12-01T00:00:00Z"}}`),
				row("r3", "1", "a", `{"metadata":{}}`),
			}
			if err := s.Tx(ctx, func(tx *store.Tx) error { return reopenCleanups(ctx, tx, eventBatch{}, rows) }); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"r1/1": store.CleanupPending, "r1/2": "", "r2/1": store.CleanupDone, "r3/1": ""}
			if err := s.Read(ctx, func(tx *store.Tx) error {
				for _, uid := range []string{"r1", "r2", "r3"} {
					as, err := tx.Attempts().List(ctx, uid)
					if err != nil {
						return err
					}
					for _, a := range as {
						key := uid + "/" + strconv.Itoa(a.Number)
						if a.Cleanup != want[key] {
							t.Errorf("attempt %s: cleanup %q, want %q", key, a.Cleanup, want[key])
						}
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
