package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/audit"
	"github.com/purser-io/purser/internal/health"
	"github.com/purser-io/purser/internal/store"
)

// observeRunnables carries what the inventory sees of the objects purser
// created onto their runnables, in the same transaction: the phase moves
// forward (Submitted, Running, then Succeeded or Failed), the health and
// the object's last status are kept, and the end of an attempt is
// recorded and audited. An object of an older attempt, or of a runnable
// that already ended (cancelled, failed over), changes nothing.
func observeRunnables(ctx context.Context, tx *store.Tx, rows []store.InventoryRow) error {
	for i := range rows {
		row := &rows[i]
		uid := row.Labels[v1alpha1.LabelRunnableUID]
		if uid == "" {
			continue
		}
		if err := observeRunnable(ctx, tx, uid, row); err != nil {
			return err
		}
	}
	return nil
}

func observeRunnable(ctx context.Context, tx *store.Tx, uid string, row *store.InventoryRow) error {
	rn, err := tx.GetRunnableByUID(ctx, uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil // a runnable purged since; the inventory row still tells
	}
	if err != nil {
		return err
	}
	current := v1alpha1.Phase(rn.Phase)
	settling := false
	switch current {
	case v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning:
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		// The object goes on settling after the verdict: a Job reports
		// SuccessCriteriaMet before its pod counts are final and Complete
		// after. Its status keeps following the object that ended it.
		settling = true
	default:
		return nil
	}
	attempts, err := tx.ListAttempts(ctx, uid)
	if err != nil || len(attempts) == 0 {
		return err
	}
	last := attempts[len(attempts)-1]
	if n, err := strconv.Atoi(row.Labels[v1alpha1.LabelAttempt]); err != nil || n != last.Number || row.Cluster != last.Cluster {
		return nil // an earlier attempt's object
	}
	if ok, err := isStored(ctx, tx, row); err != nil || !ok {
		return err
	}
	if settling {
		return settle(ctx, tx, rn, row)
	}

	next := current
	switch row.Phase {
	case health.PhaseRunning:
		next = v1alpha1.PhaseRunning
	case health.PhaseSucceeded:
		next = v1alpha1.PhaseSucceeded
	case health.PhaseFailed:
		next = v1alpha1.PhaseFailed
	}
	if current == v1alpha1.PhaseRunning && next == v1alpha1.PhaseSubmitted {
		next = current // never backwards
	}

	var st v1alpha1.RunnableStatus
	if len(rn.Status) > 0 {
		if err := json.Unmarshal(rn.Status, &st); err != nil {
			return fmt.Errorf("runnable %s status: %w", uid, err)
		}
	}
	result, fenced := objectStatus(row.Object)
	if next == current && string(st.Health) == row.Health && equalJSON(st.Result, result) && st.Fenced == fenced {
		return nil
	}
	st.Health = v1alpha1.Health(row.Health)
	st.Fenced = fenced
	switch {
	case st.Health != v1alpha1.HealthUnhealthy:
		st.UnhealthySince = nil
	case st.UnhealthySince == nil:
		since := row.ObservedAt
		st.UnhealthySince = &since
	}
	if result != nil {
		st.Result = result
	}
	kind := row.Kind + " " + row.Namespace + "/" + row.Name
	switch next {
	case v1alpha1.PhaseRunning:
		st.Message = kind + " is running on " + row.Cluster
	case v1alpha1.PhaseSucceeded:
		st.Message = kind + " succeeded on " + row.Cluster
	case v1alpha1.PhaseFailed:
		st.Message = kind + " failed on " + row.Cluster
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rn.Phase, rn.Status = string(next), data
	if err := tx.UpdateRunnable(ctx, rn); err != nil {
		return err
	}
	if !next.Terminal() {
		return nil
	}
	ended := row.ObservedAt
	last.EndedAt, last.Result = &ended, string(next)
	if err := tx.PutAttempt(ctx, last); err != nil {
		return err
	}
	// The audit entry is appended last: it holds the chain until commit.
	return tx.AppendAudit(ctx, &audit.Entry{
		Actor: "ingester", Action: "observe", Kind: v1alpha1.KindRunnable, Namespace: rn.Namespace, Name: rn.Name,
		Summary: fmt.Sprintf("%s (attempt %d)", st.Message, last.Number), Outcome: string(next),
	})
}

// settle keeps the result of an ended runnable up to date with the
// object that ended it, as long as that object still says the same
// verdict. The phase, the attempt and the audit log are not touched: the
// runnable's end was recorded when it was first seen.
func settle(ctx context.Context, tx *store.Tx, rn *store.Runnable, row *store.InventoryRow) error {
	if string(verdict(row.Phase)) != rn.Phase {
		return nil
	}
	var st v1alpha1.RunnableStatus
	if len(rn.Status) > 0 {
		if err := json.Unmarshal(rn.Status, &st); err != nil {
			return fmt.Errorf("runnable %s status: %w", rn.UID, err)
		}
	}
	result, _ := objectStatus(row.Object)
	if result == nil || equalJSON(st.Result, result) {
		return nil
	}
	st.Result = result
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rn.Status = data
	return tx.UpdateRunnable(ctx, rn)
}

// verdict is the runnable phase an interpreted object phase ends in, or
// "" when it does not end it.
func verdict(phase string) v1alpha1.Phase {
	switch phase {
	case health.PhaseSucceeded:
		return v1alpha1.PhaseSucceeded
	case health.PhaseFailed:
		return v1alpha1.PhaseFailed
	}
	return ""
}

// isStored reports whether row is the state the inventory now holds for
// its object. UpsertInventory skips a row older than the stored record
// (or its tombstone), as a batch handed back for redelivery brings after
// a newer one was applied; such a row must not move the runnable back
// either, or a runnable already seen Healthy would turn Unhealthy again
// from a stale observation, and stay so (nothing newer comes while the
// object does not change) until application failover moves it.
func isStored(ctx context.Context, tx *store.Tx, row *store.InventoryRow) (bool, error) {
	rows, _, err := tx.ListInventory(ctx, store.InventoryFilter{Cluster: row.Cluster, Kind: row.Kind,
		Namespace: row.Namespace, Name: row.Name, WithoutObject: true, Limit: 10})
	if err != nil {
		return false, err
	}
	for _, r := range rows {
		if r.UID == row.UID {
			return r.ResourceVersion == row.ResourceVersion, nil
		}
	}
	return false, nil
}

// objectStatus is the status of an object as the agent sent it, and
// whether its agent fenced it.
func objectStatus(object []byte) (map[string]any, bool) {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	if len(object) == 0 || json.Unmarshal(object, &obj) != nil {
		return nil, false
	}
	_, fenced := obj.Metadata.Annotations[v1alpha1.AnnotationFenced]
	return obj.Status, fenced
}

func equalJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
