package feed

import (
	"context"

	"github.com/purser-io/purser/internal/hub/store"
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
	var out []store.OwnChange
	var head int64
	err := o.db.Read(ctx, func(tx *store.Tx) error {
		out = out[:0]
		h, err := tx.OwnFeed().Head(ctx)
		if err != nil {
			return err
		}
		head = h.Seq
		after := from
		for after < h.Seq {
			page, err := tx.OwnFeed().Changes(ctx, after, pageSize)
			if err != nil {
				return err
			}
			for _, c := range page {
				if c.Seq <= h.Seq {
					out = append(out, c)
				}
			}
			if len(page) < pageSize {
				break
			}
			after = page[len(page)-1].Seq
		}
		return nil
	})
	return out, head, err
}
