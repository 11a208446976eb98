package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Actor is the audit log's name for the submitter.
const Actor = "submitter"

// Attempt results and reasons the submitter writes.
const (
	ResultFailed    = "Failed"
	ResultCancelled = "Cancelled"

	ReasonClusterUnreachable = "ClusterUnreachable"
	ReasonClusterRemoved     = "ClusterRemoved"
)

// reconcile moves the runnable uid on from the phase it is in, following
// its own changes (Queued -> Scheduled -> Submitted) within one call. An
// error (a *failure when it came from a cluster) is retried with the
// queue's backoff; the Result says when to look again at a wait whose end
// is known.
func (s *Submitter) reconcile(ctx context.Context, uid string) (reconcile.Result, error) {
	s.begin(uid)
	for range maxSteps {
		v := s.step(ctx, uid)
		if v.err != nil || !v.next {
			return reconcile.Result{RequeueAfter: v.after}, v.err
		}
	}
	return reconcile.Result{}, fmt.Errorf("runnable %s: still changing after %d steps; retrying", uid, maxSteps)
}

// verdict is what one step decided about a runnable. At most one of move
// and err is set: the move is written by step, the error retried.
type verdict struct {
	move *transition
	err  error
	// next asks for another step at once after the move: the runnable
	// went on to a phase with more to do here.
	next bool
	// after, when positive, is when to look again at a wait whose end is
	// known (a deadline, a cluster held out of placement).
	after time.Duration
}

func retry(err error) verdict { return verdict{err: err} }

// step reads the runnable, decides the one thing its phase calls for, and
// writes the move that decision makes: the one place a step writes.
func (s *Submitter) step(ctx context.Context, uid string) verdict {
	var r *lifecycle.Runnable
	var attempts []*store.Attempt
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if r, err = lifecycle.Load(ctx, tx, uid); err != nil {
			return err
		}
		attempts, err = tx.Attempts().List(ctx, uid)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.forget(uid)
		return verdict{} // deleted: nothing to do
	}
	if err != nil {
		return retry(err)
	}
	if r.Phase() != v1alpha1.PhaseQueued {
		s.forget(uid)
	}
	var v verdict
	switch r.Phase() {
	case v1alpha1.PhaseQueued:
		// One placement at a time, from reading the clusters' figures to
		// writing the decision: each counts the ones before it in flight,
		// so that a burst never overfills a cluster.
		s.placing.Lock()
		defer s.placing.Unlock()
		v = s.place(ctx, r, attempts)
	case v1alpha1.PhaseScheduled:
		if s.placeOnly {
			return verdict{}
		}
		v = s.submit(ctx, r, attempts)
	case v1alpha1.PhaseCancelled:
		v = s.cancel(ctx, r, attempts)
	case v1alpha1.PhaseSuspended:
		if v = s.suspension(ctx, r, attempts); v.move == nil && v.err == nil {
			v = s.update(ctx, r, attempts)
		}
	case v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning:
		// The ingester and the controller follow these; the submitter
		// only applies a user's update in place.
		v = s.update(ctx, r, attempts)
	case v1alpha1.PhaseFailed:
		v = s.retryFailed(r, attempts)
	default:
		// PendingApproval waits for the API; FailingOver and the ended
		// phases but Failed and Cancelled belong to the controller.
		return verdict{}
	}
	if v.move == nil {
		return v
	}
	moved, err := s.write(ctx, r, v.move)
	switch {
	case err != nil:
		return retry(err)
	case moved:
		return verdict{next: true} // changed meanwhile: read it again
	}
	return v
}

// place decides where a Queued runnable goes, or why it cannot go yet.
func (s *Submitter) place(ctx context.Context, r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return verdict{move: &transition{
			phase: v1alpha1.PhaseFailed, message: err.Error(),
			audit: &audit.Entry{Action: "fail", Summary: "failed: " + err.Error()},
		}}
	}
	if why := s.unapproved(r); why != "" {
		return verdict{move: &transition{
			phase: v1alpha1.PhaseFailed, message: why,
			audit: &audit.Entry{Action: "fail", Summary: "failed: " + why},
		}}
	}
	now := s.now()
	deadline := doc.Spec.Deadline
	if deadline != nil && !now.Before(*deadline) {
		msg := fmt.Sprintf("deadline %s passed before the runnable could be submitted; it was never created", deadline.UTC().Format(time.RFC3339))
		return verdict{move: &transition{
			phase: v1alpha1.PhaseExpired, message: msg,
			audit: &audit.Entry{Action: "expire", Summary: "expired: " + msg},
		}}
	}

	start := time.Now()
	cands, heldUntil, quota, err := s.gather(ctx, gvk, r.Rec.Namespace, doc.Spec.DependsOn, true)
	if err != nil {
		return retry(err)
	}
	p := doc.Spec.Placement
	var evicted *store.Attempt
	if n := len(attempts); n > 0 && attempts[n-1].Result == attempt.ResultEvicted {
		// The cluster the runnable was just moved off is not the next
		// attempt's: that is what the eviction was for.
		evicted = attempts[n-1]
		p = attempt.Excluding(p, evicted.Cluster)
		if m := attempt.Moving(r.Status.Move, evicted.Number, evicted.Reason); m != nil {
			p = attempt.Toward(p, m.To) // a planned move goes where it was asked to
		}
	}
	p, hold := retryHold(r, attempts, p, now)
	if hold > 0 {
		msg := fmt.Sprintf("the retry waits for spec.retry.backoff, until %s", now.Add(hold).UTC().Format(time.RFC3339))
		v := verdict{after: hold}
		if r.Status.Message != msg {
			v.move = &transition{phase: v1alpha1.PhaseQueued, message: msg}
		}
		return v
	}
	demand, err := placement.Requests(&doc.Spec)
	if err != nil {
		msg := "what it asks for cannot be read: " + err.Error()
		return verdict{move: &transition{
			phase: v1alpha1.PhaseFailed, message: msg,
			audit: &audit.Entry{Action: "fail", Summary: "failed: " + msg},
		}}
	}
	requests := placement.Strings(demand.Total)
	if requests == nil {
		requests = map[string]string{}
	}
	if over := s.overQuota(quota, r.Rec.Namespace, demand, cands); over != "" {
		// Held by its namespace's quota until some of its work ends: a
		// wait like one for capacity, woken the same way.
		v := verdict{after: wake(now, deadline, heldUntil)}
		if r.Status.Message != over || !maps.Equal(r.Status.Requests, requests) {
			v.move = &transition{phase: v1alpha1.PhaseQueued, message: over, requests: requests}
		}
		s.waitForCapacity(s.newWaiter(r, doc, gvk.String(), demand), placement.Decision{Capacity: true}, true)
		return v
	}
	decision := placement.ChooseFor(p, gvk.String(), demand, s.cfg.Score, cands)
	s.metrics.placementSeconds.Observe(time.Since(start).Seconds())

	if decision.Cluster == "" {
		if servedNowhere(decision) && !s.discoveryOlder(ctx, decision, r.Rec.CreatedAt) {
			msg := fmt.Sprintf("no cluster serves %s: %s", gvk, decision.Reason)
			return verdict{move: &transition{
				phase: v1alpha1.PhaseFailed, message: msg,
				audit: &audit.Entry{Action: "fail", Summary: "failed: " + msg},
			}}
		}
		// Stays Queued until the deadline, a cluster's return, a message
		// or the rescan. The message is only written when it changes, so
		// waiting costs no writes.
		v := verdict{after: wake(now, deadline, heldUntil)}
		if r.Status.Message != decision.Reason || !maps.Equal(r.Status.Requests, requests) {
			v.move = &transition{phase: v1alpha1.PhaseQueued, message: decision.Reason, requests: requests}
		}
		s.waitForCapacity(s.newWaiter(r, doc, gvk.String(), demand), decision, false)
		return v
	}
	// It fits: unless a waiting runnable that fits too goes first (a
	// higher priority, or its namespace further below its fair share, or
	// waiting longer), which is woken instead.
	// One that toWake queued in its turn does not yield again.
	if behind := s.behindUnlessWoken(ctx, r.Rec.UID, s.newWaiter(r, doc, gvk.String(), demand), cands); behind != "" {
		// Waiting like one that does not fit: woken in its turn as
		// room frees (toWake), which placements in flight make every
		// second.
		v := verdict{after: wake(now, deadline, heldUntil)}
		if r.Status.Message != behind || !maps.Equal(r.Status.Requests, requests) {
			v.move = &transition{phase: v1alpha1.PhaseQueued, message: behind, requests: requests}
		}
		s.waitForCapacity(s.newWaiter(r, doc, gvk.String(), demand), placement.Decision{Capacity: true}, false)
		return v
	}

	number := 1
	if n := len(attempts); n > 0 {
		number = attempts[n-1].Number + 1
	}
	cluster := decision.Cluster
	carried := carriedIn(r)
	entry := &audit.Entry{
		Action:  "place",
		Summary: fmt.Sprintf("placed attempt %d on %s: %s", number, cluster, decision.Reason),
	}
	if evicted != nil {
		// The failover's second half: the target cluster, beside the
		// source and reason of the evict entry, and what is carried.
		entry.Summary = fmt.Sprintf("failover of attempt %d from %s (%s) to %s as attempt %d, carrying %s",
			evicted.Number, evicted.Cluster, evicted.Reason, cluster, number, carriedString(carried))
		entry.Details = failoverDetails(evicted, cluster, number, carried)
	}
	// The next step follows at once: the create on the chosen cluster.
	s.placed(r.Rec.UID)
	return verdict{next: true, move: &transition{
		recheck: s.recheck(chosen(cands, cluster), p, gvk.String(), demand, r.Rec.Namespace, labelsOf(cands)),
		phase:   v1alpha1.PhaseScheduled, cluster: &cluster, requests: requests,
		message: fmt.Sprintf("attempt %d placed on %s: %s", number, cluster, decision.Reason),
		attempt: &store.Attempt{
			RunnableUID: r.Rec.UID, Number: number, Cluster: cluster, StartedAt: now, Message: decision.Reason,
			CarriedIn: carried, Generation: r.Rec.Generation,
		},
		audit: entry,
	}}
}

// wake is how long a runnable that no cluster can take now waits before
// it is looked at again: until its deadline (now is on the submitter's
// clock) or until a cluster held out of placement returns (on the real
// one), whichever comes first; 0 when neither is known.
func wake(now time.Time, deadline *time.Time, heldUntil time.Time) time.Duration {
	var d time.Duration
	if deadline != nil {
		d = deadline.Sub(now)
	}
	if !heldUntil.IsZero() {
		if h := time.Until(heldUntil); h > 0 && (d <= 0 || h < d) {
			d = h
		}
	}
	return max(d, 0)
}

// discoveryOlder reports whether some cluster d turned down for not
// serving the kind said so from a discovery older than since (the
// runnable's creation): a CRD installed just before may not be in it. The
// runnable then waits for the next discovery, which the clusters' clients
// ask for at most every mapperRefresh, rather than fail for good on a
// stale answer.
func (s *Submitter) discoveryOlder(ctx context.Context, d placement.Decision, since time.Time) bool {
	for name := range d.Rejected {
		row, err := s.clusterRow(ctx, name)
		if err != nil {
			continue // removed: it serves nothing
		}
		if cc, err := s.clients.Get(row); err == nil && !cc.DiscoveredSince(since) {
			return true
		}
	}
	return false
}

// servedNowhere reports that every cluster was turned down only because
// it does not serve the kind: a permanent failure, unlike clusters that
// are busy, unreachable or excluded.
func servedNowhere(d placement.Decision) bool {
	if len(d.Rejected) == 0 {
		return false
	}
	for _, why := range d.Rejected {
		if !strings.HasPrefix(why, "does not serve") {
			return false
		}
	}
	return true
}

// submit creates a Scheduled runnable's object on its attempt's cluster.
func (s *Submitter) submit(ctx context.Context, r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	a := openAttempt(attempts)
	if a == nil {
		// Scheduled always comes with an open attempt; if something broke
		// that, placing again is the way back to a consistent state.
		cluster := ""
		return verdict{next: true, move: &transition{
			phase: v1alpha1.PhaseQueued, cluster: &cluster,
			message: "scheduled without an open attempt; placing again",
		}}
	}
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return s.endAttempt(a, v1alpha1.PhaseFailed, ResultFailed, "InvalidSpec", err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return s.endAttempt(a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterRemoved,
			fmt.Sprintf("cluster %s was removed before the object was created; placing again", a.Cluster))
	}
	if err != nil {
		return retry(err)
	}
	obj := object(r.Rec, doc, gvk, a.Number)
	kept, restorePath := preserved(r)
	if err := attempt.Prepare(obj, &doc.Spec, kept, restorePath); err != nil {
		msg := "the failover settings cannot be applied to the next attempt: " + err.Error()
		return s.endAttempt(a, v1alpha1.PhaseFailed, ResultFailed, "InvalidFailover", msg)
	}
	attempt.HandOver(obj, r.Status.Move, a.Number)
	// An AtMostOne create sent to a cluster that stopped answering may
	// land at any moment, so its attempt is not left for another one here.
	atMostOne := attempt.Consistency(&doc.Spec) == v1alpha1.ConsistencyAtMostOne
	mayLand := atMostOne && a.CreateLandedBy != nil
	if taint := unreachableTaint(row); atMostOne && taint != "" {
		return s.lostCluster(a, taint)
	}
	// The object exactly as it is about to be created: admitted here,
	// right before the create, or nothing is sent.
	blame := blamer(func() *unstructured.Unstructured {
		o := object(r.Rec, doc, gvk, a.Number)
		attempt.HandOver(o, r.Status.Move, a.Number)
		return o
	}, &doc.Spec, kept, restorePath)
	if err := s.authorize(ctx, row, r.Rec, doc, gvk, obj, blame); err != nil {
		return s.createFailed(a, err, mayLand)
	}
	var mark *time.Time
	var beforeSend func() error
	if atMostOne {
		beforeSend = func() error {
			at := s.now().Add(clusters.LandsWithin)
			if err := s.markSending(ctx, a, at); err != nil {
				return err
			}
			mark = &at
			return nil
		}
	}
	objectUID, err := s.create(ctx, row, obj, r.Rec.UID, beforeSend)
	if errors.Is(err, errAttemptEnded) {
		return verdict{next: true} // the next step sees what became of the runnable
	}
	if err != nil {
		if mark != nil {
			var undoErr error
			if mayLand, undoErr = s.mayLand(ctx, a, *mark, err); undoErr != nil {
				return retry(undoErr)
			}
		}
		return s.createFailed(a, err, mayLand)
	}
	s.clearFailures(a.RunnableUID, a.Number)
	s.markReachable(a.Cluster)
	ended := *a
	ended.ObjectUID = objectUID
	msg := fmt.Sprintf("created %s %s on %s (attempt %d)", gvk.Kind, ref(obj), a.Cluster, a.Number)
	t := &transition{
		phase: v1alpha1.PhaseSubmitted, message: msg, attempt: &ended,
		audit: &audit.Entry{Action: "submit", Summary: msg},
	}
	if atMostOne {
		// The cluster answered: the object exists, and the sends before
		// this one, of the same name, can create nothing more.
		answered := s.now()
		t.landedBy = &answered
	}
	// Should the write find the runnable moved, it was cancelled meanwhile
	// (the next step deletes what was just created) or another replica
	// got there first (nothing to do).
	return verdict{move: t}
}

// lostCluster handles an AtMostOne attempt whose cluster is tainted as not
// answering: nothing more is sent there. With nothing sent so far, the
// runnable is placed again at once; otherwise a create may still land, and
// the failover controller moves it once a copy there is certainly stopped.
func (s *Submitter) lostCluster(a *store.Attempt, taint string) verdict {
	if a.CreateLandedBy == nil {
		return s.endAttempt(a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterUnreachable,
			fmt.Sprintf("cluster %s does not answer (tainted %s), and nothing was sent to it for attempt %d; placing again", a.Cluster, taint, a.Number))
	}
	return retry(fmt.Errorf("cluster %s does not answer (tainted %s), and a create of attempt %d sent to it may still land; "+
		"with consistency AtMostOne nothing more is sent, and the failover controller moves the runnable once a copy there is certainly stopped",
		a.Cluster, taint, a.Number))
}

// markSending records that a create of attempt a is about to be sent and
// can take effect until mark (clusters.LandsWithin from now, which
// CreateMarked keeps to). errAttemptEnded: the attempt has ended meanwhile,
// and the create is not sent.
func (s *Submitter) markSending(ctx context.Context, a *store.Attempt, mark time.Time) error {
	var open bool
	err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		open, err = tx.Attempts().SetCreateLandedBy(ctx, a.RunnableUID, a.Number, mark)
		return err
	})
	if err == nil && !open {
		return errAttemptEnded
	}
	return err
}

// errAttemptEnded: the attempt a create was for ended before it was sent.
var errAttemptEnded = errors.New("the attempt ended before its create was sent")

// mayLand reports, after the create recorded as mark failed with
// createErr, whether a create of attempt a may still land. A create that
// never left (no connection could be opened) takes its mark back, so that
// a cluster that plainly refuses does not hold the runnable.
func (s *Submitter) mayLand(ctx context.Context, a *store.Attempt, mark time.Time, createErr error) (bool, error) {
	if !classify(createErr).notSent {
		return true, nil
	}
	err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Attempts().UndoCreateLandedBy(ctx, a.RunnableUID, a.Number, mark, a.CreateLandedBy)
	})
	return a.CreateLandedBy != nil, err
}

// unreachableTaint is the cluster's taint for not answering, as key:effect,
// or "".
func unreachableTaint(row *store.Cluster) string {
	var status v1alpha1.ClusterStatus
	if len(row.Status) == 0 || json.Unmarshal(row.Status, &status) != nil {
		return ""
	}
	for _, t := range status.Taints {
		if t.Key == v1alpha1.TaintUnreachable {
			return placement.TaintString(&t)
		}
	}
	return ""
}

// create sends the object to the cluster; with beforeSend, which records
// the create, as clusters.CreateMarked does.
func (s *Submitter) create(ctx context.Context, row *store.Cluster, obj *unstructured.Unstructured, runnableUID string, beforeSend func() error) (string, error) {
	cc, err := s.clients.Get(row)
	if err != nil {
		return "", err
	}
	var uid string
	send := func() (string, error) {
		if beforeSend != nil {
			return cc.CreateMarked(ctx, obj, runnableUID, beforeSend)
		}
		return cc.Create(ctx, obj, runnableUID)
	}
	uid, err = send()
	var older *clusters.OlderAttemptError
	if errors.As(err, &older) {
		// A rerun's earlier attempt left its ended copy under the name:
		// it goes (only that attempt's, by its label and uid), and the
		// create is sent again once.
		if _, rmErr := cc.Remove(ctx, obj.GroupVersionKind(), older.Namespace, older.Name, runnableUID, older.Attempt); rmErr != nil {
			return "", fmt.Errorf("remove attempt %d's copy of %s %s from %s: %w", older.Attempt, obj.GetKind(), ref(obj), row.Name, rmErr)
		}
		uid, err = send()
	}
	if errors.Is(err, errAttemptEnded) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("create %s %s on %s: %w", obj.GetKind(), ref(obj), row.Name, err)
	}
	return uid, nil
}

// createFailed ends the runnable on a permanent failure, and on a
// transient one retries, until the cluster has failed too often in a row:
// then the attempt ends and the runnable is placed again, elsewhere. An
// AtMostOne create that may land (mayLand) keeps its attempt: the failover
// controller moves it once the cluster is lost and a copy there fenced.
func (s *Submitter) createFailed(a *store.Attempt, err error, mayLand bool) verdict {
	f := classify(err)
	if f.permanent {
		s.clearFailures(a.RunnableUID, a.Number)
		return s.endAttempt(a, v1alpha1.PhaseFailed, ResultFailed, f.reason, f.message())
	}
	s.metrics.retries.WithLabelValues(f.reason).Inc()
	if f.unreachable {
		s.markUnreachable(a.Cluster)
	}
	key := attemptKey{a.RunnableUID, a.Number}
	s.mu.Lock()
	s.failures[key]++
	n := s.failures[key]
	s.mu.Unlock()
	if n < maxClusterFailures {
		return retry(f.retry())
	}
	if mayLand {
		s.markUnreachable(a.Cluster) // kept out of placement all the same
		return retry(f.retry())
	}
	// The attempt's cluster failed every try: keep it out of placement
	// for a while, whatever the error was, so the next placement goes
	// elsewhere.
	s.markUnreachable(a.Cluster)
	s.clearFailures(a.RunnableUID, a.Number)
	return s.endAttempt(a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterUnreachable,
		fmt.Sprintf("cluster %s failed %d times in a row (%s); placing again", a.Cluster, n, f.message()))
}

func (s *Submitter) clearFailures(uid string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failures, attemptKey{uid, number})
}

// endAttempt closes attempt a with result and reason and moves the
// runnable to phase: Failed (audited as "fail") or Queued (audited as
// "requeue", and placed again right away).
func (s *Submitter) endAttempt(a *store.Attempt, phase v1alpha1.Phase, result, reason, message string) verdict {
	now := s.now()
	ended := *a
	ended.EndedAt, ended.Result, ended.Reason, ended.Message = &now, result, reason, message
	if reason == ReasonClusterUnreachable {
		// A create whose answer was lost may have landed: the controller
		// removes that copy once the cluster answers again, so that it
		// never runs beside the next attempt for long.
		ended.Cleanup = store.CleanupPending
	}
	t := &transition{phase: phase, message: message, attempt: &ended}
	summary := fmt.Sprintf("attempt %d on %s ended (%s): %s", a.Number, a.Cluster, reason, message)
	if phase == v1alpha1.PhaseQueued {
		cluster := ""
		t.cluster = &cluster
		t.audit = &audit.Entry{Action: "requeue", Summary: summary}
	} else {
		t.audit = &audit.Entry{Action: "fail", Summary: summary}
	}
	return verdict{move: t, next: phase == v1alpha1.PhaseQueued}
}

// cancel removes a Cancelled runnable's object from its cluster and closes
// its attempt. It runs on every cancel message, even once the attempt is
// closed, because a create that was in flight when the runnable was
// cancelled may have landed after the first removal.
func (s *Submitter) cancel(ctx context.Context, r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	var a *store.Attempt
	if n := len(attempts); n > 0 {
		a = attempts[n-1]
	}
	if a == nil || (a.EndedAt != nil && a.Result != ResultCancelled) {
		// Never placed, or its last attempt ended before the cancel
		// (failed, moved away): nothing of it is on a cluster.
		return verdict{}
	}
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return s.closeCancelled(a, "nothing to delete: "+err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return s.closeCancelled(a, fmt.Sprintf("cluster %s was removed; nothing to delete", a.Cluster))
	}
	if err != nil {
		return retry(err)
	}
	obj := object(r.Rec, doc, gvk, a.Number)
	cc, err := s.clients.Get(row)
	if err != nil {
		return retry(err)
	}
	deleted, err := cc.Remove(ctx, gvk, obj.GetNamespace(), obj.GetName(), r.Rec.UID, 0)
	if err != nil {
		f := classify(fmt.Errorf("delete %s %s from %s: %w", gvk.Kind, ref(obj), a.Cluster, err))
		if !f.permanent {
			s.metrics.retries.WithLabelValues(f.reason).Inc()
			return retry(f.retry())
		}
		// Forbidden and the like: say so on the attempt rather than retry
		// forever; the object is the operator's to remove.
		return s.closeCancelled(a, "could not delete the object: "+f.message())
	}
	msg := fmt.Sprintf("%s %s was not on %s", gvk.Kind, ref(obj), a.Cluster)
	if deleted {
		msg = fmt.Sprintf("deleted %s %s from %s", gvk.Kind, ref(obj), a.Cluster)
	}
	return s.closeCancelled(a, msg)
}

// closeCancelled ends the attempt of a cancelled runnable, once.
func (s *Submitter) closeCancelled(a *store.Attempt, msg string) verdict {
	if a.EndedAt != nil {
		return verdict{}
	}
	now := s.now()
	ended := *a
	ended.EndedAt, ended.Result, ended.Reason, ended.Message = &now, ResultCancelled, "Cancelled", msg
	return verdict{move: &transition{
		phase: v1alpha1.PhaseCancelled, attempt: &ended,
		audit: &audit.Entry{Action: "delete", Summary: fmt.Sprintf("cancelled attempt %d on %s: %s", a.Number, a.Cluster, msg)},
	}}
}

// transition is one change of a runnable: a lifecycle move made by the
// submitter.
type transition struct {
	phase   v1alpha1.Phase
	cluster *string // nil keeps the runnable's cluster
	message string  // "" keeps the status message
	attempt *store.Attempt
	audit   *audit.Entry // Action, Summary
	// landedBy, when set, is the attempt's new CreateLandedBy.
	landedBy *time.Time
	// requests, when set, is the runnable's new status.requests.
	requests map[string]string
	// suspension, when set, replaces the status' suspension;
	// clearSuspension removes it (suspend.go).
	suspension      *v1alpha1.Suspension
	clearSuspension bool
	// retries, when set, replaces status.retries; freshStatus clears what
	// the failed attempt observed (retry.go).
	retries     *v1alpha1.RetryStatus
	freshStatus bool
	// update, when set, replaces status.update; applied records the
	// generation the attempt's object now carries (update.go).
	update  *v1alpha1.Update
	applied *appliedGeneration
	// recheck, when set, runs in the transaction before the move is
	// written; errSumsStale aborts it (sums.go).
	recheck func(ctx context.Context, tx *store.Tx) error
}

// edit is the change of status beyond phase, cluster and message; nil
// when there is none.
func (t *transition) edit() func(st *v1alpha1.RunnableStatus) error {
	if t.requests == nil && t.suspension == nil && !t.clearSuspension && t.retries == nil && !t.freshStatus && t.update == nil {
		return nil
	}
	return func(st *v1alpha1.RunnableStatus) error {
		if t.freshStatus {
			*st = v1alpha1.RunnableStatus{Message: st.Message, ApprovedBy: st.ApprovedBy, ApprovedGeneration: st.ApprovedGeneration, Requests: st.Requests}
		}
		if t.requests != nil {
			st.Requests = t.requests
		}
		if t.suspension != nil || t.clearSuspension {
			st.Suspension = t.suspension
		}
		if t.retries != nil {
			st.Retries = t.retries
		}
		if t.update != nil {
			st.Update = t.update
		}
		return nil
	}
}

// write writes t if the runnable is still as r found it; otherwise it
// writes nothing and reports moved, so the caller reads it again. The
// metrics count what was written.
func (s *Submitter) write(ctx context.Context, r *lifecycle.Runnable, t *transition) (moved bool, err error) {
	var next *lifecycle.Runnable
	err = s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		if t.recheck != nil {
			if err := t.recheck(ctx, tx); err != nil {
				return err
			}
		}
		lt := lifecycle.Transition{
			To: t.phase, By: lifecycle.BySubmitter, Cluster: t.cluster, Message: t.message,
			Attempt: t.attempt, Audit: t.audit, Edit: t.edit(),
		}
		var err error
		next, err = lifecycle.Apply(ctx, tx, r, lt)
		if err == nil && t.landedBy != nil {
			_, err = tx.Attempts().SetCreateLandedBy(ctx, t.attempt.RunnableUID, t.attempt.Number, *t.landedBy)
		}
		if err == nil && t.applied != nil {
			var open bool
			if open, err = tx.Attempts().SetGeneration(ctx, r.Rec.UID, t.applied.number, t.applied.generation); err == nil && !open {
				err = store.ErrMoved // the attempt ended meanwhile: read it again
			}
		}
		return err
	})
	if errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound) {
		return true, nil // changed or deleted: the next read says which
	}
	if errors.Is(err, errSumsStale) {
		// The sums missed a move (another replica's placement, most
		// likely): caught up at once, and the runnable placed again.
		s.metrics.sumsDivergence.WithLabelValues("recheck").Inc()
		s.log.Info("a placement's re-check disagreed with the kept sums; catching up and placing again", "runnable", r.Rec.UID, "error", err)
		if _, err := s.catchUp(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	s.applyWritten(next.Rec)
	switch t.phase {
	case v1alpha1.PhaseScheduled:
		if r.Phase() == v1alpha1.PhaseQueued {
			s.metrics.attempts.WithLabelValues(t.attempt.Cluster).Inc()
		}
	case v1alpha1.PhaseSubmitted, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired:
		s.metrics.outcomes.WithLabelValues(string(t.phase)).Inc()
	}
	return false, nil
}

// openAttempt is the attempt a Scheduled runnable is on: its last one,
// provided it has not ended.
func openAttempt(attempts []*store.Attempt) *store.Attempt {
	if n := len(attempts); n > 0 && attempts[n-1].EndedAt == nil {
		return attempts[n-1]
	}
	return nil
}

// preserved is the state kept from the runnable's earlier attempts.
func preserved(r *lifecycle.Runnable) (map[string]string, string) {
	path := ""
	if p := r.Status.RestorePoint; p != nil {
		path = p.Path
	}
	return r.Status.Preserved, path
}

// carriedIn is what the next attempt starts with, for its record: the
// preserved values and the restore point's path.
func carriedIn(r *lifecycle.Runnable) map[string]string {
	kept, path := preserved(r)
	if len(kept) == 0 && path == "" {
		return nil
	}
	out := maps.Clone(kept)
	if out == nil {
		out = map[string]string{}
	}
	if path != "" {
		out[attempt.RestorePathKey] = path
	}
	return out
}

func carriedString(c map[string]string) string {
	if len(c) == 0 {
		return "no state (a fresh start)"
	}
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c[k]
	}
	return strings.Join(parts, ", ")
}

// failoverDetails is the place entry's record of a failover.
func failoverDetails(prev *store.Attempt, target string, number int, carried map[string]string) json.RawMessage {
	d := map[string]any{"fromAttempt": prev.Number, "sourceCluster": prev.Cluster, "reason": prev.Reason,
		"targetCluster": target, "attempt": number}
	if len(carried) > 0 {
		d["carriedIn"] = carried
	}
	if p := carried[attempt.RestorePathKey]; p != "" {
		d["restorePath"] = p
	}
	b, _ := json.Marshal(d) // strings and numbers only
	return b
}
