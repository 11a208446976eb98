package feed

import (
	"context"
	"log/slog"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Database is the database as the feed of purser's own kinds uses it: it
// numbers changes (a short write) before it reads them.
type Database interface {
	Reader
	Tx(ctx context.Context, fn func(*store.Tx) error) error
}

// NewOwn returns the feed of the changes of purser's own kinds
// (store.OwnFeed): each poll first numbers what was committed since the
// last, so that a change reaches the watches within a Poll of its commit.
func NewOwn(cfg Config, db Database) *Feed[store.OwnChange] {
	if cfg.Name == "" {
		cfg.Name = "own-kinds-feed"
	}
	return NewOf[store.OwnChange](cfg, own{db})
}

// numberBatch bounds one numbering transaction, which holds the
// sequence's lock: a backlog is numbered over several polls.
const numberBatch = 5000

type own struct{ db Database }

// Number numbers what was committed and not yet numbered.
func Number(ctx context.Context, db Database) error {
	return db.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.OwnFeed().Number(ctx, numberBatch)
		return err
	})
}

func (o own) Head(ctx context.Context) (int64, error) {
	if err := Number(ctx, o.db); err != nil {
		return 0, err
	}
	var h store.FeedHead
	err := o.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		h, err = tx.OwnFeed().Head(ctx)
		return err
	})
	return h.Seq, err
}

func (o own) Since(ctx context.Context, from int64) ([]store.OwnChange, int64, error) {
	if err := Number(ctx, o.db); err != nil {
		return nil, 0, err
	}
	return since(ctx, o.db, from,
		func(ctx context.Context, tx *store.Tx) (store.FeedHead, error) { return tx.OwnFeed().Head(ctx) },
		func(ctx context.Context, tx *store.Tx, after int64) ([]store.OwnChange, error) {
			return tx.OwnFeed().Changes(ctx, after, PageSize)
		},
		func(c store.OwnChange) int64 { return c.Seq })
}

// Retention is how long a change of purser's own kinds is kept once
// numbered: a watch resuming from further back is told 410 Gone and lists
// again, as from a kube-apiserver past its etcd compaction. Client-go's
// watches end every 5 to 10 minutes and resume from their last bookmark,
// well within it.
const Retention = 15 * time.Minute

// keepEvery is how often Keep numbers and prunes.
const keepEvery = time.Minute

// Keep numbers and prunes the change sequence of purser's own kinds every
// minute until ctx is done, so that it stays bounded whether or not anyone
// watches (watches number as they poll). Every API replica runs it; the
// sequence's lock makes them take turns.
func Keep(ctx context.Context, db Database, retention time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reconcile.Every(ctx, keepEvery, func(ctx context.Context) {
		for {
			n := 0
			err := db.Tx(ctx, func(tx *store.Tx) error {
				var err error
				n, err = tx.OwnFeed().Number(ctx, numberBatch)
				return err
			})
			if err != nil || n < numberBatch {
				break
			}
		}
		err := db.Tx(ctx, func(tx *store.Tx) error {
			_, err := tx.OwnFeed().Prune(ctx, time.Now().Add(-retention))
			return err
		})
		if err != nil && ctx.Err() == nil {
			log.Warn("prune the changes of purser's own kinds", "err", err)
		}
	})
}
