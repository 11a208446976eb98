package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Lookback is how far before its watermark a trigger reads the ended
// runnables again: a runnable's end time is its writer's clock when the
// transaction began, so a transaction that commits late can hold an end
// time earlier than ends already seen. An end read twice is one event
// (its run's name is taken, or remembered in Seen).
const Lookback = 30 * time.Second

// scanPage is how many ended runnables one pass of a trigger reads.
const scanPage = 500

// Loop looks at each trigger on ended runnables or rollouts, one key a
// trigger on the reconcile scaffold: every Poll, and at once after a
// page that was full.
//
// Run may be called again after it returned (the controller runs it for
// each term it leads), so each run has a queue of its own: a queue is
// done once its run ends.
type Loop struct {
	cfg  Config
	fire *Firer
}

// Key names one trigger.
type Key struct{ Namespace, Name string }

// NewLoop returns the loop.
func NewLoop(cfg Config) *Loop {
	cfg.defaults()
	return &Loop{cfg: cfg, fire: NewFirer(cfg)}
}

// Run runs the loop until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	return reconcile.New(l.reconcile, reconcile.Config[Key]{
		Name: "triggers", Logger: l.cfg.Logger, Resync: l.keys, ResyncPeriod: 5 * l.cfg.Poll,
		RetryBase: time.Second, RetryMax: 30 * time.Second,
	}).Run(ctx)
}

// keys lists every trigger whose events the loop reads.
func (l *Loop) keys(ctx context.Context) ([]Key, error) {
	var out []Key
	f := store.TriggerFilter{Limit: 1000}
	for {
		var recs []*store.Trigger
		var next string
		if err := l.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			recs, next, err = tx.Triggers().List(ctx, f)
			return err
		}); err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, Key{r.Namespace, r.Name})
		}
		if next == "" {
			return out, nil
		}
		f.Continue = next
	}
}

// reconcile is one look at one trigger: its new events fired, its
// watermark moved past them.
func (l *Loop) reconcile(ctx context.Context, k Key) (reconcile.Result, error) {
	full, err := l.Pass(ctx, k.Namespace, k.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return reconcile.Result{}, nil // deleted: the resync forgets it
	case errors.Is(err, ErrReplaced):
		// Made again under the name during the pass: the new trigger's
		// pass reads it afresh.
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	case err != nil:
		return reconcile.Result{}, err
	case full:
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	}
	return reconcile.Result{RequeueAfter: l.cfg.Poll}, nil
}

// Pass fires the events of trigger ns/name not yet dealt with; it
// reports whether there may be more (a full page).
func (l *Loop) Pass(ctx context.Context, ns, name string) (bool, error) {
	var rec *store.Trigger
	if err := l.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Triggers().Get(ctx, ns, name)
		return err
	}); err != nil {
		return false, err
	}
	trg, err := Decode(rec)
	if err != nil {
		return false, reconcile.Terminal(err)
	}
	if trg.Obj.Spec.Suspend {
		return false, nil
	}
	switch on := trg.Obj.Spec.Source; {
	case on.RunnableEnded != nil:
		return l.ended(ctx, rec, on.RunnableEnded)
	case on.DeployableRolledOut != nil:
		return false, l.rolledOut(ctx, rec, trg, on.DeployableRolledOut)
	}
	return false, nil // a webhook's events come through the API
}

// ended fires a trigger on the runnables of its namespace that ended
// since its watermark, and moves the watermark.
func (l *Loop) ended(ctx context.Context, rec *store.Trigger, src *v1alpha1.RunnableEndedSource) (bool, error) {
	ns, name := rec.Namespace, rec.Name
	since := rec.Watermark.Add(-Lookback)
	if since.Before(rec.CreatedAt) {
		since = rec.CreatedAt // work that ended before the trigger is not its
	}
	match, err := Matcher(name, src)
	if err != nil {
		return false, reconcile.Terminal(err)
	}
	var ended []*store.Runnable
	// The events, with their runnables' numbers of attempts (part of an
	// end's identity), read only for the ends that match.
	events := map[string]Event{}
	if err := l.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if ended, err = tx.Runnables().EndedSince(ctx, ns, since, scanPage); err != nil {
			return err
		}
		for _, r := range ended {
			if r.EndedAt == nil || r.EndedAt.Before(rec.CreatedAt) {
				continue
			}
			ok, chain, err := match(r)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			as, err := tx.Attempts().List(ctx, r.UID)
			if err != nil {
				return err
			}
			ev := EndEvent(r, len(as), chain)
			ev.TriggerUID = rec.UID // a trigger made again meanwhile is not to fire on it
			events[r.UID] = ev
		}
		return nil
	}); err != nil {
		return false, err
	}
	mark := rec.Watermark
	for _, r := range ended {
		if ev, ok := events[r.UID]; ok {
			if _, err := l.fire.Fire(ctx, ns, name, ev); err != nil && !isStatus(err) {
				return false, fmt.Errorf("trigger %s/%s, %s: %w", ns, name, ev.What, err)
			}
		}
		if r.EndedAt != nil && r.EndedAt.After(mark) {
			mark = *r.EndedAt
		}
	}
	if mark.After(rec.Watermark) {
		if err := l.moveWatermark(ctx, rec, mark); err != nil {
			return false, err
		}
	}
	return len(ended) == scanPage, nil
}

// Matcher returns the decision whether the end of a runnable is an event
// of trigger name's source: its phase is one of the source's, its labels
// match the selector, it is not a run of the trigger itself unless the
// source says so, and the chain of triggers behind it (returned) is
// shorter than v1alpha1.MaxTriggerChain.
func Matcher(name string, src *v1alpha1.RunnableEndedSource) (func(r *store.Runnable) (bool, int, error), error) {
	sel := labels.Everything()
	if src.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(src.Selector); err != nil {
			return nil, err
		}
	}
	return func(r *store.Runnable) (bool, int, error) {
		phase := v1alpha1.Phase(r.Phase)
		if !phase.Terminal() || (len(src.Phases) > 0 && !slices.Contains(src.Phases, phase)) {
			return false, 0, nil
		}
		var doc store.Document[json.RawMessage]
		if err := json.Unmarshal(r.Spec, &doc); err != nil {
			return false, 0, fmt.Errorf("runnable %s/%s: stored spec: %w", r.Namespace, r.Name, err)
		}
		if !sel.Matches(labels.Set(doc.Labels)) {
			return false, 0, nil
		}
		if doc.Labels[v1alpha1.LabelTrigger] == name && !src.IncludeOwnRuns {
			return false, 0, nil
		}
		// The label is the runnable's writer's as much as purser's: a
		// writer may set it on a runnable of her own. A count below zero
		// would buy hops past the bound (at -1 the run is at hop 0; below,
		// at a label no value may be, refused), so it counts as a chain's
		// start, as a label that is no number does; one past any int
		// (Atoi gives the largest) is past the bound.
		chain := 0
		if c, ok := doc.Labels[v1alpha1.LabelTriggerChain]; ok {
			n, _ := strconv.Atoi(c)
			chain = max(n, 0)
		}
		if chain >= v1alpha1.MaxTriggerChain {
			return false, chain, nil
		}
		return true, chain, nil
	}, nil
}

// EndEvent is the end of runnable r after attempts attempts, chain hops
// behind.
func EndEvent(r *store.Runnable, attempts, chain int) Event {
	return Event{
		ID:    v1alpha1.RunnableEndedEvent(r.UID, attempts),
		What:  fmt.Sprintf("runnable %s/%s (uid %s) ended %s after %d attempt(s)", r.Namespace, r.Name, r.UID, r.Phase, attempts),
		Chain: chain,
	}
}

// rolledOut fires a trigger on the deployables of its namespace rolled
// out everywhere at a generation it has not dealt with.
func (l *Loop) rolledOut(ctx context.Context, rec *store.Trigger, trg *Stored, src *v1alpha1.DeployableRolledOutSource) error {
	ns, name := rec.Namespace, rec.Name
	var done []Deployment
	if err := l.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		done, err = RolledOut(ctx, tx, ns, src)
		return err
	}); err != nil {
		return err
	}
	for _, d := range done {
		if trg.Seen.Deployables[d.UID] >= d.Generation {
			continue
		}
		ev := Event{ID: v1alpha1.DeployableRolledOutEvent(d.UID, d.Generation), TriggerUID: rec.UID,
			What: fmt.Sprintf("deployable %s/%s (uid %s) rolled out generation %d on every cluster", ns, d.Name, d.UID, d.Generation)}
		if _, err := l.fire.Fire(ctx, ns, name, ev); err != nil && !isStatus(err) {
			return fmt.Errorf("trigger %s/%s, %s: %w", ns, name, ev.What, err)
		}
		if err := l.markDeployable(ctx, rec, d); err != nil {
			return err
		}
	}
	return nil
}

func (l *Loop) moveWatermark(ctx context.Context, rec *store.Trigger, mark time.Time) error {
	return l.edit(ctx, rec, func(cur *store.Trigger, _ *Seen) bool {
		if !mark.After(cur.Watermark) {
			return false
		}
		cur.Watermark = mark
		return true
	})
}

func (l *Loop) markDeployable(ctx context.Context, rec *store.Trigger, d Deployment) error {
	return l.edit(ctx, rec, func(_ *store.Trigger, seen *Seen) bool {
		if seen.Deployables[d.UID] >= d.Generation {
			return false
		}
		if seen.Deployables == nil {
			seen.Deployables = map[string]int64{}
		}
		seen.Deployables[d.UID] = d.Generation
		return true
	})
}

// edit changes trigger rec's row on a fresh read, again when another
// writer moved it meanwhile; fn reports whether it changed anything. A
// trigger made again under the name meanwhile is another trigger, whose
// watermark and rollouts are not rec's: ErrReplaced.
func (l *Loop) edit(ctx context.Context, rec *store.Trigger, fn func(cur *store.Trigger, seen *Seen) bool) error {
	return retryMoved(ctx, func(ctx context.Context) error {
		return l.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
			cur, err := tx.Triggers().Get(ctx, rec.Namespace, rec.Name)
			if err != nil {
				return err
			}
			if cur.UID != rec.UID {
				return ErrReplaced
			}
			trg, err := Decode(cur)
			if err != nil {
				return err
			}
			if !fn(cur, &trg.Seen) {
				return nil
			}
			if cur.Seen, err = json.Marshal(trg.Seen); err != nil {
				return err
			}
			return tx.Triggers().Update(ctx, cur)
		})
	})
}

// isStatus: a refusal of the gate, recorded with the trigger; the event
// is dealt with.
func isStatus(err error) bool {
	var st *v1alpha1.Status
	return errors.As(err, &st) || errors.Is(err, ErrSuspended)
}
