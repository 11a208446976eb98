package outbox

import (
	"context"

	"github.com/purser-io/purser/internal/hub/store"
)

// Store is the database as the relay reads it: the outbox's rows outside
// any writer's transaction.
type Store interface {
	PendingOutbox(ctx context.Context, limit int) ([]*store.OutboxMessage, error)
	DeleteOutbox(ctx context.Context, ids []int64) error
}

// StoreSource is the database outbox as a relay Source.
func StoreSource(s Store) Source { return storeSource{s} }

type storeSource struct{ s Store }

func (src storeSource) Pending(ctx context.Context, limit int) ([]Message, error) {
	rows, err := src.s.PendingOutbox(ctx, limit)
	if err != nil {
		return nil, err
	}
	msgs := make([]Message, len(rows))
	for i, r := range rows {
		msgs[i] = Message{ID: r.ID, Subject: r.Subject, MsgID: r.MsgID, Data: r.Data}
	}
	return msgs, nil
}

func (src storeSource) Delete(ctx context.Context, ids []int64) error {
	return src.s.DeleteOutbox(ctx, ids)
}
