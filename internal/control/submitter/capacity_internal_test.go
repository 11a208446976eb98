package submitter

import (
	"context"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestFollowCapacityWakesTheWaiting: a change of an agent's report queues
// every runnable waiting for capacity; a report that did not change
// queues none.
func TestFollowCapacityWakesTheWaiting(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := New(Config{Store: st})
	report := func(at time.Time, body string) {
		t.Helper()
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Agents().RecordCapacity(ctx, "dc1", at, []byte(body)) }); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Minute)
	report(t0, `{"free":{"cpu":"0"}}`)
	s.followCapacity(ctx) // the first sight of a report
	s.capacity.waiting["a"] = &waiter{uid: "a"}
	s.capacity.waiting["b"] = &waiter{uid: "b"}
	report(t0.Add(time.Second), `{"free":{"cpu":"0"}}`)
	s.followCapacity(ctx)
	if n := s.queue.Len(); n != 0 {
		t.Fatalf("%d queued on an unchanged report", n)
	}
	report(t0.Add(2*time.Second), `{"free":{"cpu":"4"}}`)
	s.followCapacity(ctx)
	if n := s.queue.Len(); n != 2 {
		t.Fatalf("%d queued on a changed report, want the 2 waiting", n)
	}
}
