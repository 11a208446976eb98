package store

import (
	"testing"
	"time"
)

func testClusterViews(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	mustTx(t, s, func(tx *Tx) error {
		return tx.Clusters().RecordViews(ctx, "dc-1", []ViewRecord{
			{Cluster: "a", Outcome: "ok"},
			{Cluster: "b", Outcome: "unreachable", Detail: "connection refused", Failing: true, FailingFor: 90 * time.Second},
		})
	})
	mustTx(t, s, func(tx *Tx) error {
		return tx.Clusters().RecordViews(ctx, "dc-2", []ViewRecord{{Cluster: "b", Outcome: "ok"}})
	})
	// A second write of the same observer replaces its view.
	mustTx(t, s, func(tx *Tx) error {
		return tx.Clusters().RecordViews(ctx, "dc-1", []ViewRecord{{Cluster: "a", Outcome: "not-ready", Detail: "500", Failing: true}})
	})
	var views []ClusterView
	var now time.Time
	mustRead(t, s, func(tx *Tx) (err error) { views, now, err = tx.Clusters().ListViews(ctx); return })
	if len(views) != 3 {
		t.Fatalf("views %+v", views)
	}
	a1, b1, b2 := views[0], views[1], views[2]
	if a1.Cluster != "a" || a1.Observer != "dc-1" || a1.Outcome != "not-ready" || a1.Detail != "500" || a1.FailingSince == nil {
		t.Errorf("a from dc-1: %+v", a1)
	}
	if b1.Observer != "dc-1" || b1.Outcome != "unreachable" || b1.FailingSince == nil ||
		b1.ObservedAt.Sub(*b1.FailingSince).Round(time.Second) != 90*time.Second {
		t.Errorf("b from dc-1: %+v: failing since should be 90 s before it was observed", b1)
	}
	if b2.Observer != "dc-2" || b2.Outcome != "ok" || b2.FailingSince != nil {
		t.Errorf("b from dc-2: %+v", b2)
	}
	// The views are stamped by the clock Clusters.ListViews reads.
	for _, v := range views {
		if age := now.Sub(v.ObservedAt); age < 0 || age > time.Minute {
			t.Errorf("view of %s from %s is %s old by the database's clock", v.Cluster, v.Observer, age)
		}
	}
}
