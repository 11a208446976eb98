package submitter

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/placement"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// Defaults of the capacity figures.
const (
	DefaultInFlightMargin   = 5 * time.Second
	DefaultCapacityInterval = time.Second
	// waitingRescanEvery: the rescan looks at runnables that wait for
	// capacity only every that many rounds (about a minute); in between a
	// change of an agent's report wakes them.
	waitingRescanEvery = 12
)

// capacityWatch is what the submitter follows of the agents' reports:
// the runnables that wait for capacity, woken when a report changes,
// rather than each polled on every rescan.
type capacityWatch struct {
	mu      sync.Mutex
	waiting map[string]*waiter // by runnable uid: those that fit no cluster now
	seen    map[string][]byte  // cluster -> the report last seen
	rounds  int                // rescans so far
	// inFlightUntil is when the last placement counted in flight stops
	// counting: until then the figures change without a new report.
	inFlightUntil time.Time
}

func newCapacityWatch() *capacityWatch {
	return &capacityWatch{waiting: map[string]*waiter{}, seen: map[string][]byte{}}
}

// waitForCapacity notes that w.uid fits no cluster now (decision has
// none), or is held by its quota (quota).
func (s *Submitter) waitForCapacity(w *waiter, d placement.Decision, quota bool) {
	s.capacity.mu.Lock()
	defer s.capacity.mu.Unlock()
	if d.Cluster == "" && (d.Capacity || d.Never) && !d.Lacking {
		w.quota = quota
		s.capacity.waiting[w.uid] = w
	} else {
		delete(s.capacity.waiting, w.uid)
	}
}

// forget drops uid from the waiting: it is no longer Queued.
func (s *Submitter) forget(uid string) {
	s.capacity.mu.Lock()
	defer s.capacity.mu.Unlock()
	delete(s.capacity.waiting, uid)
}

// placed notes that uid no longer waits.
func (s *Submitter) placed(uid string) {
	s.capacity.mu.Lock()
	defer s.capacity.mu.Unlock()
	delete(s.capacity.waiting, uid)
	// Placed now, it counts in flight at least until it is Running and a
	// report made after that.
	s.capacity.extendInFlight(time.Now().Add(2*s.cfg.InFlightMargin + 2*s.cfg.CapacityInterval))
}

// extendInFlight moves inFlightUntil to until when that is later; w.mu
// held.
func (w *capacityWatch) extendInFlight(until time.Time) {
	if until.After(w.inFlightUntil) {
		w.inFlightUntil = until
	}
}

// followCapacity reads the agents' reports (one small query) and, when
// one changed, queues every runnable waiting for capacity: the report of
// a pod that finished is what lets the next one in.
func (s *Submitter) followCapacity(ctx context.Context) {
	var reports map[string]store.CapacityReport
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		reports, err = tx.Agents().Capacities(ctx)
		return err
	})
	if err != nil {
		return // the next round reads again
	}
	w := s.capacity
	w.mu.Lock()
	changed := false
	for cluster, r := range reports {
		if !bytes.Equal(w.seen[cluster], r.Report) {
			w.seen[cluster] = r.Report
			changed = true
		}
	}
	// Placements still counted in flight change the figures without a
	// new report as they stop counting.
	if time.Now().Before(w.inFlightUntil) {
		changed = true
	}
	var wake []string
	if changed {
		for uid := range w.waiting {
			wake = append(wake, uid)
		}
	}
	w.mu.Unlock()
	if len(wake) > 0 {
		s.queue.Add(wake...)
	}
}

// skipWaiting drops from uids the runnables that wait for capacity,
// except on every waitingRescanEvery-th rescan, the safety net for a
// report this submitter missed.
func (s *Submitter) skipWaiting(uids []string) []string {
	w := s.capacity
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds++
	if w.rounds%waitingRescanEvery == 0 || len(w.waiting) == 0 {
		return uids
	}
	out := uids[:0]
	for _, uid := range uids {
		if w.waiting[uid] == nil {
			out = append(out, uid)
		}
	}
	return out
}

// freeFigures reads, for placement, each cluster's latest report and the
// placements since that it may not count yet.
func (s *Submitter) freeFigures(ctx context.Context, tx *store.Tx) (map[string]*placement.Free, error) {
	reports, err := tx.Agents().Capacities(ctx)
	if err != nil || len(reports) == 0 {
		return nil, err
	}
	out := map[string]*placement.Free{}
	var since time.Time
	for cluster, r := range reports {
		var c stream.Capacity
		if json.Unmarshal(r.Report, &c) != nil {
			s.log.Error("capacity report does not decode; cluster taken as not reported", "cluster", cluster)
			continue
		}
		out[cluster] = &placement.Free{Allocatable: c.Allocatable, Free: c.Free, NodeMax: c.NodeMax}
		if from := r.At.Add(-s.cfg.InFlightMargin); since.IsZero() || from.Before(since) {
			since = from
		}
	}
	placed, err := tx.Runnables().ListPlaced(ctx, since)
	if err != nil {
		return nil, err
	}
	for _, p := range placed {
		f, ok := out[p.Cluster]
		if !ok {
			continue
		}
		// Seen running before the report was made: its pods are in it.
		if p.Phase == string(v1alpha1.PhaseRunning) && !p.UpdatedAt.After(reports[p.Cluster].At.Add(-s.cfg.InFlightMargin)) {
			continue
		}
		var st v1alpha1.RunnableStatus
		if len(p.Status) == 0 || json.Unmarshal(p.Status, &st) != nil {
			continue
		}
		req, err := placement.ParseList(st.Requests)
		if err != nil {
			continue
		}
		if f.InFlight == nil {
			f.InFlight = corev1.ResourceList{}
		}
		placement.AddTo(f.InFlight, req)
		f.InFlightCount++
		// While some placement still counts, the waiting are looked at
		// again (each look extends this), so that they see it stop
		// counting even when no report changes.
		s.capacity.mu.Lock()
		s.capacity.extendInFlight(time.Now().Add(s.cfg.InFlightMargin + 2*s.cfg.CapacityInterval))
		s.capacity.mu.Unlock()
	}
	return out, nil
}
