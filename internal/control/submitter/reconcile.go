package submitter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/lifecycle"
	"github.com/purser-io/purser/internal/control/placement"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
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

type runnableDoc = store.Document[v1alpha1.RunnableSpec]

// reconcile moves the runnable uid on from the phase it is in, following
// its own changes (Queued -> Scheduled -> Submitted) within one call. It
// returns nil when nothing is left to do now, and an error (a *failure
// when it came from a cluster) when the caller should retry later.
func (s *Submitter) reconcile(ctx context.Context, uid string) error {
	for range maxSteps {
		again, err := s.step(ctx, uid)
		if err != nil || !again {
			return err
		}
	}
	return fmt.Errorf("runnable %s: still changing after %d steps; retrying", uid, maxSteps)
}

// step reads the runnable and does the one thing its phase calls for. It
// reports whether the runnable changed in a way that calls for another
// step right away.
func (s *Submitter) step(ctx context.Context, uid string) (bool, error) {
	var rec *store.Runnable
	var attempts []*store.Attempt
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rec, err = tx.GetRunnableByUID(ctx, uid); err != nil {
			return err
		}
		attempts, err = tx.ListAttempts(ctx, uid)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // deleted: nothing to do
	}
	if err != nil {
		return false, err
	}
	switch v1alpha1.Phase(rec.Phase) {
	case v1alpha1.PhaseQueued:
		return s.place(ctx, rec, attempts)
	case v1alpha1.PhaseScheduled:
		return s.submit(ctx, rec, attempts)
	case v1alpha1.PhaseCancelled:
		return s.cancel(ctx, rec, attempts)
	}
	// PendingApproval waits for the API; Submitted and later belong to
	// the ingester and the controller.
	return false, nil
}

// place decides where a Queued runnable goes, or why it cannot go yet.
func (s *Submitter) place(ctx context.Context, rec *store.Runnable, attempts []*store.Attempt) (bool, error) {
	doc, gvk, err := decode(rec)
	if err != nil {
		return s.apply(ctx, rec, transition{
			phase: v1alpha1.PhaseFailed, message: err.Error(),
			audit: &audit.Entry{Action: "fail", Summary: "failed: " + err.Error()},
		})
	}
	now := s.now()
	if d := doc.Spec.Deadline; d != nil && now.After(*d) {
		msg := fmt.Sprintf("deadline %s passed before the runnable could be submitted; it was never created", d.UTC().Format(time.RFC3339))
		s.metrics.outcomes.WithLabelValues(string(v1alpha1.PhaseExpired)).Inc()
		return s.apply(ctx, rec, transition{
			phase: v1alpha1.PhaseExpired, message: msg,
			audit: &audit.Entry{Action: "expire", Summary: "expired: " + msg},
		})
	}

	start := time.Now()
	cands, err := s.candidates(ctx, gvk)
	if err != nil {
		return false, err
	}
	p := doc.Spec.Placement
	if n := len(attempts); n > 0 && attempts[n-1].Result == attempt.ResultEvicted {
		// The cluster the runnable was just moved off is not the next
		// attempt's: that is what the eviction was for.
		p = attempt.Excluding(p, attempts[n-1].Cluster)
	}
	decision := placement.Choose(p, gvk.String(), cands)
	s.metrics.placementSeconds.Observe(time.Since(start).Seconds())

	if decision.Cluster == "" {
		if servedNowhere(decision) {
			msg := fmt.Sprintf("no cluster serves %s: %s", gvk, decision.Reason)
			s.metrics.outcomes.WithLabelValues(string(v1alpha1.PhaseFailed)).Inc()
			return s.apply(ctx, rec, transition{
				phase: v1alpha1.PhaseFailed, message: msg,
				audit: &audit.Entry{Action: "fail", Summary: "failed: " + msg},
			})
		}
		// Stays Queued; the rescan brings it back. The message is only
		// written when it changes, so waiting costs no writes.
		if statusMessage(rec) == decision.Reason {
			return false, nil
		}
		_, err := s.apply(ctx, rec, transition{phase: v1alpha1.PhaseQueued, message: decision.Reason})
		return false, err
	}

	number := 1
	if n := len(attempts); n > 0 {
		number = attempts[n-1].Number + 1
	}
	cluster := decision.Cluster
	carried, err := carriedIn(rec)
	if err != nil {
		return false, err
	}
	entry := &audit.Entry{
		Action:  "place",
		Summary: fmt.Sprintf("placed attempt %d on %s: %s", number, cluster, decision.Reason),
	}
	if n := len(attempts); n > 0 && attempts[n-1].Result == attempt.ResultEvicted {
		// The failover's second half: the target cluster, beside the
		// source and reason of the evict entry, and what is carried.
		prev := attempts[n-1]
		entry.Summary = fmt.Sprintf("failover of attempt %d from %s (%s) to %s as attempt %d, carrying %s",
			prev.Number, prev.Cluster, prev.Reason, cluster, number, carriedString(carried))
		entry.Details = failoverDetails(prev, cluster, number, carried)
	}
	// Committed or not, the next step follows at once: the create on the
	// chosen cluster, or a look at whatever changed the runnable.
	moved, err := s.apply(ctx, rec, transition{
		phase: v1alpha1.PhaseScheduled, cluster: &cluster,
		message: fmt.Sprintf("attempt %d placed on %s: %s", number, cluster, decision.Reason),
		attempt: &store.Attempt{
			RunnableUID: rec.UID, Number: number, Cluster: cluster, StartedAt: now, Message: decision.Reason,
			CarriedIn: carried,
		},
		audit: entry,
	})
	if err == nil && !moved {
		s.metrics.attempts.WithLabelValues(cluster).Inc()
	}
	return err == nil, err
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
func (s *Submitter) submit(ctx context.Context, rec *store.Runnable, attempts []*store.Attempt) (bool, error) {
	a := openAttempt(attempts)
	if a == nil {
		// Scheduled always comes with an open attempt; if something broke
		// that, placing again is the way back to a consistent state.
		cluster := ""
		_, err := s.apply(ctx, rec, transition{
			phase: v1alpha1.PhaseQueued, cluster: &cluster,
			message: "scheduled without an open attempt; placing again",
		})
		return err == nil, err
	}
	doc, gvk, err := decode(rec)
	if err != nil {
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseFailed, ResultFailed, "InvalidSpec", err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterRemoved,
			fmt.Sprintf("cluster %s was removed before the object was created; placing again", a.Cluster))
	}
	if err != nil {
		return false, err
	}
	obj := object(rec, doc, gvk, a.Number)
	kept, restorePath, err := preserved(rec)
	if err != nil {
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseFailed, ResultFailed, "InvalidStatus", err.Error())
	}
	if err := attempt.Prepare(obj, &doc.Spec, kept, restorePath); err != nil {
		msg := "the failover settings cannot be applied to the next attempt: " + err.Error()
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseFailed, ResultFailed, "InvalidFailover", msg)
	}
	// An AtMostOne create sent to a cluster that stopped answering may
	// land at any moment, so its attempt is not left for another one here.
	atMostOne := attempt.Consistency(&doc.Spec) == v1alpha1.ConsistencyAtMostOne
	mayLand := atMostOne && a.CreateLandedBy != nil
	if taint := unreachableTaint(row); atMostOne && taint != "" {
		return s.lostCluster(ctx, rec, a, taint)
	}
	if err := s.authorize(ctx, row, rec, doc, gvk); err != nil {
		return s.createFailed(ctx, rec, a, err, mayLand)
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
	objectUID, err := s.create(ctx, row, obj, rec.UID, beforeSend)
	if errors.Is(err, errAttemptEnded) {
		return true, nil // the next step sees what became of the runnable
	}
	if err != nil {
		if mark != nil {
			var undoErr error
			if mayLand, undoErr = s.mayLand(ctx, a, *mark, err); undoErr != nil {
				return false, undoErr
			}
		}
		return s.createFailed(ctx, rec, a, err, mayLand)
	}
	s.clearFailures(rec.UID, a.Number)
	s.markReachable(a.Cluster)
	ended := *a
	ended.ObjectUID = objectUID
	msg := fmt.Sprintf("created %s %s on %s (attempt %d)", gvk.Kind, ref(obj), a.Cluster, a.Number)
	t := transition{
		phase: v1alpha1.PhaseSubmitted, message: msg, attempt: &ended,
		audit: &audit.Entry{Action: "submit", Summary: msg},
	}
	if atMostOne {
		// The cluster answered: the object exists, and the sends before
		// this one, of the same name, can create nothing more.
		answered := s.now()
		t.landedBy = &answered
	}
	moved, err := s.apply(ctx, rec, t)
	if err == nil && !moved {
		s.metrics.outcomes.WithLabelValues(string(v1alpha1.PhaseSubmitted)).Inc()
	}
	// moved: cancelled meanwhile (the next step deletes what was just
	// created) or another replica got there first (nothing to do).
	return moved, err
}

// lostCluster handles an AtMostOne attempt whose cluster is tainted as not
// answering: nothing more is sent there. With nothing sent so far, the
// runnable is placed again at once; otherwise a create may still land, and
// the failover controller moves it once a copy there is certainly stopped.
func (s *Submitter) lostCluster(ctx context.Context, rec *store.Runnable, a *store.Attempt, taint string) (bool, error) {
	if a.CreateLandedBy == nil {
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterUnreachable,
			fmt.Sprintf("cluster %s does not answer (tainted %s), and nothing was sent to it for attempt %d; placing again", a.Cluster, taint, a.Number))
	}
	return false, fmt.Errorf("cluster %s does not answer (tainted %s), and a create of attempt %d sent to it may still land; "+
		"with consistency AtMostOne nothing more is sent, and the failover controller moves the runnable once a copy there is certainly stopped",
		a.Cluster, taint, a.Number)
}

// markSending records that a create of attempt a is about to be sent and
// can take effect until mark (clusters.LandsWithin from now, which
// CreateMarked keeps to). errAttemptEnded: the attempt has ended meanwhile,
// and the create is not sent.
func (s *Submitter) markSending(ctx context.Context, a *store.Attempt, mark time.Time) error {
	var open bool
	err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		open, err = tx.SetCreateLandedBy(ctx, a.RunnableUID, a.Number, mark)
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
		return tx.UndoCreateLandedBy(ctx, a.RunnableUID, a.Number, mark, a.CreateLandedBy)
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
	if beforeSend != nil {
		uid, err = cc.CreateMarked(ctx, obj, runnableUID, beforeSend)
	} else {
		uid, err = cc.Create(ctx, obj, runnableUID)
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
func (s *Submitter) createFailed(ctx context.Context, rec *store.Runnable, a *store.Attempt, err error, mayLand bool) (bool, error) {
	f := classify(err)
	if f.permanent {
		s.clearFailures(rec.UID, a.Number)
		s.metrics.outcomes.WithLabelValues(string(v1alpha1.PhaseFailed)).Inc()
		return s.endAttempt(ctx, rec, a, v1alpha1.PhaseFailed, ResultFailed, f.reason, f.message())
	}
	s.metrics.retries.WithLabelValues(f.reason).Inc()
	if f.unreachable {
		s.markUnreachable(a.Cluster)
	}
	key := attemptKey{rec.UID, a.Number}
	s.mu.Lock()
	s.failures[key]++
	n := s.failures[key]
	s.mu.Unlock()
	if n < maxClusterFailures {
		return false, f
	}
	if mayLand {
		s.markUnreachable(a.Cluster) // kept out of placement all the same
		return false, f
	}
	// The attempt's cluster failed every try: keep it out of placement
	// for a while, whatever the error was, so the next placement goes
	// elsewhere.
	s.markUnreachable(a.Cluster)
	s.clearFailures(rec.UID, a.Number)
	return s.endAttempt(ctx, rec, a, v1alpha1.PhaseQueued, ResultFailed, ReasonClusterUnreachable,
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
func (s *Submitter) endAttempt(ctx context.Context, rec *store.Runnable, a *store.Attempt, phase v1alpha1.Phase, result, reason, message string) (bool, error) {
	now := s.now()
	ended := *a
	ended.EndedAt, ended.Result, ended.Reason, ended.Message = &now, result, reason, message
	if reason == ReasonClusterUnreachable {
		// A create whose answer was lost may have landed: the controller
		// removes that copy once the cluster answers again, so that it
		// never runs beside the next attempt for long.
		ended.Cleanup = store.CleanupPending
	}
	t := transition{phase: phase, message: message, attempt: &ended}
	summary := fmt.Sprintf("attempt %d on %s ended (%s): %s", a.Number, a.Cluster, reason, message)
	if phase == v1alpha1.PhaseQueued {
		cluster := ""
		t.cluster = &cluster
		t.audit = &audit.Entry{Action: "requeue", Summary: summary}
	} else {
		t.audit = &audit.Entry{Action: "fail", Summary: summary}
	}
	moved, err := s.apply(ctx, rec, t)
	return moved || (err == nil && phase == v1alpha1.PhaseQueued), err
}

// cancel removes a Cancelled runnable's object from its cluster and closes
// its attempt. It runs on every cancel message, even once the attempt is
// closed, because a create that was in flight when the runnable was
// cancelled may have landed after the first removal.
func (s *Submitter) cancel(ctx context.Context, rec *store.Runnable, attempts []*store.Attempt) (bool, error) {
	var a *store.Attempt
	if n := len(attempts); n > 0 {
		a = attempts[n-1]
	}
	if a == nil || (a.EndedAt != nil && a.Result != ResultCancelled) {
		// Never placed, or its last attempt ended before the cancel
		// (failed, moved away): nothing of it is on a cluster.
		return false, nil
	}
	doc, gvk, err := decode(rec)
	if err != nil {
		return s.closeCancelled(ctx, rec, a, "nothing to delete: "+err.Error())
	}
	row, err := s.clusterRow(ctx, a.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return s.closeCancelled(ctx, rec, a, fmt.Sprintf("cluster %s was removed; nothing to delete", a.Cluster))
	}
	if err != nil {
		return false, err
	}
	obj := object(rec, doc, gvk, a.Number)
	cc, err := s.clients.Get(row)
	if err != nil {
		return false, err
	}
	deleted, err := cc.Remove(ctx, gvk, obj.GetNamespace(), obj.GetName(), rec.UID, 0)
	if err != nil {
		f := classify(fmt.Errorf("delete %s %s from %s: %w", gvk.Kind, ref(obj), a.Cluster, err))
		if !f.permanent {
			s.metrics.retries.WithLabelValues(f.reason).Inc()
			return false, f
		}
		// Forbidden and the like: say so on the attempt rather than retry
		// forever; the object is the operator's to remove.
		return s.closeCancelled(ctx, rec, a, "could not delete the object: "+f.message())
	}
	if a.EndedAt != nil {
		return false, nil
	}
	msg := fmt.Sprintf("%s %s was not on %s", gvk.Kind, ref(obj), a.Cluster)
	if deleted {
		msg = fmt.Sprintf("deleted %s %s from %s", gvk.Kind, ref(obj), a.Cluster)
	}
	return s.closeCancelled(ctx, rec, a, msg)
}

// closeCancelled ends the attempt of a cancelled runnable, once.
func (s *Submitter) closeCancelled(ctx context.Context, rec *store.Runnable, a *store.Attempt, msg string) (bool, error) {
	if a.EndedAt != nil {
		return false, nil
	}
	now := s.now()
	ended := *a
	ended.EndedAt, ended.Result, ended.Reason, ended.Message = &now, ResultCancelled, "Cancelled", msg
	return s.apply(ctx, rec, transition{
		phase: v1alpha1.PhaseCancelled, attempt: &ended,
		audit: &audit.Entry{Action: "delete", Summary: fmt.Sprintf("cancelled attempt %d on %s: %s", a.Number, a.Cluster, msg)},
	})
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
}

// apply writes t if the runnable is still as rec found it; otherwise it
// writes nothing and reports moved, so the caller reads it again.
func (s *Submitter) apply(ctx context.Context, rec *store.Runnable, t transition) (moved bool, err error) {
	r, err := lifecycle.Decode(rec)
	if err != nil {
		return false, err
	}
	err = s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		_, err := lifecycle.Apply(ctx, tx, r, lifecycle.Transition{
			To: t.phase, By: lifecycle.BySubmitter, Cluster: t.cluster, Message: t.message,
			Attempt: t.attempt, Audit: t.audit,
		})
		if err == nil && t.landedBy != nil {
			_, err = tx.SetCreateLandedBy(ctx, t.attempt.RunnableUID, t.attempt.Number, *t.landedBy)
		}
		return err
	})
	if errors.Is(err, store.ErrMoved) {
		return true, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return false, err
}

// openAttempt is the attempt a Scheduled runnable is on: its last one,
// provided it has not ended.
func openAttempt(attempts []*store.Attempt) *store.Attempt {
	if n := len(attempts); n > 0 && attempts[n-1].EndedAt == nil {
		return attempts[n-1]
	}
	return nil
}

// decode reads a runnable's stored spec and its template's kind.
func decode(rec *store.Runnable) (*runnableDoc, schema.GroupVersionKind, error) {
	var doc runnableDoc
	// Numbers stay json.Number, so that the template reaches the cluster
	// digit for digit (float64 would round integers above 2^53).
	dec := json.NewDecoder(bytes.NewReader(rec.Spec))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("stored spec does not decode: %w", err)
	}
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || apiVersion == "" {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("template has no valid apiVersion and kind")
	}
	return &doc, gv.WithKind(kind), nil
}

func statusMessage(rec *store.Runnable) string {
	r, err := lifecycle.Decode(rec)
	if err != nil {
		return ""
	}
	return r.Status.Message
}

// preserved is the state kept from the runnable's earlier attempts.
func preserved(rec *store.Runnable) (map[string]string, string, error) {
	r, err := lifecycle.Decode(rec)
	if err != nil {
		return nil, "", err
	}
	path := ""
	if p := r.Status.RestorePoint; p != nil {
		path = p.Path
	}
	return r.Status.Preserved, path, nil
}

// carriedIn is what the next attempt starts with, for its record: the
// preserved values and the restore point's path.
func carriedIn(rec *store.Runnable) (map[string]string, error) {
	kept, path, err := preserved(rec)
	if err != nil || (len(kept) == 0 && path == "") {
		return nil, err
	}
	out := maps.Clone(kept)
	if out == nil {
		out = map[string]string{}
	}
	if path != "" {
		out[attempt.RestorePathKey] = path
	}
	return out, nil
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

// object builds what is created on the cluster: the template, named after
// its own metadata.name or else the runnable, in the runnable's namespace,
// with purser's labels. Metadata is rebuilt from the template's name,
// labels and annotations only, so that nothing else a user put there (uid,
// resourceVersion, ownerReferences) reaches the cluster.
func object(rec *store.Runnable, doc *runnableDoc, gvk schema.GroupVersionKind, attempt int) *unstructured.Unstructured {
	tmpl := doc.Spec.Template
	obj := &unstructured.Unstructured{Object: maps.Clone(tmpl)}
	name := v1alpha1.ObjectName(tmpl, rec.Name)
	var labels, annotations map[string]string
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		labels = stringMap(md["labels"])
		annotations = stringMap(md["annotations"])
	}
	obj.Object["metadata"] = map[string]any{}
	obj.SetGroupVersionKind(gvk)
	obj.SetName(name)
	obj.SetNamespace(rec.Namespace)
	if labels == nil {
		labels = map[string]string{}
	}
	if len(validation.IsValidLabelValue(rec.Name)) == 0 {
		labels[v1alpha1.LabelRunnable] = rec.Name
	}
	labels[v1alpha1.LabelRunnableNamespace] = rec.Namespace
	labels[v1alpha1.LabelRunnableUID] = rec.UID
	labels[v1alpha1.LabelAttempt] = strconv.Itoa(attempt)
	obj.SetLabels(labels)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.AnnotationRunnable] = rec.Namespace + "/" + rec.Name
	obj.SetAnnotations(annotations)
	delete(obj.Object, "status")
	return obj
}

func stringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}

func ref(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
