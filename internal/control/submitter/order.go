package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
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
// queue; policy.Policy and auth.Identities provide it.
type SharePolicy interface {
	Priority(author policy.User, ns string, prio *intstr.IntOrString) int32
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

func (s *Submitter) newWaiter(r *lifecycle.Runnable, doc *runnableDoc, gvk string, d placement.Demand) *waiter {
	return &waiter{uid: r.Rec.UID, namespace: r.Rec.Namespace, priority: s.priorityOf(r, doc), since: r.Rec.CreatedAt,
		demand: d, placement: doc.Spec.Placement, gvk: gvk}
}

// priorityOf is spec.priority as the policy values it for the spec's
// author: a class the author may use in the namespace by its value, an
// integer only from an admin; anything else 0 (policy.Policy.Priority).
// Without a policy, the integer, and 0 for a class.
func (s *Submitter) priorityOf(r *lifecycle.Runnable, doc *runnableDoc) int32 {
	sp, ok := s.cfg.Policy.(SharePolicy)
	if !ok {
		return placement.PriorityValue(doc.Spec.Priority, nil)
	}
	author := policy.User{Name: r.Rec.Submitter}
	if doc.Author != nil {
		author = policy.User{Name: doc.Author.Name, Groups: doc.Author.Groups}
	}
	return sp.Priority(author, r.Rec.Namespace, doc.Spec.Priority)
}

func (s *Submitter) weight(ns string) float64 {
	if sp, ok := s.cfg.Policy.(SharePolicy); ok {
		if w := sp.FairShareWeight(ns); w > 0 {
			return w
		}
	}
	return 1
}

// aheadQueued bounds how many of the waiting runnables that go first a
// runnable that yields queues: the first in order, enough for every
// worker; the rest are woken as room frees (toWake).
const aheadQueued = DefaultWorkers

// behind says why x waits for runnables that go first and fit now (and
// queues the first of them), or "" when none does. The others are taken
// in the queue's order (goesFirst) and looked at only while they go
// before x, so that a runnable arriving behind thousands that wait does
// not weigh every one of them.
func (s *Submitter) behind(ctx context.Context, x *waiter, cands []placement.Cluster) string {
	s.capacity.mu.Lock()
	var others []*waiter
	for uid, w := range s.capacity.waiting {
		if uid != x.uid && !w.quota && w.priority >= x.priority {
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
	for _, ns := range append([]string{x.namespace}, namespacesOf(others)...) {
		if _, ok := shares[ns]; !ok {
			v, err := s.dominantShare(ctx, ns, cands)
			if err != nil {
				v = 0
			}
			shares[ns] = v
		}
	}
	slices.SortFunc(others, func(a, b *waiter) int { return goesFirst(a, b, shares) })
	var ahead []*waiter
	var why []string
	for _, w := range others {
		if goesFirst(w, x, shares) >= 0 {
			break // neither this one nor any after it goes first
		}
		if d := placement.ChooseFor(w.placement, w.gvk, w.demand, s.cfg.Score, open); d.Cluster == "" {
			continue // it does not fit either: no reason to wait for it
		}
		ahead = append(ahead, w)
		why = append(why, placement.Ahead(queueEntry(w, shares), queueEntry(x, shares)))
		if len(ahead) == aheadQueued {
			break
		}
	}
	if len(ahead) == 0 {
		return ""
	}
	// Queued in the order they go in, so that the first is placed first.
	uids := make([]string, len(ahead))
	for i, w := range ahead {
		uids[i] = w.uid
	}
	s.queue.Add(uids...)
	slices.Sort(why)
	why = slices.Compact(why)
	// No count in the message: it would change, and be written, with
	// every arrival and every placement of the queue.
	return fmt.Sprintf("it fits, but waiting runnables that fit too go first (%s)", strings.Join(why, "; "))
}

// behindUnlessWoken is behind, except for a runnable toWake queued in
// its turn: the room for it was counted after those that go first.
func (s *Submitter) behindUnlessWoken(ctx context.Context, uid string, x *waiter, cands []placement.Cluster) string {
	if s.wasWoken(uid) {
		return ""
	}
	return s.behind(ctx, x, cands)
}

func namespacesOf(ws []*waiter) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// goesFirst orders waiting runnables as the queue does
// (placement.CompareQueue), shares by namespace.
func goesFirst(a, b *waiter, shares map[string]float64) int {
	return placement.CompareQueue(queueEntry(a, shares), queueEntry(b, shares))
}

func queueEntry(w *waiter, shares map[string]float64) placement.QueueEntry {
	return placement.QueueEntry{UID: w.uid, Namespace: w.namespace, Priority: w.priority, Share: shares[w.namespace], Since: w.since}
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
	if err := s.ensureSums(ctx); err != nil {
		return 0, err
	}
	used := corev1.ResourceList{}
	for _, u := range s.usageByCluster(ns) {
		placement.AddTo(used, u)
	}
	return placement.DominantShare(used, total) / s.weight(ns), nil
}
