package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The drill follower: a real drill's moves are asked by the API and done
// by the failover controller, as every planned move is; the follower
// only reads how each one stands (the runnable's status.move, the one
// asked at the time the drill recorded) and writes it into the drill's
// record, with an audit entry as the drill's admin for each move that
// ends, until every move has ended. Then the drill is Ended (or Failed,
// when not one planned move was done). One key a running drill.

// DefaultFollowPoll is how often a running drill is looked at: a move
// takes seconds (a savepoint, a start on the target).
const DefaultFollowPoll = time.Second

// FollowerConfig configures the follower.
type FollowerConfig struct {
	Store store.Transactor
	// Poll is how often a running drill is looked at; default
	// DefaultFollowPoll.
	Poll   time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Follower follows running drills.
type Follower struct{ cfg FollowerConfig }

// NewFollower returns the follower.
func NewFollower(cfg FollowerConfig) *Follower {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultFollowPoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Follower{cfg: cfg}
}

// Run follows the running drills until ctx ends. A drill started after
// the resync is found at the next one (every Poll): the API's start
// commits the drill and its moves together, and the moves take longer.
func (f *Follower) Run(ctx context.Context) error {
	return reconcile.New(f.reconcile, reconcile.Config[int64]{
		Name: "drills", Logger: f.cfg.Logger, Resync: f.running, ResyncPeriod: f.cfg.Poll,
		RetryBase: time.Second, RetryMax: 30 * time.Second,
	}).Run(ctx)
}

func (f *Follower) running(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := f.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		ds, err := tx.Drills().List(ctx, store.DrillFilter{State: store.DrillRunning})
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return err
	})
	return ids, err
}

func (f *Follower) reconcile(ctx context.Context, id int64) (reconcile.Result, error) {
	running, err := f.Step(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return reconcile.Result{}, nil
	case errors.Is(err, store.ErrConflict):
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil // the API ended it meanwhile: read again
	case err != nil:
		return reconcile.Result{}, err
	case running:
		return reconcile.Result{RequeueAfter: f.cfg.Poll}, nil
	}
	return reconcile.Result{}, nil
}

// Step looks once at drill id: each move under way read, what changed
// written with its audit entries, the drill's end written once every
// move ended. It reports whether the drill is still running.
func (f *Follower) Step(ctx context.Context, id int64) (running bool, err error) {
	err = f.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		d, err := tx.Drills().Get(ctx, id)
		if err != nil {
			return err
		}
		if d.State != store.DrillRunning {
			running = false
			return nil
		}
		var rec drill.Record
		if len(d.Actual) > 0 {
			if err := json.Unmarshal(d.Actual, &rec); err != nil {
				return reconcile.Terminal(fmt.Errorf("drill %d: stored record: %w", id, err))
			}
		}
		var entries []*audit.Entry
		for i := range rec.Runnables {
			o := &rec.Runnables[i]
			if o.Settled() {
				continue
			}
			ns, name, _ := strings.Cut(o.Runnable, "/")
			move, gone, err := moveOf(ctx, tx, ns, name)
			if err != nil {
				return err
			}
			if drill.Observe(o, move, gone) && (o.Step == v1alpha1.MoveDone || o.Step == v1alpha1.MoveFailed) {
				entries = append(entries, outcomeEntry(d, o, "drill-move", o.Step, o.To, o.DowntimeSeconds, o.Error))
			}
			if drill.ObserveBack(o, move, gone) && (o.Back.Step == v1alpha1.MoveDone || o.Back.Step == v1alpha1.MoveFailed) {
				entries = append(entries, outcomeEntry(d, o, "drill-move-back", o.Back.Step, o.Back.To, o.Back.DowntimeSeconds, o.Back.Error))
			}
		}
		running = !drill.Settled(&rec)
		if !running {
			now := f.cfg.Now()
			d.State, d.EndedAt = drill.Done(&rec), &now
			if rec.DurationSeconds == 0 {
				// The drill's own moves, not the moves back after it.
				rec.DurationSeconds = now.Sub(d.StartedAt).Round(10 * time.Millisecond).Seconds()
			}
		}
		if len(entries) == 0 && running {
			return nil
		}
		rec.Message = drill.Summary(&rec, d.State)
		if !running {
			entries = append(entries, &audit.Entry{Actor: d.Actor, Action: "drill-ended", Kind: v1alpha1.KindDrill, Name: d.Name(),
				Summary: fmt.Sprintf("drill %s %s", d.Name(), rec.Message), Outcome: d.State, Details: details(map[string]any{"drill": d.ID, "totals": drill.Totals(&rec)})})
		}
		if d.Actual, err = json.Marshal(rec); err != nil {
			return err
		}
		if err := tx.Drills().Update(ctx, d); err != nil {
			return err
		}
		for _, e := range entries {
			if err := tx.Audit().Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	return running, err
}

// moveOf is runnable ns/name's planned move as its status holds it;
// gone when the runnable is.
func moveOf(ctx context.Context, tx *store.Tx, ns, name string) (*v1alpha1.Move, bool, error) {
	rec, err := tx.Runnables().Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	var st v1alpha1.RunnableStatus
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &st); err != nil {
			return nil, false, fmt.Errorf("runnable %s/%s: stored status: %w", ns, name, err)
		}
	}
	return st.Move, false, nil
}

func outcomeEntry(d *store.Drill, o *drill.Outcome, action, step, to string, down *float64, why string) *audit.Entry {
	ns, name, _ := strings.Cut(o.Runnable, "/")
	summary := fmt.Sprintf("drill %s: %s moved to %s", d.Name(), o.Runnable, to)
	if down != nil {
		summary += fmt.Sprintf(", downtime %.1f s", *down)
	}
	if step == v1alpha1.MoveFailed {
		summary = fmt.Sprintf("drill %s: the move of %s to %s failed: %s", d.Name(), o.Runnable, to, why)
	}
	return &audit.Entry{Actor: d.Actor, Action: action, Kind: v1alpha1.KindRunnable, Namespace: ns, Name: name, Summary: summary, Outcome: step,
		Details: details(map[string]any{"drill": d.ID, "to": to, "plannedTo": o.PlannedTo, "downtimeSeconds": down, "error": why})}
}

func details(v any) json.RawMessage {
	data, _ := json.Marshal(v)
	return data
}
