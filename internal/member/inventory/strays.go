package inventory

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// reopenCleanups is the events' step for an object of an ended attempt
// whose removal was done and that shows up again. A create that was in
// flight when its attempt ended can land after the controller removed
// what was there (delivered late, once a partition healed); that copy
// must not run beside the next attempt's (no work runs twice, at most one
// live attempt). Its attempt's cleanup goes back to Pending, and the
// controller removes it as it removed the first (labels and uid checked):
// a level, not an event, is what decides, as everywhere else. It runs in
// the transaction that stores the object, for the reason moveRunnables
// does: the stored rows are handed to it only once. Objects being
// deleted, and attempts whose purge mode keeps the old copy (no cleanup),
// are left alone.
func reopenCleanups(ctx context.Context, tx *store.Tx, _ eventBatch, rows []store.InventoryRow) error {
	for i := range rows {
		row := &rows[i]
		uid := row.Labels[v1alpha1.LabelRunnableUID]
		number, err := strconv.Atoi(row.Labels[v1alpha1.LabelAttempt])
		if uid == "" || err != nil || beingDeleted(row.Object) {
			continue
		}
		attempts, err := tx.Attempts().List(ctx, uid)
		if err != nil {
			return err
		}
		for _, a := range attempts {
			if a.Number != number || a.Cluster != row.Cluster || a.EndedAt == nil || a.Cleanup != store.CleanupDone {
				continue
			}
			a.Cleanup, a.CleanupAfter = store.CleanupPending, nil
			if err := tx.Attempts().Put(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// beingDeleted reports whether a stored object carries a
// deletionTimestamp.
func beingDeleted(object []byte) bool {
	var o struct {
		Metadata struct {
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	return len(object) > 0 && json.Unmarshal(object, &o) == nil && o.Metadata.DeletionTimestamp != nil
}
