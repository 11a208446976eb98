package store

import (
	"testing"
	"time"
)

func testHubLeases(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().RecordHubLeases(ctx, []string{"a", "b"}, 10*time.Second) })
	// A shorter bound recorded later (another observer's) does not pull
	// a's time back.
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().RecordHubLeases(ctx, []string{"a"}, time.Second) })
	var got map[string]time.Time
	var now time.Time
	mustRead(t, s, func(tx *Tx) (err error) { got, now, err = tx.Clusters().HubLeases(ctx); return })
	if len(got) != 2 {
		t.Fatalf("hub leases %v", got)
	}
	for _, c := range []string{"a", "b"} {
		// Written by the database's clock, 10 s ahead of the write.
		if ahead := got[c].Sub(now); ahead < 8*time.Second || ahead > 10*time.Second {
			t.Errorf("%s lands by %s, %s after the database's clock at the read; want about 10 s", c, got[c], ahead)
		}
	}
	// A longer bound moves it on.
	mustTx(t, s, func(tx *Tx) error { return tx.Clusters().RecordHubLeases(ctx, []string{"b"}, time.Minute) })
	mustRead(t, s, func(tx *Tx) (err error) { got, now, err = tx.Clusters().HubLeases(ctx); return })
	if ahead := got["b"].Sub(now); ahead < 50*time.Second {
		t.Errorf("b lands by %s after a renewal recorded with a minute's bound, only %s ahead", got["b"], ahead)
	}
}
