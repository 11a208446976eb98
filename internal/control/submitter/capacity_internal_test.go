package submitter

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
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
	sealer, _ := sealtest.New(t)
	clusterstest.Register(t, st, sealer, store.Cluster{Name: "dc1"}, []byte("kubeconfig"))
	s := New(Config{Store: st, Sealer: sealer})
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

// TestWakeInOrderWhatFits: when room frees, the waiting are woken in the
// queue's order (priority, then fair share, then age), and only as many
// as the free figures take, each counted before the next is weighed; one
// held by its quota is woken whenever it fits and takes nothing from the
// others; with no room, none is woken.
func TestWakeInOrderWhatFits(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	clusterstest.Register(t, st, sealer, store.Cluster{Name: "dc1"}, []byte("kubeconfig"))
	s := New(Config{Store: st, Sealer: sealer})
	report := func(free string) {
		t.Helper()
		body := `{"allocatable":{"cpu":"8"},"free":{"cpu":"` + free + `"},"nodeMax":{"cpu":"` + free + `"}}`
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Agents().RecordCapacity(ctx, "dc1", time.Now(), []byte(body)) }); err != nil {
			t.Fatal(err)
		}
	}
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	t0 := time.Now().Add(-time.Hour)
	for _, w := range []*waiter{
		{uid: "old", since: t0},
		{uid: "older", since: t0.Add(-time.Minute)},
		{uid: "urgent", priority: 10, since: t0.Add(time.Minute)},
		{uid: "quota", since: t0.Add(-2 * time.Minute), quota: true},
		{uid: "newest", since: t0.Add(2 * time.Minute)},
	} {
		w.namespace, w.gvk, w.demand = "team-a", "batch/v1, Kind=Job", placement.Demand{Total: one, Pod: one}
		s.capacity.waiting[w.uid] = w
	}
	report("0")
	if got := s.toWake(ctx); len(got) != 0 {
		t.Errorf("no room: woke %v", got)
	}
	report("2")
	got := s.toWake(ctx)
	if want := []string{"urgent", "quota", "older"}; !slices.Equal(got, want) {
		t.Errorf("room for 2: woke %v, want %v", got, want)
	}
}
