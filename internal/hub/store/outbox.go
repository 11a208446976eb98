package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OutboxMessage is a message to publish to the stream. It is written in the
// transaction of the change it announces, so a change is never committed
// without its message nor announced without being committed; the relay
// publishes pending messages and deletes them once the stream acknowledged
// them. Publishing twice is harmless: the stream deduplicates by MsgID.
type OutboxMessage struct {
	ID        int64
	Subject   string
	MsgID     string
	Data      []byte
	CreatedAt time.Time
}

// Outbox is the outbox as one transaction writes to it; the relay reads
// and deletes its rows outside any caller's transaction (Store.PendingOutbox,
// Store.DeleteOutbox).
type Outbox struct{ tx *Tx }

// Outbox returns the outbox as tx sees it.
func (tx *Tx) Outbox() Outbox { return Outbox{tx} }

// Enqueue adds m to the outbox and fills its ID and CreatedAt.
func (ob Outbox) Enqueue(ctx context.Context, m *OutboxMessage) error {
	now := ob.tx.s.now()
	data := m.Data
	if data == nil {
		data = []byte{} // the column is NOT NULL; an empty payload is still a message
	}
	if err := ob.tx.queryRow(ctx, `INSERT INTO outbox (subject, msg_id, data, created_at) VALUES (?, ?, ?, ?)
		RETURNING id`, m.Subject, m.MsgID, data, ob.tx.s.d.ts(now)).Scan(&m.ID); err != nil {
		return fmt.Errorf("enqueue outbox %s: %w", m.Subject, classify(err))
	}
	m.CreatedAt = now
	return nil
}

// EnqueueMany adds ms to the outbox as Enqueue does, in one statement for
// each few hundred, and fills their CreatedAt (not their IDs: nothing
// that writes many reads them back).
func (ob Outbox) EnqueueMany(ctx context.Context, ms []*OutboxMessage) error {
	now := ob.tx.s.now()
	at := ob.tx.s.d.ts(now)
	for part := range slices.Chunk(ms, bulkRows) {
		q := `INSERT INTO outbox (subject, msg_id, data, created_at) VALUES (?, ?, ?, ?)` + strings.Repeat(", (?, ?, ?, ?)", len(part)-1)
		args := make([]any, 0, 4*len(part))
		for _, m := range part {
			data := m.Data
			if data == nil {
				data = []byte{}
			}
			args = append(args, m.Subject, m.MsgID, data, at)
		}
		if _, err := ob.tx.bulkExec(ctx, len(part), q, args...); err != nil {
			return fmt.Errorf("enqueue %d outbox messages: %w", len(part), classify(err))
		}
	}
	for _, m := range ms {
		m.CreatedAt = now
	}
	return nil
}

// PendingOutbox returns up to limit messages (<= 0: 100, capped at 1000),
// oldest first by ID. On PostgreSQL, IDs are drawn before commit, so
// concurrent transactions may commit them out of order and a message may
// appear behind one already returned; relays must not assume strict order
// (each message stands alone, and the stream deduplicates by MsgID).
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]*OutboxMessage, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxPageSize)
	var out []*OutboxMessage
	// From the primary: a message read on a standby may belong to a commit
	// that a failover takes back, and once relayed it cannot be.
	err := s.ReadPrimary(ctx, func(tx *Tx) error {
		out = nil // Read may run this more than once
		rows, err := tx.query(ctx, `SELECT id, subject, msg_id, data, created_at FROM outbox ORDER BY id LIMIT ?`, limit)
		if err != nil {
			return classify(err)
		}
		defer rows.Close()
		for rows.Next() {
			m := &OutboxMessage{}
			if err := rows.Scan(&m.ID, &m.Subject, &m.MsgID, &m.Data, timeCol{&m.CreatedAt}); err != nil {
				return classify(err)
			}
			out = append(out, m)
		}
		return classify(rows.Err())
	})
	if err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	return out, nil
}

// deleteChunk bounds the IN list of one DELETE, well below the bind
// parameter limits of both engines.
const deleteChunk = 500

// DeleteOutbox removes the messages with the given IDs, all in one
// transaction. IDs that are already gone are ignored, so a relay that
// retries after a crash does no harm.
func (s *Store) DeleteOutbox(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.Tx(ctx, func(tx *Tx) error {
		for start := 0; start < len(ids); start += deleteChunk {
			chunk := ids[start:min(start+deleteChunk, len(ids))]
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = id
			}
			q := `DELETE FROM outbox WHERE id IN (?` + strings.Repeat(", ?", len(chunk)-1) + `)`
			if _, err := tx.exec(ctx, q, args...); err != nil {
				return classify(err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete outbox: %w", err)
	}
	return nil
}
