package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/lifecycle"
	"github.com/purser-io/purser/internal/control/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// The order of the queue. A runnable that fits a cluster is placed unless
// one that waits for capacity and fits now too goes first: by
// spec.priority (higher first), then, between namespaces, by
// dominant-resource fairness, then by how long each has waited
// (placement.Ahead, which the API's queue positions use too). The
// fairness follows Armada's (docs/scheduler.md: a queue's cost is its
// dominant resource share, the largest over resources of what it holds
// divided by the total, over the queue's weight) and Kueue's fair sharing
// (its DRS, the dominant resource share weighted per ClusterQueue):
// a namespace's share is the largest, over the resources the farm has, of
// what its active runnables request divided by the farm's allocatable,
// divided by its weight in the policy; the namespace furthest below its
// share goes first, so a namespace that submits 10,000 runnables does not
// hold back another's single one.

// SharePolicy is what the submitter reads of the policy to order the
// queue; auth.Policy and auth.Identities provide it.
type SharePolicy interface {
	PriorityClass(name string) (int32, bool)
	FairShareWeight(ns string) float64
}

// waiter is a runnable waiting for capacity (or its quota).
type waiter struct {
	uid, namespace string
	priority       int32
	since          time.Time
	demand         placement.Demand
	placement      v1alpha1.Placement
	gvk            string
	// quota: it waits for its namespace's quota, which placing others
	// does not free; it never holds others back.
	quota bool
}

func (s *Submitter) newWaiter(r *lifecycle.Runnable, spec *v1alpha1.RunnableSpec, gvk string, d placement.Demand) *waiter {
	return &waiter{uid: r.Rec.UID, namespace: r.Rec.Namespace, priority: s.priorityOf(spec), since: r.Rec.CreatedAt,
		demand: d, placement: spec.Placement, gvk: gvk}
}

// priorityOf is spec.priority: the integer, or the policy's class of that
// name (0 for a class the policy does not define).
func (s *Submitter) priorityOf(spec *v1alpha1.RunnableSpec) int32 {
	var classes func(string) (int32, bool)
	if sp, ok := s.cfg.Policy.(SharePolicy); ok {
		classes = sp.PriorityClass
	}
	return placement.PriorityValue(spec.Priority, classes)
}

func (s *Submitter) weight(ns string) float64 {
	if sp, ok := s.cfg.Policy.(SharePolicy); ok {
		if w := sp.FairShareWeight(ns); w > 0 {
			return w
		}
	}
	return 1
}

// behind says why x waits for runnables that go first and fit now (and
// queues them), or "" when none does.
func (s *Submitter) behind(ctx context.Context, x *waiter, cands []placement.Cluster) string {
	s.capacity.mu.Lock()
	var others []*waiter
	for uid, w := range s.capacity.waiting {
		if uid != x.uid && !w.quota {
			c := *w
			others = append(others, &c)
		}
	}
	s.capacity.mu.Unlock()
	if len(others) == 0 {
		return ""
	}
	// The others are weighed on the clusters as they are now, whatever
	// serves their kind or has their dependencies: they are looked at
	// again before they are placed.
	open := make([]placement.Cluster, len(cands))
	for i, c := range cands {
		c.Serves, c.Lacks = nil, ""
		open[i] = c
	}
	shares := map[string]float64{}
	share := func(ns string) float64 {
		if v, ok := shares[ns]; ok {
			return v
		}
		v, err := s.dominantShare(ctx, ns, cands)
		if err != nil {
			v = 0
		}
		shares[ns] = v
		return v
	}
	var ahead []*waiter
	var why []string
	xe := placement.QueueEntry{UID: x.uid, Namespace: x.namespace, Priority: x.priority, Since: x.since}
	for _, w := range others {
		we := placement.QueueEntry{UID: w.uid, Namespace: w.namespace, Priority: w.priority, Since: w.since}
		if w.priority == x.priority && w.namespace != x.namespace {
			we.Share, xe.Share = share(w.namespace), share(x.namespace)
		}
		first := placement.Ahead(we, xe)
		if first == "" {
			continue
		}
		if d := placement.ChooseFor(w.placement, w.gvk, w.demand, s.cfg.Score, open); d.Cluster == "" {
			continue // it does not fit either: no reason to wait for it
		}
		ahead = append(ahead, w)
		why = append(why, first)
	}
	if len(ahead) == 0 {
		return ""
	}
	uids := make([]string, len(ahead))
	for i, w := range ahead {
		uids[i] = w.uid
	}
	s.queue.Add(uids...)
	slices.Sort(why)
	why = slices.Compact(why)
	return fmt.Sprintf("it fits, but %d waiting runnable(s) that fit too go first (%s)", len(ahead), strings.Join(why, "; "))
}

// dominantShare is namespace ns's dominant resource share of the farm
// (the clusters that report capacity), over its weight.
func (s *Submitter) dominantShare(ctx context.Context, ns string, cands []placement.Cluster) (float64, error) {
	total := corev1.ResourceList{}
	for _, c := range cands {
		if c.Free == nil {
			continue
		}
		placement.AddTo(total, c.Free.Allocatable)
	}
	var statuses [][]byte
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		statuses, err = tx.Runnables().ActiveStatuses(ctx, ns)
		return err
	})
	if err != nil {
		return 0, err
	}
	used := placement.StoredUsage(statuses)
	return placement.DominantShare(used, total) / s.weight(ns), nil
}
