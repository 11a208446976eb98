// Package scheduler creates the runnables of schedules: at each tick due,
// one runnable named after the schedule and the tick, created the one way
// a runnable is (internal/domain/submission) with the rights of the
// schedule's author as the policy stands at the tick, in one transaction
// with its audit entry and the schedule's status.
//
// Exactly once: the runnable's name is the schedule's and the tick's
// (v1alpha1.TickRunName), and the runnables table holds a name once. Two
// schedulers looking at the same tick (two replicas, a restart half-way,
// a database failover that replays a transaction) both try to create the
// same name; one commits, the other finds the name taken and takes the
// tick as done. Nothing else (no lease, no memory of the process) is
// needed for it; the controller's lease only saves the standby the work.
package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Actor is the audit log's actor of what the scheduler decides alone
// (a tick skipped, missed or refused); the runnables it creates name
// their author, whose rights they are created with.
const Actor = "scheduler"

// DefaultResync bounds how long a schedule written by the API of another
// process waits before the scheduler sees it: it sleeps until the
// earliest tick it knows, and reads the schedules again at least this
// often. A schedule written in this process wakes it at once (Kick).
const DefaultResync = 10 * time.Second

// errorPause is how long the loop first waits after a pass that failed
// (then longer, up to Resync).
const errorPause = time.Second

// pageSize is how many due schedules one transaction fires: one commit,
// and so one sync of the database's log, for each page of ticks. Larger
// pages wait longer for their commit; smaller ones pay more syncs.
const pageSize = 1000

// lastRunsShown is how many runs status.lastRuns lists.
const lastRunsShown = 10

// Config is what the scheduler runs with.
type Config struct {
	Store store.Transactor
	// Policy is the policy in force, read again at each tick.
	Policy func() *policy.Policy
	// Pods judges the pods of templates; nil: admission.DefaultChecker.
	Pods *admission.Checker
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// Notify wakes the outbox relay of this process, when there is one,
	// once a runnable was queued or cancelled; it may be called
	// concurrently.
	Notify func()
	// Accepted, when set, is told the ticks whose runnables a transaction
	// just committed: the moment each was accepted, for the lag from the
	// tick (make bench). Pages written at once may tell it concurrently.
	Accepted func(ticks []time.Time)

	Resync time.Duration
	// Wake, when set, is signalled by the API of this process when it
	// wrote a schedule, so that a new first tick is not left to Resync.
	Wake   <-chan struct{}
	Logger *slog.Logger
}

// Scheduler is the loop: one key on the reconcile scaffold, run again at
// the earliest next tick, on a Kick, or every Resync at the latest, with
// the scaffold's backoff after a pass that failed.
//
// Run may be called again after it returned (the controller runs it for
// each term it leads), so each run has a queue of its own: a queue is
// done once its run ends.
type Scheduler struct {
	cfg Config

	mu    sync.Mutex
	queue *reconcile.Queue[struct{}] // of the run going on; nil between runs
	// ready are the firings prepared ahead of the tick readyAt (Early),
	// by schedule uid.
	ready   map[string]*firing
	readyAt time.Time
	// readyScopes are the kinds' scopes, as the clusters reported them,
	// that the firings in ready were reviewed by.
	readyScopes map[[2]string][]bool
	// reviewedAhead counts the firings used as prepared ahead.
	reviewedAhead atomic.Int64
}

// New returns a scheduler.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Pods == nil {
		cfg.Pods = admission.DefaultChecker()
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg}
}

// Kick makes the loop look at the schedules now: one was written, or a
// test moved the clock. Between runs there is nothing to wake: each run
// looks at once when it starts.
func (s *Scheduler) Kick() {
	s.mu.Lock()
	q := s.queue
	s.mu.Unlock()
	if q != nil {
		q.Add(struct{}{})
	}
}

// Run fires the due schedules, then waits for the earliest next tick (or
// Resync, or a Kick), until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	q := reconcile.New(s.reconcile, reconcile.Config[struct{}]{
		Name: "scheduler", Logger: s.cfg.Logger, RetryBase: errorPause, RetryMax: s.cfg.Resync,
	})
	s.mu.Lock()
	s.queue = q
	s.ready, s.readyAt = nil, time.Time{} // a new term reviews its ticks again
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.queue == q {
			s.queue = nil
		}
		s.mu.Unlock()
	}()
	if s.cfg.Wake != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.cfg.Wake:
					s.Kick()
				}
			}
		}()
	}
	q.Add(struct{}{})
	return q.Run(ctx)
}

// reconcile is one pass: the due schedules fired, and the wait until the
// earliest next tick, Resync at most. A failed pass is retried with the
// scaffold's backoff: a schedule that failed is still due.
func (s *Scheduler) reconcile(ctx context.Context, _ struct{}) (reconcile.Result, error) {
	next, err := s.Pass(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	wait := s.cfg.Resync
	if next != nil {
		if next.Sub(s.cfg.Now()) <= Early {
			s.prepareAhead(ctx, *next)
		}
		d := next.Sub(s.cfg.Now()) // after preparing, which takes a while
		if d > Early {
			d -= Early // wake to prepare the tick's firings
		}
		if d < wait {
			wait = max(d, time.Millisecond)
		}
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// Early is how long before a tick the scheduler reviews the runnables of
// the schedules due at it: each schedule read and decoded, its plan made,
// each tick's runnable past the gate (the rights of its author by the
// policy then, its pods, its rendering), so that what is left at the tick
// is writing them. A firing prepared so is used at the tick only if the
// schedule is still at the version read, the policy is the one it was
// reviewed by, and the plan made again at the tick runs the same ticks;
// otherwise the tick is reviewed again then.
const Early = 5 * time.Second

// maxReady bounds the firings prepared ahead of one tick; the schedules
// due beyond it are reviewed at the tick.
const maxReady = 20_000

// prepareAhead prepares the firings of the schedules due at tick, once
// for each tick.
func (s *Scheduler) prepareAhead(ctx context.Context, tick time.Time) {
	s.mu.Lock()
	done := s.readyAt.Equal(tick)
	s.mu.Unlock()
	if done {
		return
	}
	gate := s.gate()
	// The scopes the review reads are kept with it: a kind a cluster
	// reports cluster-scoped by the tick (a CRD made again so) is
	// refused then, which a review made as namespaced would not be
	// (scopesHold).
	once := submission.ScopesOnce(s.cfg.Store)
	var seenMu sync.Mutex
	seen := map[[2]string][]bool{}
	gate.Scopes = func(ctx context.Context, group, kind string) ([]bool, error) {
		out, err := once(ctx, group, kind)
		if err == nil {
			seenMu.Lock()
			seen[[2]string{group, kind}] = out
			seenMu.Unlock()
		}
		return out, err
	}
	ready := map[string]*firing{}
	var after store.ScheduleDueCursor
	for len(ready) < maxReady {
		var due []*store.Schedule
		if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			due, err = tx.Schedules().DueAfter(ctx, tick, after, pageSize)
			return err
		}); err != nil {
			s.cfg.Logger.Warn("scheduler: reading the schedules due at the next tick ahead of it", "tick", tick, "err", err)
			return // each is reviewed at the tick
		}
		for _, rec := range due {
			if f, err := s.prepareAt(ctx, gate, rec, tick); err == nil {
				ready[rec.UID] = f
			}
		}
		if len(due) < pageSize {
			break
		}
		after = store.DueCursor(due[len(due)-1])
	}
	s.mu.Lock()
	s.ready, s.readyAt, s.readyScopes = ready, tick, seen
	s.mu.Unlock()
}

// scopesHold checks, once the tick of the firings ready is due, that the
// kinds' scopes they were reviewed by are still those the clusters
// report (scopes, the page's: one read of each kind the review looked
// at); when not, every firing ready is forgotten, to be reviewed at the
// tick. Checked at each page while firings are ready, not once: a pass
// between the review and the tick (a Kick) must not stand for the tick.
func (s *Scheduler) scopesHold(ctx context.Context, now time.Time, scopes func(ctx context.Context, group, kind string) ([]bool, error)) {
	s.mu.Lock()
	seen := s.readyScopes
	if len(s.ready) == 0 || now.Before(s.readyAt) {
		seen = nil
	}
	s.mu.Unlock()
	for gk, was := range seen {
		now, err := scopes(ctx, gk[0], gk[1])
		if err != nil || !sameScopes(was, now) {
			s.mu.Lock()
			s.ready = nil
			s.mu.Unlock()
			return
		}
	}
}

// sameScopes compares two reports of a kind's scopes as sets (one entry
// for each cluster, in no particular order).
func sameScopes(a, b []bool) bool {
	count := func(v []bool) (n int) {
		for _, namespaced := range v {
			if namespaced {
				n++
			}
		}
		return n
	}
	return len(a) == len(b) && count(a) == count(b)
}

// takeReady returns the firing of rec prepared ahead, when it still holds
// now (see Early), and forgets it.
func (s *Scheduler) takeReady(rec *store.Schedule, pol *policy.Policy, now time.Time) *firing {
	s.mu.Lock()
	f := s.ready[rec.UID]
	delete(s.ready, rec.UID)
	s.mu.Unlock()
	if f == nil || f.rec.ResourceVersion != rec.ResourceVersion || f.pol != pol || f.cron == nil {
		return nil
	}
	plan := Decide(f.cron, f.loc, f.sch.Since(), now, RulesOf(&f.sch.Obj.Spec))
	if !slices.EqualFunc(plan.Run, f.plan.Run, time.Time.Equal) {
		return nil
	}
	f.plan = plan
	s.reviewedAhead.Add(1)
	return f
}

// Pass fires every schedule due now and returns the earliest next tick.
//
// The pages of a pass are pipelined: while one page's transaction is
// written and committed, the next page is read (after the last schedule
// of the one before, in the order of Due) and its firings prepared or
// taken from the review ahead, on another goroutine. A page's writes
// touch only its own schedules, so the page read meanwhile is what it
// would be read after the commit. Due is then read from the start again,
// which finds anything a failed page left (fired again on its own).
func (s *Scheduler) Pass(ctx context.Context) (*time.Time, error) {
	var errs []error
	now := s.cfg.Now()
	for read := 0; read < maxPagesPerPass; {
		n, err := s.passPages(ctx, now, maxPagesPerPass-read)
		read += n
		if err != nil {
			errs = append(errs, err)
			break
		}
		var left []*store.Schedule
		if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			left, err = tx.Schedules().Due(ctx, now, 1)
			return err
		}); err != nil {
			return nil, err
		}
		if len(left) == 0 || n == 0 {
			break
		}
	}
	var next *time.Time
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		next, err = tx.Schedules().NextTick(ctx)
		return err
	})
	return next, errors.Join(append(errs, err)...)
}

// maxPagesPerPass bounds the pages of due schedules one pass fires; the
// next pass reads the next tick again.
const maxPagesPerPass = 100

// page is one page of due schedules, read and prepared for its
// transaction (fs nil when a firing could not be prepared: the page is
// then fired schedule by schedule).
type page struct {
	recs []*store.Schedule
	fs   []*firing
}

// writers is how many pages of a pass are written at once. SQLite has
// one writer at a time, so one. On PostgreSQL two: a page's reads,
// inserts and status updates then overlap the other's, and only the audit
// chain's head, taken at the end of each transaction and held to its
// commit, is written one page after the other.
func writers(st store.Transactor) int {
	if e, ok := st.(interface{ Engine() string }); ok && e.Engine() == store.EnginePostgres {
		return 2
	}
	return 1
}

// passPages reads up to limit pages of the schedules due at now, one
// ahead of the one being written, and fires each (fireBatch). It returns
// how many pages it read.
func (s *Scheduler) passPages(ctx context.Context, now time.Time, limit int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 1) // one page read ahead of the writers
	readErr := make(chan error, 1)
	go func() {
		defer close(pages)
		var after store.ScheduleDueCursor
		for range limit {
			var due []*store.Schedule
			if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
				var err error
				due, err = tx.Schedules().DueAfter(ctx, now, after, pageSize)
				return err
			}); err != nil {
				readErr <- err
				return
			}
			if len(due) == 0 {
				break
			}
			select {
			case pages <- page{recs: due, fs: s.preparePage(ctx, due)}:
			case <-ctx.Done():
				return
			}
			if len(due) < pageSize {
				break
			}
			after = store.DueCursor(due[len(due)-1])
		}
		readErr <- nil
	}()
	var (
		mu   sync.Mutex
		n    int
		errs []error
		wg   sync.WaitGroup
	)
	for range writers(s.cfg.Store) {
		wg.Go(func() {
			for p := range pages {
				err := s.fireBatch(ctx, p)
				mu.Lock()
				n++
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil && ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	cancel() // a reader still sending after a failure stops
	for range pages {
	}
	if len(errs) == 0 {
		errs = append(errs, <-readErr)
	}
	return n, errors.Join(errs...)
}

// Fire looks at one schedule now: creates the runnables of its due ticks
// as its rules say, and writes its status and next tick, in one
// transaction. A schedule changed meanwhile (by the API, or by another
// scheduler that fired it first) is read again and decided again.
func (s *Scheduler) Fire(ctx context.Context, ns, name string) error {
	// Another writer won; its write is read again after a pause that
	// spreads the losers apart.
	return reconcile.Tries(ctx, reconcile.Contention(5*time.Millisecond), fireTries, lostToAnotherWriter, func(ctx context.Context) error {
		return s.fire(ctx, ns, name)
	})
}

// lostToAnotherWriter reports whether err says that another writer changed
// what a transaction read (the schedule, or a runnable it looked at).
func lostToAnotherWriter(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrMoved)
}

// fireTries is how often Fire reads a schedule again that another writer
// changed meanwhile.
const fireTries = 10

// tick is one tick to run, and what the gate said of its runnable.
type tick struct {
	at      time.Time
	req     *submission.Request
	refusal error
}

func (s *Scheduler) fire(ctx context.Context, ns, name string) error {
	var rec *store.Schedule
	if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Schedules().Get(ctx, ns, name)
		return err
	}); err != nil {
		return err
	}
	f, err := s.prepareAt(ctx, s.gate(), rec, s.cfg.Now())
	if err != nil {
		return err
	}
	var out fired
	err = s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		out = fired{}
		return s.apply(ctx, tx, f, &out)
	})
	if err == nil {
		s.after(out)
	}
	return err
}

// preparePage makes the firings of a page of due schedules: each taken
// from the review ahead where that still holds, else reviewed now. It
// returns nil when one could not be prepared.
func (s *Scheduler) preparePage(ctx context.Context, recs []*store.Schedule) []*firing {
	gate := s.gate()
	gate.Scopes = submission.ScopesOnce(s.cfg.Store)
	now := s.cfg.Now()
	s.scopesHold(ctx, now, gate.Scopes)
	fs := make([]*firing, 0, len(recs))
	for _, rec := range recs {
		f := s.takeReady(rec, gate.Policy, now)
		if f == nil {
			var err error
			if f, err = s.prepareAt(ctx, gate, rec, now); err != nil {
				return nil
			}
		}
		fs = append(fs, f)
	}
	return fs
}

// fireBatch fires a page of due schedules (as read by Due and prepared
// by preparePage) in one transaction: a commit, and so a sync of the
// database's log, per page rather than per schedule, and the page's
// runnables, messages, audit entries and statuses each written by one
// statement (applyPage), is what lets ten thousand schedules firing at
// the same minute be accepted within a second or so. Exactly once does
// not depend on it: each tick's runnable still has its one name. Should
// the page fail (a schedule changed meanwhile, another scheduler fired
// one first, an error of one schedule), each is fired again on its own,
// so that one schedule's trouble delays none of the others for long.
func (s *Scheduler) fireBatch(ctx context.Context, p page) error {
	if p.fs == nil {
		return s.fireEach(ctx, p.recs)
	}
	var out fired
	err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		out = fired{}
		// The page's audit entries go last: the chain's head is then
		// held by one page's commit only, not through its statuses, and
		// the other page written at once (PostgreSQL) waits for less.
		tx.DeferAudit()
		return s.applyPage(ctx, tx, p.fs, &out)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.fireEach(ctx, p.recs)
	}
	s.after(out)
	return nil
}

// applyPage carries out a page of firings in tx. Most are the plain case
// (ticks to run, each past the gate, none missed, nothing to skip, cancel
// or prune): their runs are read by one query, their runnables created
// together (submission.CreateMany) and their statuses written by one
// statement, provided each schedule is still as read (store.ErrConflict
// otherwise). The others are carried out one by one, as Fire does.
func (s *Scheduler) applyPage(ctx context.Context, tx *store.Tx, fs []*firing, out *fired) error {
	byNS := map[string][]string{}
	for _, f := range fs {
		if f.unreadable == "" && !f.sch.Obj.Spec.Suspend {
			byNS[f.rec.Namespace] = append(byNS[f.rec.Namespace], f.rec.Name)
		}
	}
	runs := map[string][]Run{} // by namespace/name
	for ns, names := range byNS {
		got, err := RunsOf(ctx, tx, ns, names)
		if err != nil {
			return err
		}
		for name, rs := range got {
			runs[ns+"/"+name] = rs
		}
	}
	var plain []*firing
	var reqs []*submission.Request
	for _, f := range fs {
		key := f.rec.Namespace + "/" + f.rec.Name
		if !plainFiring(f, runs[key]) {
			if err := s.apply(ctx, tx, f, out); err != nil {
				return err
			}
			continue
		}
		plain = append(plain, f)
		for _, t := range f.ticks {
			reqs = append(reqs, t.req)
		}
	}
	outcomes, err := submission.CreateMany(ctx, tx, reqs)
	if err != nil {
		return err
	}
	var changed []*store.Schedule
	for _, f := range plain {
		key := f.rec.Namespace + "/" + f.rec.Name
		rs := runs[key]
		for _, t := range f.ticks {
			o := outcomes[0]
			outcomes = outcomes[1:]
			if o.Created {
				out.notify = true
				out.accepted = append(out.accepted, t.at)
				rs = append(rs, Run{Rec: o.Rec, Tick: t.at.UTC()})
			}
		}
		st := f.sch.Obj.Status
		st.Message = ""
		if !f.plan.Latest.IsZero() {
			latest := f.plan.Latest.UTC()
			st.LastScheduleTime = &latest
		}
		FillRuns(&st, rs)
		var next *time.Time
		if !f.plan.Next.IsZero() {
			n := f.plan.Next.UTC()
			next = &n
		}
		st.NextScheduleTime = next
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if bytes.Equal(data, f.rec.Status) && sameTime(next, f.rec.NextTick) {
			continue // nothing to say: another scheduler said it first
		}
		rec := *f.rec
		rec.Status, rec.NextTick = data, next
		changed = append(changed, &rec)
	}
	return tx.Schedules().UpdateStatuses(ctx, changed)
}

// plainFiring reports whether f, whose schedule has runs, is the plain
// case applyPage writes together: its ticks all past the gate, none
// missed, and neither its concurrency policy (an active run under Forbid
// or Replace) nor its history limits (an ended run to remove) asking for
// more than creating them.
func plainFiring(f *firing, runs []Run) bool {
	if f.unreadable != "" || f.sch.Obj.Spec.Suspend || f.plan.Missed > 0 {
		return false
	}
	for _, t := range f.ticks {
		if t.refusal != nil {
			return false
		}
	}
	keepOK, keepFailed := historyLimits(&f.sch.Obj.Spec)
	var active bool
	var ok, failed int32
	for _, r := range runs {
		switch phase := v1alpha1.Phase(r.Rec.Phase); {
		case !phase.Terminal():
			active = true
		case phase == v1alpha1.PhaseSucceeded:
			ok++
		default:
			failed++
		}
	}
	if active && f.sch.Obj.Spec.ConcurrencyPolicy != v1alpha1.ConcurrencyAllow && f.sch.Obj.Spec.ConcurrencyPolicy != "" {
		return false
	}
	return ok <= keepOK && failed <= keepFailed
}

// fireEach fires recs one by one, each in its own transaction.
func (s *Scheduler) fireEach(ctx context.Context, recs []*store.Schedule) error {
	var errs []error
	for _, rec := range recs {
		if err := s.Fire(ctx, rec.Namespace, rec.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("schedule %s/%s: %w", rec.Namespace, rec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// gate is the submission gate of this moment's policy, for the ticks of
// one pass.
func (s *Scheduler) gate() *submission.Gate {
	return &submission.Gate{Policy: s.cfg.Policy(), Store: s.cfg.Store, Pods: s.cfg.Pods, Renderings: attempt.Renderings, Now: s.cfg.Now}
}

// firing is one look at a schedule, decided before the transaction that
// carries it out: its plan, and each tick's runnable past the gate (the
// gate reads the store itself).
type firing struct {
	rec   *store.Schedule
	sch   *Stored
	plan  Plan
	ticks []tick
	// pol is the policy its ticks were reviewed by; cron and loc its
	// timetable, read (nil when suspended or unreadable).
	pol  *policy.Policy
	cron cron.Schedule
	loc  *time.Location
	// unreadable says why the timetable cannot be read, when it cannot.
	unreadable string
}

// fired is what committed transactions did, told after the commit.
type fired struct {
	notify   bool
	accepted []time.Time
}

func (s *Scheduler) after(out fired) {
	if out.notify && s.cfg.Notify != nil {
		s.cfg.Notify()
	}
	if len(out.accepted) > 0 && s.cfg.Accepted != nil {
		s.cfg.Accepted(out.accepted)
	}
}

// prepareAt makes rec's plan as at now, and passes each tick it runs
// through gate.
func (s *Scheduler) prepareAt(ctx context.Context, gate *submission.Gate, rec *store.Schedule, now time.Time) (*firing, error) {
	sch, err := Decode(rec)
	if err != nil {
		return nil, err
	}
	f := &firing{rec: rec, sch: sch, pol: gate.Policy}
	if sch.Obj.Spec.Suspend {
		return f, nil
	}
	cronSched, loc, err := v1alpha1.ParseCron(sch.Obj.Spec.Schedule, sch.Obj.Spec.TimeZone)
	if err != nil {
		// Validated when written; a time zone the host lost since.
		f.unreadable = "spec.schedule or spec.timeZone cannot be read: " + err.Error()
		return f, nil
	}
	f.cron, f.loc = cronSched, loc
	f.plan = Decide(cronSched, loc, sch.Since(), now, RulesOf(&sch.Obj.Spec))
	name := rec.Name
	// Each tick's runnable passes the gate as its author, by the policy now.
	for _, at := range f.plan.Run {
		req := &submission.Request{
			Runnable: sch.Obj.RunnableAt(v1alpha1.TickRunName(name, at),
				map[string]string{v1alpha1.LabelSchedule: name, v1alpha1.LabelScheduledTime: v1alpha1.ScheduledTimeLabel(at)}),
			Author: sch.Author, Via: fmt.Sprintf("schedule %s, tick %s", name, at.UTC().Format(time.RFC3339)),
		}
		f.ticks = append(f.ticks, tick{at: at, req: req, refusal: gate.Prepare(ctx, req)})
	}
	return f, nil
}

// apply carries out f in tx: the runnables of its ticks, what was not
// run, the history pruned, the status and next tick written, provided
// the schedule is still as f read it (store.ErrConflict otherwise).
func (s *Scheduler) apply(ctx context.Context, tx *store.Tx, f *firing, out *fired) error {
	sch, plan, ns, name := f.sch, f.plan, f.rec.Namespace, f.rec.Name
	cur, err := tx.Schedules().Get(ctx, ns, name)
	if err != nil {
		return err
	}
	if cur.ResourceVersion != f.rec.ResourceVersion {
		return fmt.Errorf("schedule %s/%s changed meanwhile: %w", ns, name, store.ErrConflict)
	}
	st := sch.Obj.Status
	if f.unreadable != "" {
		st.Message = f.unreadable
		return s.writeStatusTx(ctx, tx, cur, sch, st, nil)
	}
	st.Message = ""
	runs, err := Runs(ctx, tx, ns, name)
	if err != nil {
		return err
	}
	for _, t := range f.ticks {
		msg, created, err := runTick(ctx, tx, sch, runs, t, byTimetable(sch))
		if err != nil {
			return err
		}
		if created != nil {
			out.notify = true
			out.accepted = append(out.accepted, t.at)
			runs = append(runs, *created)
		} else if msg != "" {
			st.Missed++
		}
		if msg != "" {
			st.Message = msg
		}
	}
	if plan.Missed > 0 {
		st.Missed += plan.Missed
		msg := fmt.Sprintf("%d tick(s) up to %s missed: %s", plan.Missed, plan.Latest.UTC().Format(time.RFC3339), plan.MissedWhy)
		st.Message = joinMessage(st.Message, msg)
		if err := tx.Audit().Append(ctx, &audit.Entry{Actor: Actor, Action: "miss", Kind: v1alpha1.KindSchedule,
			Namespace: ns, Name: name, Summary: msg, Outcome: "Missed"}); err != nil {
			return err
		}
	}
	if runs, err = s.prune(ctx, tx, sch, runs); err != nil {
		return err
	}
	if !plan.Latest.IsZero() {
		latest := plan.Latest.UTC()
		st.LastScheduleTime = &latest
	}
	if sch.Obj.Spec.Suspend {
		st.Message = "suspended: no tick runs until spec.suspend is false"
	}
	FillRuns(&st, runs)
	var next *time.Time
	if !plan.Next.IsZero() && !sch.Obj.Spec.Suspend {
		n := plan.Next.UTC()
		next = &n
	}
	return s.writeStatusTx(ctx, tx, cur, sch, st, next)
}

// acting says who acts for a tick: Note is the audit log's actor of a
// tick not run, Cancel the actor of the cancels of Replace.
type acting struct{ Note, Cancel string }

// byTimetable is who acts for a tick of the timetable: the scheduler
// decides alone what it skips, and cancels with the author's rights.
func byTimetable(sch *Stored) acting { return acting{Note: Actor, Cancel: sch.Author.Name} }

// runTick creates one tick's runnable in tx, under the concurrency
// policy; it returns what the status says of it when no runnable was
// created, and the run created. The timetable and a backfill both run
// their ticks through it.
func runTick(ctx context.Context, tx *store.Tx, sch *Stored, runs []Run, t tick, by acting) (string, *Run, error) {
	ns, name := sch.Obj.Metadata.Namespace, sch.Obj.Metadata.Name
	at := t.at.UTC().Format(time.RFC3339)
	note := func(action, outcome, msg string) (string, *Run, error) {
		return msg, nil, tx.Audit().Append(ctx, &audit.Entry{Actor: by.Note, Action: action, Kind: v1alpha1.KindSchedule,
			Namespace: ns, Name: name, Summary: msg, Outcome: outcome})
	}
	if t.refusal != nil {
		var st *v1alpha1.Status
		why := t.refusal.Error()
		if errors.As(t.refusal, &st) {
			why = st.Message
			if len(st.Details) > 0 {
				why += " (" + v1alpha1.FieldErrors(st.Details).String() + ")"
			}
		}
		return note("refuse", "Refused", fmt.Sprintf("tick %s created no runnable: %s", at, why))
	}
	if _, err := tx.Runnables().Get(ctx, ns, t.req.Runnable.Metadata.Name); err == nil {
		return "", nil, nil // done already, by another scheduler or before a restart
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", nil, err
	}
	var active []Run
	for _, r := range runs {
		if !v1alpha1.Phase(r.Rec.Phase).Terminal() {
			active = append(active, r)
		}
	}
	switch sch.Obj.Spec.ConcurrencyPolicy {
	case v1alpha1.ConcurrencyForbid:
		if len(active) > 0 {
			return note("skip", "Skipped", fmt.Sprintf("tick %s skipped: run %s is still %s (concurrencyPolicy Forbid)", at, active[0].Rec.Name, active[0].Rec.Phase))
		}
	case v1alpha1.ConcurrencyReplace:
		for _, r := range active {
			cur, err := lifecycle.Decode(r.Rec)
			if err != nil {
				return "", nil, err
			}
			if _, err := lifecycle.Apply(ctx, tx, cur, submission.CancelTransition(by.Cancel,
				fmt.Sprintf("cancelled %s/%s (was %s): replaced by the tick %s of schedule %s (concurrencyPolicy Replace)", ns, r.Rec.Name, r.Rec.Phase, at, name))); err != nil {
				return "", nil, err
			}
			r.Rec.Phase = string(v1alpha1.PhaseCancelled)
		}
	}
	out, err := submission.Create(ctx, tx, t.req)
	if err != nil {
		return "", nil, err
	}
	if !out.Created {
		return "", nil, nil // the name is taken: the tick is done
	}
	return "", &Run{Rec: out.Rec, Tick: t.at.UTC()}, nil
}

// prune removes the ended runs beyond the schedule's history limits,
// oldest first, each with its audit entry; it returns the runs kept.
func (s *Scheduler) prune(ctx context.Context, tx *store.Tx, sch *Stored, runs []Run) ([]Run, error) {
	keepOK, keepFailed := historyLimits(&sch.Obj.Spec)
	sortNewestFirst(runs)
	var kept []Run
	var ok, failed int32
	for _, r := range runs {
		phase := v1alpha1.Phase(r.Rec.Phase)
		if !phase.Terminal() {
			kept = append(kept, r)
			continue
		}
		limit, count := keepFailed, &failed
		if phase == v1alpha1.PhaseSucceeded {
			limit, count = keepOK, &ok
		}
		if *count < limit {
			*count++
			kept = append(kept, r)
			continue
		}
		removed, err := removeRun(ctx, tx, sch, r)
		if err != nil {
			return nil, err
		}
		if !removed {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// historyLimits are how many succeeded and failed runs a schedule keeps.
func historyLimits(spec *v1alpha1.ScheduleSpec) (keepOK, keepFailed int32) {
	keepOK, keepFailed = v1alpha1.DefaultSuccessfulRunsHistoryLimit, v1alpha1.DefaultFailedRunsHistoryLimit
	if n := spec.SuccessfulRunsHistoryLimit; n != nil {
		keepOK = *n
	}
	if n := spec.FailedRunsHistoryLimit; n != nil {
		keepFailed = *n
	}
	return keepOK, keepFailed
}

// removeRun removes one ended run as the API's DELETE of an ended
// runnable does; a cancelled one whose copy is still being removed from
// its cluster waits for the next look.
func removeRun(ctx context.Context, tx *store.Tx, sch *Stored, r Run) (bool, error) {
	rec, err := tx.Runnables().Get(ctx, r.Rec.Namespace, r.Rec.Name)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	attempts, err := tx.Attempts().List(ctx, rec.UID)
	if err != nil {
		return false, err
	}
	if n := len(attempts); n > 0 && attempts[n-1].EndedAt == nil {
		return false, nil
	}
	cur, err := lifecycle.Decode(rec)
	if err != nil {
		return false, err
	}
	summary := fmt.Sprintf("deleted %s/%s, which had ended %s: beyond the history limits of schedule %s", rec.Namespace, rec.Name, rec.Phase, sch.Obj.Metadata.Name)
	return true, lifecycle.Remove(ctx, tx, cur, lifecycle.ByAPI, Actor, audit.Entry{Action: "delete", Summary: summary})
}

func (s *Scheduler) writeStatusTx(ctx context.Context, tx *store.Tx, cur *store.Schedule, _ *Stored, st v1alpha1.ScheduleStatus, next *time.Time) error {
	st.NextScheduleTime = next
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if bytes.Equal(data, cur.Status) && sameTime(next, cur.NextTick) {
		// Nothing to say: another scheduler said it first. Not writing
		// keeps the schedule's version, so its other writers do not
		// conflict for nothing.
		return nil
	}
	cur.Status, cur.NextTick = data, next
	return tx.Schedules().Update(ctx, cur)
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// FillRuns writes the active runs and the latest ones into st.
func FillRuns(st *v1alpha1.ScheduleStatus, runs []Run) {
	sortNewestFirst(runs)
	st.Active, st.LastRuns = nil, nil
	for _, r := range runs {
		if !v1alpha1.Phase(r.Rec.Phase).Terminal() {
			st.Active = append(st.Active, v1alpha1.ScheduleRunRef{Name: r.Rec.Name, UID: r.Rec.UID})
		}
		if len(st.LastRuns) < lastRunsShown {
			st.LastRuns = append(st.LastRuns, v1alpha1.ScheduleRun{Name: r.Rec.Name, Tick: r.Tick, Phase: v1alpha1.Phase(r.Rec.Phase)})
		}
	}
}

func sortNewestFirst(runs []Run) {
	sort.SliceStable(runs, func(i, j int) bool {
		if !runs[i].Tick.Equal(runs[j].Tick) {
			return runs[i].Tick.After(runs[j].Tick)
		}
		return runs[i].Rec.Name > runs[j].Rec.Name
	})
}

// Run is one runnable of a schedule.
type Run struct {
	Rec *store.Runnable
	// Tick is the tick it was created for, or the time of a manual run.
	Tick time.Time
}

// Runs lists the runnables of schedule ns/name: those named after it that
// carry its label.
func Runs(ctx context.Context, tx *store.Tx, ns, name string) ([]Run, error) {
	runs, err := RunsOf(ctx, tx, ns, []string{name})
	return runs[name], err
}

// maxRuns bounds the runs read of one schedule.
const maxRuns = 1000

// RunsOf lists the runs of the schedules names of namespace ns, by one
// query: the runnables named after one of them, each of the schedule its
// label names (the runs of "a" and of "a-b" share the prefix "a-").
func RunsOf(ctx context.Context, tx *store.Tx, ns string, names []string) (map[string][]Run, error) {
	prefixes := make([]string, len(names))
	want := make(map[string]bool, len(names))
	for i, name := range names {
		prefixes[i], want[name] = name+"-", true
	}
	recs, err := tx.Runnables().ListByNamePrefixes(ctx, ns, prefixes, maxRuns)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Run, len(names))
	for _, rec := range recs {
		var doc store.Document[json.RawMessage]
		if err := json.Unmarshal(rec.Spec, &doc); err != nil {
			return nil, fmt.Errorf("runnable %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
		}
		name := doc.Labels[v1alpha1.LabelSchedule]
		if !want[name] || !strings.HasPrefix(rec.Name, name+"-") || len(out[name]) >= maxRuns {
			continue
		}
		at, err := time.Parse(scheduledTimeLayout, doc.Labels[v1alpha1.LabelScheduledTime])
		if err != nil {
			at = rec.CreatedAt
		}
		out[name] = append(out[name], Run{Rec: rec, Tick: at.UTC()})
	}
	return out, nil
}

// scheduledTimeLayout reads the purser.io/scheduled-time label.
const scheduledTimeLayout = "2006-01-02T15-04-05Z"

// Stored is a schedule as stored, decoded.
type Stored struct {
	Obj    *v1alpha1.Schedule
	Author policy.User
	// At is when the schedule's timetable last started: its creation, a
	// change of its schedule or time zone, its resumption. Ticks before
	// it are not caught up.
	At time.Time
}

// Since is the time after which ticks are due: the last tick dealt with,
// or when the timetable started.
func (s *Stored) Since() time.Time {
	since := s.At
	if l := s.Obj.Status.LastScheduleTime; l != nil && l.After(since) {
		since = *l
	}
	return since
}

// Decode reads a stored schedule.
func Decode(rec *store.Schedule) (*Stored, error) {
	var doc store.Document[v1alpha1.ScheduleSpec]
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, fmt.Errorf("schedule %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
	}
	obj := &v1alpha1.Schedule{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindSchedule},
		Metadata: v1alpha1.ObjectMeta{Name: rec.Name, Namespace: rec.Namespace, UID: rec.UID, Labels: doc.Labels, Annotations: doc.Annotations,
			ResourceVersion: fmt.Sprint(rec.ResourceVersion), CreationTimestamp: rec.CreatedAt},
		Spec: doc.Spec,
	}
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &obj.Status); err != nil {
			return nil, fmt.Errorf("schedule %s/%s: stored status: %w", rec.Namespace, rec.Name, err)
		}
	}
	out := &Stored{Obj: obj, At: rec.CreatedAt}
	if doc.Author != nil {
		out.Author = policy.User{Name: doc.Author.Name, Groups: slices.Clone(doc.Author.Groups)}
	}
	if doc.At != nil {
		out.At = *doc.At
	}
	return out, nil
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
