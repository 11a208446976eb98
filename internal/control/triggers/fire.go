package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Actor is the audit log's actor of what the trigger loop decides alone
// (an event refused); the runnables it creates name the trigger's
// author, whose rights they are created with.
const Actor = "triggers"

// Event is one event of a trigger's source.
type Event struct {
	// ID is the event's identity (v1alpha1.RunnableEndedEvent and the
	// like): the run's name is made of it.
	ID string
	// What says in words what happened, for the audit log and status.
	What string
	// Chain is the number of trigger hops behind the event: the chain of
	// the run that ended, 0 otherwise.
	Chain int
	// TriggerUID is the trigger the event was read for, and TokenHash,
	// for a webhook call, the token the call was let in with. The event
	// is read on one read of the trigger and fired on another: a trigger
	// deleted and made again under the name meanwhile (another trigger,
	// perhaps of another author, which is not to fire on what ended
	// before it was made), or its token rotated, is ErrReplaced, so that
	// no call fires with a token that no longer opens the trigger.
	TriggerUID, TokenHash string
}

// Config is what the trigger loop and the webhook fire with.
type Config struct {
	Store store.Transactor
	// Policy is the policy in force, read again at each event.
	Policy func() *policy.Policy
	// Pods judges the pods of templates; nil: admission.DefaultChecker.
	Pods *admission.Checker
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Notify wakes the outbox relay of this process, when there is one,
	// once a runnable was queued.
	Notify func()
	// Poll is how often each trigger on ended runnables or rollouts
	// looks at the store (default DefaultPoll).
	Poll   time.Duration
	Logger *slog.Logger
}

// DefaultPoll bounds the lag from an event to its run.
const DefaultPoll = 2 * time.Second

func (c *Config) defaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Pods == nil {
		c.Pods = admission.DefaultChecker()
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Firer creates the runnables of events.
type Firer struct{ cfg Config }

// NewFirer returns a firer.
func NewFirer(cfg Config) *Firer {
	cfg.defaults()
	return &Firer{cfg: cfg}
}

// Outcome is what Fire did of an event.
type Outcome struct {
	// Run is the event's runnable: created now, or found (Created false)
	// when the event was dealt with before.
	Run     *store.Runnable
	Created bool
	// RunName is the name of the event's runnable, even when Run is nil
	// (a run deleted since).
	RunName string
}

// ErrSuspended is returned for an event of a suspended trigger, which runs none.
var ErrSuspended = errors.New("the trigger is suspended (spec.suspend)")

// ErrReplaced is returned for an event whose trigger was deleted (and
// perhaps made again), or a webhook call whose token was rotated, since
// the event was read or the call let in.
var ErrReplaced = errors.New("the trigger was deleted, made again or its webhook token rotated since the event was read")

// sameTrigger: rec is the trigger, and holds the token, that ev was let
// in with (any, for an event not of a webhook).
func sameTrigger(rec *store.Trigger, ev Event) bool {
	return (ev.TriggerUID == "" || rec.UID == ev.TriggerUID) && (ev.TokenHash == "" || rec.TokenHash == ev.TokenHash)
}

// fireTries is how often Fire reads a trigger again that another writer
// changed meanwhile.
const fireTries = 10

// Fire runs one event of trigger ns/name: at most one runnable, named
// after the trigger and the event, created through the submission gate
// as the trigger's author, in one transaction with its audit entry and
// the trigger's status. An event dealt with before (its run's name is
// taken, or was lately) creates nothing. A refusal of the gate is
// returned as the gate's v1alpha1.Status, and written into the status
// and the audit log.
func (f *Firer) Fire(ctx context.Context, ns, name string, ev Event) (*Outcome, error) {
	var out *Outcome
	err := retryMoved(ctx, func(ctx context.Context) error {
		var err error
		out, err = f.fire(ctx, ns, name, ev)
		return err
	})
	return out, err
}

// retryMoved runs fn again, on the scaffold's backoff (which spreads the
// losers apart), while another writer changed the trigger between its
// read and its write, fireTries times at most; any other outcome is
// final.
func retryMoved(ctx context.Context, fn func(ctx context.Context) error) error {
	err := reconcile.Retry(ctx, reconcile.Backoff(5*time.Millisecond, 100*time.Millisecond), func(ctx context.Context, attempt int) error {
		err := fn(ctx)
		switch {
		case err == nil:
			return nil
		case (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrMoved)) && attempt+1 < fireTries:
			return err
		}
		return reconcile.Terminal(err)
	})
	var term interface{ Unwrap() error }
	if reconcile.IsTerminal(err) && errors.As(err, &term) {
		return term.Unwrap()
	}
	return err
}

func (f *Firer) fire(ctx context.Context, ns, name string, ev Event) (*Outcome, error) {
	var rec *store.Trigger
	if err := f.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Triggers().Get(ctx, ns, name)
		return err
	}); err != nil {
		return nil, err
	}
	if !sameTrigger(rec, ev) {
		return nil, ErrReplaced
	}
	trg, err := Decode(rec)
	if err != nil {
		return nil, err
	}
	if trg.Obj.Spec.Suspend {
		return nil, ErrSuspended
	}
	runName := v1alpha1.EventRunName(name, ev.ID)
	out := &Outcome{RunName: runName}
	if _, ok := trg.Seen.Recent[runName]; ok {
		return out, nil // dealt with lately; its run may be gone since
	}
	req := Request(trg.Obj, trg.Author, ev)
	// The gate reads the store itself: before the transaction, as the
	// author, by the policy now.
	gate := &submission.Gate{Policy: f.cfg.Policy(), Store: f.cfg.Store, Pods: f.cfg.Pods, Renderings: attempt.Renderings, Now: f.cfg.Now}
	refusal := gate.Prepare(ctx, req)
	var refused error
	err = f.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		out.Run, out.Created, refused = nil, false, nil
		cur, err := tx.Triggers().Get(ctx, ns, name)
		if err != nil {
			return err
		}
		// Another row under the name (the trigger made again) may stand
		// at the same version: the uid tells them apart.
		if cur.UID != rec.UID || cur.ResourceVersion != rec.ResourceVersion {
			return fmt.Errorf("trigger %s/%s changed meanwhile: %w", ns, name, store.ErrConflict)
		}
		if r, err := tx.Runnables().Get(ctx, ns, runName); err == nil {
			out.Run = r
			return nil // done already, by another loop or before a restart
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := f.cfg.Now().UTC()
		st := trg.Obj.Status
		st.Token, st.WebhookPath = "", ""
		seen := trg.Seen
		if refusal != nil {
			refused = refusal
			st.Message = fmt.Sprintf("event %s created no runnable: %s", ev.What, why(refusal))
			if err := tx.Audit().Append(ctx, &audit.Entry{Actor: Actor, Action: "refuse", Kind: v1alpha1.KindTrigger,
				Namespace: ns, Name: name, Summary: st.Message, Outcome: "Refused"}); err != nil {
				return err
			}
		} else {
			res, err := submission.Create(ctx, tx, req)
			if err != nil {
				return err
			}
			out.Run = res.Rec
			if !res.Created {
				return nil // the name is taken: the event is done
			}
			out.Created = true
			st.Message = ""
			st.Fired++
			st.LastFired = &now
			st.LastRuns = append([]v1alpha1.TriggerRun{{Name: runName, Event: ev.What, Phase: v1alpha1.Phase(res.Rec.Phase), At: now}}, st.LastRuns...)
			if len(st.LastRuns) > v1alpha1.MaxTriggerLastRuns {
				st.LastRuns = st.LastRuns[:v1alpha1.MaxTriggerLastRuns]
			}
		}
		// A refused event is remembered too: it is dealt with, and
		// reading it again would refuse it again.
		seen.remember(runName, now)
		if cur.Status, err = json.Marshal(st); err != nil {
			return err
		}
		if cur.Seen, err = json.Marshal(seen); err != nil {
			return err
		}
		return tx.Triggers().Update(ctx, cur)
	})
	if err != nil {
		return nil, err
	}
	if out.Created && !req.NeedsApproval() && f.cfg.Notify != nil {
		f.cfg.Notify()
	}
	return out, refused
}

// Request is the runnable event ev of trigger obj creates, by author:
// named after the trigger and the event, labelled with the trigger and
// the chain's length, annotated with the event.
func Request(obj *v1alpha1.Trigger, author policy.User, ev Event) *submission.Request {
	name := obj.Metadata.Name
	req := &submission.Request{
		Runnable: obj.RunnableAt(v1alpha1.EventRunName(name, ev.ID), v1alpha1.RunLabels(name, ev.Chain+1)),
		Author:   author, Via: fmt.Sprintf("trigger %s, event: %s", name, ev.What),
	}
	ann := map[string]string{}
	for k, v := range req.Runnable.Metadata.Annotations {
		ann[k] = v
	}
	ann[v1alpha1.AnnotationTriggerEvent] = ev.What
	req.Runnable.Metadata.Annotations = ann
	return req
}

// why is a refusal in one line, with the fields it names.
func why(err error) string {
	var st *v1alpha1.Status
	if !errors.As(err, &st) {
		return err.Error()
	}
	msg := st.Message
	if len(st.Details) > 0 {
		msg += " (" + v1alpha1.FieldErrors(st.Details).String() + ")"
	}
	return msg
}

// Runs lists the runnables of trigger ns/name, newest first: those named
// after it that carry its label.
func Runs(ctx context.Context, tx *store.Tx, ns, name string) ([]*store.Runnable, error) {
	recs, err := tx.Runnables().ListByNamePrefix(ctx, ns, name+"-", 1000)
	if err != nil {
		return nil, err
	}
	var out []*store.Runnable
	for _, rec := range recs {
		var doc store.Document[json.RawMessage]
		if err := json.Unmarshal(rec.Spec, &doc); err != nil {
			return nil, fmt.Errorf("runnable %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
		}
		if doc.Labels[v1alpha1.LabelTrigger] == name {
			out = append(out, rec)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// FillPhases writes into st the phases its last runs have now.
func FillPhases(st *v1alpha1.TriggerStatus, runs []*store.Runnable) {
	phase := map[string]string{}
	for _, r := range runs {
		phase[r.Name] = r.Phase
	}
	for i := range st.LastRuns {
		if p, ok := phase[st.LastRuns[i].Name]; ok {
			st.LastRuns[i].Phase = v1alpha1.Phase(p)
		}
	}
}
