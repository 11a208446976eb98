// Package feed is the one reader of a change sequence that every watch of
// the API shares: a single reader reads what changed since its last
// position and hands each batch to every subscriber, so a thousand open
// watches cost one query per change committed, not a thousand. A Source
// says how to read the sequence: the inventory's (store.Inventory.Changes,
// New) or that of purser's own kinds (store.OwnFeed, NewOwn). It reads
// when the writer says it committed changes (Config.Changes), and every
// Poll besides, for a word lost. Subscribers filter what they were given;
// the feed knows no selection and no user.
package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Reader is the database as the feed reads it.
type Reader interface {
	Read(ctx context.Context, fn func(*store.Tx) error) error
}

// Source is a change sequence as the feed reads it; C is one change.
type Source[C any] interface {
	// Head is the position the sequence stands at now.
	Head(ctx context.Context) (int64, error)
	// Since reads, in one snapshot, every change after after and the
	// position they lead up to.
	Since(ctx context.Context, after int64) (changes []C, head int64, err error)
}

// Changes tells of changes committed to the inventory
// (stream.Client.OnInventoryChanged).
type Changes interface {
	OnInventoryChanged(fn func()) (stop func(), err error)
}

// Config configures a Feed; zero values take the defaults.
type Config struct {
	// Store is the inventory's database, for New.
	Store Reader
	// Changes, when set, wakes the feed as soon as the ingester commits,
	// so that a change reaches the watches in a few milliseconds.
	Changes Changes
	// Poll is how often the sequence is read while anyone subscribes,
	// whatever Changes says: 250ms without Changes, which bounds what a
	// watch adds to an ingest's latency, and 1s with it, for a word lost.
	Poll time.Duration
	// MinGap is the least time between the starts of two reads: 10ms,
	// which bounds the database's load however often Changes speaks
	// (any holder of the stream's credentials may speak on its subject).
	MinGap time.Duration
	// Backlog is how many batches a subscriber may fall behind before it
	// is dropped (its channel closed, Err saying why): 64.
	Backlog int
	Logger  *slog.Logger // nil: discarded
	// Name names the feed in its logs and its queue: "inventory-feed".
	Name string
}

// PageSize is how many changes one query of a poll (or of Between) reads.
const PageSize = 1000

// Batch is what one poll found: the changes after the previous batch's
// Head, up to and including Head, in their order.
type Batch[C any] struct {
	Changes []C
	// Head is the position the subscriber stands at after this batch;
	// a batch without changes still moves it (bookmarks).
	Head int64
	// Memo is shared by every subscriber of the batch: what one of them
	// made of a change (its encoding), the others reuse.
	Memo *sync.Map
}

// ErrBehind ends a subscription whose reader fell behind.
var ErrBehind = errors.New("the watch read too slowly and fell behind; watch again")

// Feed is the shared poller. Its loop runs while it has subscribers.
type Feed[C any] struct {
	cfg Config
	src Source[C]
	log *slog.Logger

	mu     sync.Mutex
	subs   map[*Subscription[C]]bool
	head   int64
	cancel context.CancelFunc // of the running loop; nil when stopped
	done   chan struct{}      // closed when the running loop returns
	polls  int64
	wakes  int64
}

// New returns the feed of the inventory's changes (cfg.Store); it reads
// nothing until someone subscribes.
func New(cfg Config) *Feed[store.InventoryChange] {
	return NewOf[store.InventoryChange](cfg, inventory{cfg.Store})
}

// NewOf returns a feed of src; it reads nothing until someone subscribes.
func NewOf[C any](cfg Config, src Source[C]) *Feed[C] {
	switch {
	case cfg.Poll > 0:
	case cfg.Changes != nil:
		cfg.Poll = time.Second
	default:
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = 10 * time.Millisecond
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 64
	}
	if cfg.Name == "" {
		cfg.Name = "inventory-feed"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed[C]{cfg: cfg, src: src, log: log, subs: map[*Subscription[C]]bool{}}
}

// Subscription receives every batch after From.
type Subscription[C any] struct {
	f *Feed[C]
	// From is the position the subscription starts after: its first
	// batch holds the changes numbered above it.
	From   int64
	events chan Batch[C]
	err    error // why events closed; set before it closes
}

// Events delivers the batches; it is closed when the subscription ends
// otherwise than by Close (Err says why).
func (s *Subscription[C]) Events() <-chan Batch[C] { return s.events }

// Err says why Events was closed.
func (s *Subscription[C]) Err() error { return s.err }

// Close ends the subscription; the last one out stops the poller.
func (s *Subscription[C]) Close() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.subs[s] {
		return
	}
	delete(f.subs, s)
	f.stopIfIdle()
}

// Stats says how many subscribers the feed serves, how many reads it
// made and how many words of a change woke it, for metrics and
// benchmarks.
type Stats struct {
	Subscribers int
	Polls       int64
	Wakes       int64
}

// Stats returns the feed's counts.
func (f *Feed[C]) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Subscribers: len(f.subs), Polls: f.polls, Wakes: f.wakes}
}

// Subscribe joins the feed, starting the poller (after reading where the
// sequence stands) when it is not running.
func (f *Feed[C]) Subscribe(ctx context.Context) (*Subscription[C], error) {
	f.mu.Lock()
	if f.cancel == nil {
		// The first read runs under the lock: subscribers arriving meanwhile
		// wait for it rather than start a second loop.
		head, err := f.src.Head(ctx)
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		if f.done != nil {
			// A loop stopping after the last subscriber left: wait for it,
			// so that two loops never run at once.
			done := f.done
			f.mu.Unlock()
			<-done
			f.mu.Lock()
		}
		if f.cancel == nil {
			f.head = max(f.head, head)
			loopCtx, cancel := context.WithCancel(context.Background())
			f.cancel, f.done = cancel, make(chan struct{})
			go f.loop(loopCtx, f.done)
		}
	}
	s := &Subscription[C]{f: f, From: f.head, events: make(chan Batch[C], f.cfg.Backlog)}
	f.subs[s] = true
	f.mu.Unlock()
	return s, nil
}

// stopIfIdle ends the loop when nobody listens; f.mu is held.
func (f *Feed[C]) stopIfIdle() {
	if len(f.subs) == 0 && f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
}

// loop reads on each word of a change and every Poll, never two reads
// closer than MinGap: the words coalesce in the queue's one key, so a
// burst of commits costs one read, and a word that comes during a read
// costs one more after it.
func (f *Feed[C]) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	var last time.Time
	q := reconcile.New(func(ctx context.Context, _ struct{}) (reconcile.Result, error) {
		if wait := f.cfg.MinGap - time.Since(last); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		last = time.Now()
		f.poll(ctx)
		return reconcile.Result{RequeueAfter: f.cfg.Poll}, nil
	}, reconcile.Config[struct{}]{Name: f.cfg.Name})
	if f.cfg.Changes != nil {
		stop, err := f.cfg.Changes.OnInventoryChanged(func() {
			f.mu.Lock()
			f.wakes++
			f.mu.Unlock()
			q.Add(struct{}{})
		})
		if err != nil {
			f.log.Warn(f.cfg.Name+": cannot hear of changes; polling only", "poll", f.cfg.Poll, "err", err)
		} else {
			defer stop()
		}
	}
	q.Add(struct{}{})
	_ = q.Run(ctx)
}

// poll reads every change after the feed's head, in one snapshot, and
// hands it to every subscriber.
func (f *Feed[C]) poll(ctx context.Context) {
	f.mu.Lock()
	from := f.head
	f.polls++
	f.mu.Unlock()
	changes, head, err := f.src.Since(ctx, from)
	b := Batch[C]{Changes: changes, Head: head, Memo: &sync.Map{}}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn(f.cfg.Name+": poll failed; trying again", "err", err)
		}
		return // the next poll reads from the same position
	}
	if b.Head <= from {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head = b.Head
	for s := range f.subs {
		select {
		case s.events <- b:
		default:
			s.err = ErrBehind
			close(s.events)
			delete(f.subs, s)
		}
	}
	f.stopIfIdle()
}

// inventory is the inventory's change sequence.
type inventory struct{ s Reader }

func (i inventory) Head(ctx context.Context) (int64, error) {
	var h store.FeedHead
	err := i.s.Read(ctx, func(tx *store.Tx) error {
		var err error
		h, err = tx.Inventory().FeedHead(ctx)
		return err
	})
	return h.Seq, err
}

func (i inventory) Since(ctx context.Context, from int64) ([]store.InventoryChange, int64, error) {
	return since(ctx, i.s, from,
		func(ctx context.Context, tx *store.Tx) (store.FeedHead, error) { return tx.Inventory().FeedHead(ctx) },
		func(ctx context.Context, tx *store.Tx, after int64) ([]store.InventoryChange, error) {
			return tx.Inventory().Changes(ctx, after, PageSize, true)
		},
		func(c store.InventoryChange) int64 { return c.Seq })
}

// since reads, in one snapshot, a sequence's head and its changes after
// from up to that head: what a source's Since answers.
func since[C any](ctx context.Context, db Reader, from int64,
	head func(context.Context, *store.Tx) (store.FeedHead, error),
	changes func(ctx context.Context, tx *store.Tx, after int64) ([]C, error),
	seq func(C) int64,
) ([]C, int64, error) {
	var out []C
	var at int64
	err := db.Read(ctx, func(tx *store.Tx) error {
		h, err := head(ctx, tx)
		if err != nil {
			return err
		}
		at = h.Seq
		out, err = Between(from, h.Seq, func(after int64) ([]C, error) { return changes(ctx, tx, after) }, seq)
		return err
	})
	return out, at, err
}

// Between reads the changes of a sequence after from up to to, a page
// (of PageSize) at a time: page answers those after a position, in
// order; seq is a change's position.
func Between[C any](from, to int64, page func(after int64) ([]C, error), seq func(C) int64) ([]C, error) {
	var out []C
	for after := from; after < to; {
		p, err := page(after)
		if err != nil {
			return nil, err
		}
		for _, c := range p {
			if seq(c) <= to {
				out = append(out, c)
			}
		}
		if len(p) < PageSize {
			break
		}
		after = seq(p[len(p)-1])
	}
	return out, nil
}
