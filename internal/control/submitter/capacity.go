package submitter

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/placement"
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
	// woken are the runnables toWake queued, until when: the room for
	// each was counted after those that go before it, so each is placed
	// without yielding to them again (behind), in whatever order the
	// workers take them.
	woken map[string]time.Time
}

func newCapacityWatch() *capacityWatch {
	return &capacityWatch{waiting: map[string]*waiter{}, seen: map[string][]byte{}, woken: map[string]time.Time{}}
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
	// The moves others made since the last look: an end frees room and
	// quota without a report necessarily changing.
	freed, err := s.catchUp(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the runnables changed since the last look failed; the next round reads again", "error", err)
		}
		return
	}
	var reports map[string]store.CapacityReport
	err = s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		reports, err = tx.Agents().Capacities(ctx)
		return err
	})
	if err != nil {
		return // the next round reads again
	}
	w := s.capacity
	w.mu.Lock()
	changed := freed
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
	w.mu.Unlock()
	if changed {
		if wake := s.toWake(ctx); len(wake) > 0 {
			until := time.Now().Add(2 * s.cfg.CapacityInterval)
			w.mu.Lock()
			for uid, at := range w.woken {
				if time.Now().After(at) {
					delete(w.woken, uid)
				}
			}
			for _, uid := range wake {
				w.woken[uid] = until
			}
			w.mu.Unlock()
			s.queue.Add(wake...)
		}
	}
}

// wasWoken reports, once, that toWake queued uid lately.
func (s *Submitter) wasWoken(uid string) bool {
	w := s.capacity
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.woken[uid]
	delete(w.woken, uid)
	return ok && time.Now().Before(at)
}

// toWake is the waiting runnables to look at again, in the order of the
// queue (goesFirst): of those waiting for capacity, only the ones that
// fit the clusters as their figures are now, each counted there in
// flight before the next is weighed, so that a change that frees room
// for one runnable wakes one and not every waiting runnable (each of
// which would be placed in turn, under the placing lock, only to find
// the room taken); those held by their quota are woken whenever they fit
// (placing others does not free a quota). Without the figures, every
// waiting runnable. Those not woken are looked at on the next change and
// by the periodic rescan (waitingRescanEvery), which refreshes their
// messages.
func (s *Submitter) toWake(ctx context.Context) []string {
	s.capacity.mu.Lock()
	ws := make([]*waiter, 0, len(s.capacity.waiting))
	for _, w := range s.capacity.waiting {
		c := *w
		ws = append(ws, &c)
	}
	s.capacity.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	all := func() []string {
		uids := make([]string, len(ws))
		for i, w := range ws {
			uids[i] = w.uid
		}
		return uids
	}
	cands, _, err := s.candidates(ctx, schema.GroupVersionKind{}, "", nil)
	if err != nil {
		return all()
	}
	// Weighed on the clusters as they are, whatever serves their kind or
	// has their dependencies: placing them checks that.
	for i := range cands {
		cands[i].Serves, cands[i].Lacks = nil, ""
	}
	shares := map[string]float64{}
	for _, w := range ws {
		if _, ok := shares[w.namespace]; !ok {
			if shares[w.namespace], err = s.dominantShare(ctx, w.namespace, cands); err != nil {
				return all()
			}
		}
	}
	slices.SortFunc(ws, func(a, b *waiter) int { return goesFirst(a, b, shares) })
	var wake []string
	for _, w := range ws {
		d := placement.ChooseFor(w.placement, w.gvk, w.demand, s.cfg.Score, cands)
		if d.Cluster == "" {
			continue
		}
		wake = append(wake, w.uid)
		if w.quota {
			continue
		}
		for i := range cands {
			if f := cands[i].Free; cands[i].Name == d.Cluster && f != nil {
				if f.InFlight == nil {
					f.InFlight = corev1.ResourceList{}
				}
				for name, q := range w.demand.Total {
					cur := f.InFlight[name]
					cur.Add(q)
					f.InFlight[name] = cur
				}
			}
		}
	}
	return wake
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

// figureCache keeps what freeFigures decoded, so that a placement does
// not decode again every cluster's report: a report is decoded again
// only when its bytes changed.
type figureCache struct {
	mu      sync.Mutex
	reports map[string]decodedReport // by cluster
}

type decodedReport struct {
	raw []byte
	c   stream.Capacity
	ok  bool
}

func (fc *figureCache) report(cluster string, raw []byte) (stream.Capacity, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if d, hit := fc.reports[cluster]; hit && bytes.Equal(d.raw, raw) {
		return d.c, d.ok
	}
	var c stream.Capacity
	ok := json.Unmarshal(raw, &c) == nil
	if fc.reports == nil {
		fc.reports = map[string]decodedReport{}
	}
	fc.reports[cluster] = decodedReport{raw: raw, c: c, ok: ok}
	return c, ok
}

// freeFigures reads, for placement, each cluster's latest report (one
// small query) and takes off each what the kept sums have in flight
// there.
func (s *Submitter) freeFigures(ctx context.Context, tx *store.Tx) (map[string]*placement.Free, error) {
	reports, err := tx.Agents().Capacities(ctx)
	if err != nil || len(reports) == 0 {
		return nil, err
	}
	return s.keptFigures(reports), nil
}
