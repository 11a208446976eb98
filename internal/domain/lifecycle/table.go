package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Cause is who makes a runnable move. Components decide when; the table
// says which moves each may make.
type Cause string

// Causes, also the audit log's actor unless a Transition names a person.
const (
	ByAPI        Cause = "api"
	BySubmitter  Cause = "submitter"
	ByIngester   Cause = "ingester"
	ByController Cause = "controller"
	ByRetention  Cause = "retention"
)

// Pseudo-phases of the table: before a runnable exists, and after its
// record is removed. They are never stored.
const (
	New     v1alpha1.Phase = "(new)"
	Removed v1alpha1.Phase = "(removed)"
)

// Move is one row of the table: a runnable in one of From may go to To
// when By causes it. A row with To equal to one of From is a change that
// keeps the phase (a message, an attempt, the observed result).
type Move struct {
	From []v1alpha1.Phase
	To   v1alpha1.Phase
	By   Cause
	// Audited: the move is not written without an audit entry. Moves
	// that only record what was observed may carry one, need not.
	Audited bool
	// Why says what the row is for.
	Why string
}

// Phases a runnable may be in, for rows that apply to all of them.
var (
	waiting  = v1alpha1.WaitingPhases
	placed   = v1alpha1.PlacedPhases
	occupied = []v1alpha1.Phase{v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning}
	ended    = v1alpha1.EndedPhases
	every    = v1alpha1.RunnablePhases
	// rerunnable: ended phases a rerun may start again from (a rejected
	// runnable was never accepted).
	rerunnable = phases(v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCancelled)
	// running: phases whose attempt's object may take a change in place.
	running = phases(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended)
	// changeable: phases a user's change of spec may reach, at once or,
	// where the namespace needs approval, once approved.
	changeable = slices.Concat(phases(v1alpha1.PhaseQueued), running, ended)
)

func phases(p ...v1alpha1.Phase) []v1alpha1.Phase { return p }

// Table is every move a runnable can make. docs/lifecycle.md shows it, and
// a test keeps the two the same.
var Table = []Move{
	{phases(New), v1alpha1.PhaseQueued, ByAPI, true, "accepted; waits for a cluster"},
	{phases(New), v1alpha1.PhasePendingApproval, ByAPI, true, "accepted in a namespace that needs approval"},
	{phases(v1alpha1.PhasePendingApproval), v1alpha1.PhaseQueued, ByAPI, true, "approved by another user"},
	{phases(v1alpha1.PhasePendingApproval), v1alpha1.PhaseRejected, ByAPI, true, "rejected by another user"},
	{slices.Concat(waiting, placed, phases(v1alpha1.PhaseSuspended, v1alpha1.PhaseFailingOver)), v1alpha1.PhaseCancelled, ByAPI, true, "cancelled by a user"},
	{slices.Concat(placed, phases(v1alpha1.PhaseFailingOver)), Same, ByAPI, true, "a person confirms that the copy on an unreachable cluster stopped; the controller moves it at once"},
	{ended, Removed, ByAPI, true, "an ended runnable deleted by a user; its history stays"},
	{occupied, v1alpha1.PhaseSuspended, ByAPI, true, "suspended by a user; the submitter sets the kind's own suspend field on its cluster"},
	{phases(v1alpha1.PhaseSuspended), Same, ByAPI, true, "resume asked by a user; the submitter clears the kind's suspend field"},
	{rerunnable, v1alpha1.PhaseQueued, ByAPI, true, "rerun by a user: a new attempt with the current spec; the attempts' history stays"},
	{rerunnable, v1alpha1.PhasePendingApproval, ByAPI, true, "rerun by a user in a namespace that needs approval"},
	{slices.Concat(phases(v1alpha1.PhaseQueued), ended), Same, ByAPI, true, "its spec changed by a user (PUT); its next attempt uses it"},
	{phases(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended), Same, ByAPI, true, "its spec changed by a user (PUT) while it runs, where its kind takes a change in place: the submitter applies it to its attempt's object; later attempts use it too"},
	{changeable, Same, ByAPI, true, "its spec changed by a user in a namespace that needs approval: the change waits beside the live spec (status.pendingChange), which alone runs meanwhile; a PUT of the live spec withdraws it"},
	{slices.Concat(phases(v1alpha1.PhaseQueued), ended), Same, ByAPI, true, "its pending change approved by another user: the live spec at the next generation (status.approvedBy, approvedGeneration); its next attempt uses it"},
	{running, Same, ByAPI, true, "its pending change approved by another user while it runs, where its kind takes a change in place: applied as a user's update is"},
	{changeable, Same, ByAPI, true, "its pending change rejected by another user: the live spec stays"},
	{phases(v1alpha1.PhaseRunning), Same, ByAPI, true, "a planned move asked by a user (POST .../move, purser drain); the controller hands it over to the target cluster"},

	{phases(v1alpha1.PhaseQueued), v1alpha1.PhaseQueued, BySubmitter, false, "waits for admission: no cluster fits what it requests now (or ever), a deployable it depends on is not Synced, or none matches; the message names the resource and the figures"},
	{phases(v1alpha1.PhaseQueued), v1alpha1.PhaseScheduled, BySubmitter, true, "placed: an attempt on the cluster that fits it best, its requests counted there in flight; its health Unknown until its object is first observed"},
	{phases(v1alpha1.PhaseQueued), v1alpha1.PhaseExpired, BySubmitter, true, "its deadline passed before it was created"},
	{phases(v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled), v1alpha1.PhaseFailed, BySubmitter, true, "it can never be created: invalid, refused by the policy (ForbiddenByPolicy) or by the admission of the object as it would be written (AdmissionDenied, naming the rule and the mutation to blame), or no cluster serves its kind (by a discovery of each cluster asked after the runnable was created: one older, which a CRD installed a moment before may postdate, is asked again first, within 30 s)"},
	{phases(v1alpha1.PhaseQueued), v1alpha1.PhaseFailed, BySubmitter, true, "in a namespace that needs approval, its live generation is not the one approved (written behind the API): it is not created"},
	{phases(v1alpha1.PhaseScheduled), v1alpha1.PhaseSubmitted, BySubmitter, true, "created on its attempt's cluster"},
	{phases(v1alpha1.PhaseScheduled), v1alpha1.PhaseQueued, BySubmitter, true, "its cluster failed or went away before the create; placed again"},
	{phases(v1alpha1.PhaseCancelled), v1alpha1.PhaseCancelled, BySubmitter, true, "the cancelled attempt's copy removed from its cluster"},
	{phases(v1alpha1.PhaseSuspended), Same, BySubmitter, false, "the kind's suspend field set on its cluster, or why the cluster refused it"},
	{phases(v1alpha1.PhaseSuspended), v1alpha1.PhaseSubmitted, BySubmitter, true, "resumed: the kind's suspend field cleared on its cluster"},
	{phases(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended), Same, BySubmitter, true, "a user's update applied in place to its attempt's object by server-side apply, or why the cluster refused it"},
	{phases(v1alpha1.PhaseFailed), v1alpha1.PhaseQueued, BySubmitter, true, "its failure's class is retried by spec.retry or its defaults: placed again as a new attempt"},
	{phases(v1alpha1.PhaseFailed), v1alpha1.PhaseFailed, BySubmitter, true, "its failure judged by spec.retry and not retried; the class and the reason are in status.retries"},

	{phases(v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted), v1alpha1.PhaseRunning, ByIngester, false, "its object is seen running"},
	{placed, v1alpha1.PhaseSucceeded, ByIngester, true, "its object is seen succeeded"},
	{placed, v1alpha1.PhaseFailed, ByIngester, true, "its object is seen failed"},
	{slices.Concat(placed, phases(v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed)), Same, ByIngester, false, "health and last observed status of its object"},

	{occupied, v1alpha1.PhaseQueued, ByController, true, "evicted (cluster lost or tainted, application unhealthy); placed again"},
	{phases(v1alpha1.PhaseScheduled), v1alpha1.PhaseQueued, ByController, true, "AtMostOne, its create sent to a cluster that stopped answering: evicted once a copy it made is certainly fenced; placed again"},
	{occupied, v1alpha1.PhaseFailingOver, ByController, true, "evicted; its old copy must go before it is placed again"},
	{phases(v1alpha1.PhaseFailingOver), v1alpha1.PhaseQueued, ByController, true, "its old copy is gone, or fenced on a cluster that stopped answering; placed again"},
	{slices.Concat(placed, phases(v1alpha1.PhaseFailingOver)), Same, ByController, false, "waiting for a failover that cannot happen yet, or resumed after fencing; or its cluster is not Ready, its health Unknown until it is Ready again (then as last observed); the message says which"},
	{phases(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning), v1alpha1.PhaseScheduled, ByController, true, "its object, of a kind its agent fences by deletion, was deleted when the agent's lease expired; the cluster is Ready again and the runnable was not moved: the submitter creates the same attempt's object again from its template"},
	{phases(v1alpha1.PhaseRunning), Same, ByController, true, "a planned move's progress: its job asked to stop with a savepoint, put back to running where it was when the savepoint failed, or running on the target (with its downtime)"},
	{every, Same, ByController, true, "an ended attempt's old copy removed from its cluster"},

	{ended, Removed, ByRetention, true, "removed once its namespace's retention after the end has passed"},
}

// Same as To: the row keeps whatever phase the runnable is in.
const Same v1alpha1.Phase = "(same)"

// Allowed reports whether by may move a runnable from one phase to
// another (from == to for a change that keeps the phase).
func Allowed(from, to v1alpha1.Phase, by Cause) bool {
	return rowFor(from, to, by) != nil
}

func rowFor(from, to v1alpha1.Phase, by Cause) *Move {
	for i := range Table {
		if m := &Table[i]; m.matches(from, to, by) {
			return m
		}
	}
	return nil
}

// matches reports whether the row lets by move a runnable from one phase
// to another.
func (m *Move) matches(from, to v1alpha1.Phase, by Cause) bool {
	return m.By == by && slices.Contains(m.From, from) && (m.To == to || (m.To == Same && from == to))
}

// needsAudit reports whether every row that allows the move requires an
// audit entry: the move is then refused without one.
func needsAudit(from, to v1alpha1.Phase, by Cause) bool {
	audited := false
	for i := range Table {
		m := &Table[i]
		if !m.matches(from, to, by) {
			continue
		}
		if !m.Audited {
			return false
		}
		audited = true
	}
	return audited
}

// Markdown renders the table for docs/lifecycle.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| from | to | by | audited | what it is |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range Table {
		from := make([]string, len(m.From))
		for i, p := range m.From {
			from[i] = string(p)
		}
		audited := "may be"
		if m.Audited {
			audited = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", strings.Join(from, ", "), m.To, m.By, audited, m.Why)
	}
	return b.String()
}
