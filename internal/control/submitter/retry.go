package submitter

import (
	"fmt"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// retryFailed judges a Failed runnable's failure by spec.retry (or its
// defaults, operate.DecideRetry) once per attempt: a retry places it
// again as a new attempt (Queued, after spec.retry.backoff), anything
// else records the decision and leaves it Failed. Only failures the
// ingester saw on a created object are judged: one the submitter itself
// decided (an invalid spec, a kind no cluster serves) would fail again.
// The class is read from the object's last status, as the inventory kept
// it (operate.ClassifyFailure says what that can tell).
func (s *Submitter) retryFailed(r *lifecycle.Runnable, attempts []*store.Attempt) verdict {
	n := len(attempts)
	if n == 0 {
		return verdict{}
	}
	a := attempts[n-1]
	if a.EndedAt == nil || a.Result != string(v1alpha1.PhaseFailed) || a.ObjectUID == "" || a.Reason != "" {
		return verdict{}
	}
	if so := r.Status.Retries; so != nil && so.Last != nil && so.Last.Attempt == a.Number {
		return verdict{} // judged already
	}
	doc, gvk, err := decode(r.Rec)
	if err != nil {
		return verdict{}
	}
	f := operate.ClassifyFailure(gvk.GroupKind(), r.Status.Result)
	v := operate.DecideRetry(doc.Spec.Retry, f, r.Status.Retries)
	next := v1alpha1.RetryStatus{}
	if r.Status.Retries != nil {
		next = *r.Status.Retries
	}
	if doc.Spec.Retry != nil {
		next.Limit = doc.Spec.Retry.Limit
	}
	next.NotBefore = nil
	next.Last = &v1alpha1.RetryDecision{Attempt: a.Number, Class: f.Class, Reason: f.Reason, ExitCode: f.ExitCode, Action: v.Action, Why: v.Why}
	judged := *a
	judged.Reason, judged.Message = f.Class, f.Reason
	details := fmt.Sprintf("attempt %d on %s failed (%s: %s)", a.Number, a.Cluster, f.Class, f.Reason)
	if !v.Retries() {
		return verdict{move: &transition{
			phase: v1alpha1.PhaseFailed, attempt: &judged, retries: &next,
			message: details + "; not retried: " + v.Why,
			audit:   &audit.Entry{Action: "no-retry", Summary: details + "; not retried: " + v.Why},
		}}
	}
	if v.Spends {
		next.Used++
	} else {
		next.Free++
	}
	wait := time.Duration(0)
	if doc.Spec.Retry != nil && doc.Spec.Retry.Backoff != "" {
		wait, _ = time.ParseDuration(doc.Spec.Retry.Backoff) // validated on submit
	}
	if wait > 0 {
		at := s.now().Add(wait)
		next.NotBefore = &at
	}
	budget := fmt.Sprintf("retry %d of %d", next.Used, next.Limit)
	if !v.Spends {
		budget = "a retry that spends no budget (" + fmt.Sprintf("%d of %d spent", next.Used, next.Limit) + ")"
	}
	summary := fmt.Sprintf("%s; %s as attempt %d: %s", details, budget, a.Number+1, v.Why)
	cluster := ""
	return verdict{next: true, move: &transition{
		phase: v1alpha1.PhaseQueued, cluster: &cluster, attempt: &judged, retries: &next, freshStatus: true,
		message: summary,
		audit:   &audit.Entry{Action: "retry", Summary: summary},
	}}
}

// retryHold is how a Queued runnable that is being retried is placed:
// not before spec.retry.backoff has passed (the wait, when positive), and
// off the failed attempt's cluster for RetryElsewhere.
func retryHold(r *lifecycle.Runnable, attempts []*store.Attempt, p v1alpha1.Placement, now time.Time) (v1alpha1.Placement, time.Duration) {
	so := r.Status.Retries
	n := len(attempts)
	if so == nil || so.Last == nil || n == 0 || so.Last.Attempt != attempts[n-1].Number {
		return p, 0
	}
	if so.NotBefore != nil && now.Before(*so.NotBefore) {
		return p, so.NotBefore.Sub(now)
	}
	if so.Last.Action == v1alpha1.RetryActionRetryElsewhere {
		p = attempt.Excluding(p, attempts[n-1].Cluster)
	}
	return p, 0
}
