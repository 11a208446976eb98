package outbox

import (
	"context"

	"github.com/purser-io/purser/internal/hub/store"
)

// StoreSource is the database outbox as a relay Source.
func StoreSource(s *store.Store) Source { return storeSource{s} }

type storeSource struct{ s *store.Store }

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
