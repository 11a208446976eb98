package store

import (
	"testing"
	"time"
)

// TestCapacityReports: the latest report per cluster wins whatever the
// order, and the placements since a time are those an agent may not have
// counted.
func TestCapacityReports(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.open(t)
			ctx := t.Context()
			t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
			t1 := t0.Add(10 * time.Second)
			mustTx(t, s, func(tx *Tx) error { return tx.Agents().RecordCapacity(ctx, "dc1", t1, []byte(`{"free":{"cpu":"8"}}`)) })
			mustTx(t, s, func(tx *Tx) error { return tx.Agents().RecordCapacity(ctx, "dc1", t0, []byte(`{"late":true}`)) })
			mustTx(t, s, func(tx *Tx) error { return tx.Agents().RecordHeartbeat(ctx, "dc1", t1, nil, false) })
			var got map[string]CapacityReport
			mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Agents().Capacities(ctx); return })
			if r := got["dc1"]; string(r.Report) != `{"free":{"cpu":"8"}}` || !r.At.Equal(t1) || len(got) != 1 {
				t.Fatalf("capacities %+v: want dc1's report of %s", got, t1)
			}

			old, submitted, ended := newRunnable("a", "old"), newRunnable("a", "submitted"), newRunnable("a", "ended")
			for _, r := range []*Runnable{old, submitted, ended} {
				r.Phase, r.Cluster, r.Status = "Running", "dc1", []byte(`{"requests":{"cpu":"2"}}`)
			}
			submitted.Phase, ended.Phase = "Submitted", "Succeeded"
			mustTx(t, s, func(tx *Tx) error {
				for _, r := range []*Runnable{old, submitted, ended} {
					if err := tx.Runnables().Create(ctx, r); err != nil {
						return err
					}
					if err := tx.Attempts().Put(ctx, &Attempt{RunnableUID: r.UID, Number: 1, Cluster: "dc1", StartedAt: t0}); err != nil {
						return err
					}
				}
				return nil
			})
			var placed []Placed
			mustRead(t, s, func(tx *Tx) (err error) {
				placed, err = tx.Runnables().ListPlaced(ctx, time.Now().Add(time.Hour))
				return
			})
			if len(placed) != 1 || placed[0].UID != submitted.UID || placed[0].Cluster != "dc1" || string(placed[0].Status) != `{"requests":{"cpu":"2"}}` {
				t.Fatalf("placed %+v, want only %s", placed, submitted.UID)
			}
			mustRead(t, s, func(tx *Tx) (err error) {
				placed, err = tx.Runnables().ListPlaced(ctx, time.Now().Add(-time.Hour))
				return
			})
			if len(placed) != 2 {
				t.Fatalf("placed %+v, want the submitted one and the one running since", placed)
			}
		})
	}
}
