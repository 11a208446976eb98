package store

import (
	"fmt"
	"testing"
)

func testOutbox(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	var msgs []*OutboxMessage
	for i := range 3 {
		m := &OutboxMessage{Subject: "submissions", MsgID: fmt.Sprintf("msg-%d", i), Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		mustTx(t, s, func(tx *Tx) error { return tx.Outbox().Enqueue(ctx, m) })
		if m.ID == 0 || m.CreatedAt.IsZero() {
			t.Fatalf("enqueue did not fill ID and CreatedAt: %+v", m)
		}
		msgs = append(msgs, m)
	}
	empty := &OutboxMessage{Subject: "events", MsgID: "empty"}
	mustTx(t, s, func(tx *Tx) error { return tx.Outbox().Enqueue(ctx, empty) })

	pending, err := s.PendingOutbox(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].ID != msgs[0].ID || pending[1].ID != msgs[1].ID {
		t.Fatalf("PendingOutbox(2) = %+v, want the two oldest", pending)
	}
	if p := pending[1]; p.Subject != "submissions" || p.MsgID != "msg-1" || string(p.Data) != `{"n":1}` ||
		!p.CreatedAt.Equal(msgs[1].CreatedAt) {
		t.Fatalf("stored message differs: %+v", p)
	}

	// Deleting acknowledged messages, including one already gone.
	if err := s.DeleteOutbox(ctx, []int64{msgs[0].ID, msgs[2].ID, 999999}); err != nil {
		t.Fatal(err)
	}
	pending, err = s.PendingOutbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].MsgID != "msg-1" || pending[1].MsgID != "empty" || len(pending[1].Data) != 0 {
		t.Fatalf("after delete: %+v", pending)
	}

	// More IDs than one DELETE statement takes.
	var ids []int64
	mustTx(t, s, func(tx *Tx) error {
		ids = ids[:0]
		for i := range 1200 {
			m := &OutboxMessage{Subject: "bulk", MsgID: fmt.Sprint(i), Data: []byte("x")}
			if err := tx.Outbox().Enqueue(ctx, m); err != nil {
				return err
			}
			ids = append(ids, m.ID)
		}
		return nil
	})
	for _, p := range pending {
		ids = append(ids, p.ID)
	}
	if err := s.DeleteOutbox(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if pending, err = s.PendingOutbox(ctx, 10); err != nil || len(pending) != 0 {
		t.Fatalf("after deleting everything: %d pending, %v", len(pending), err)
	}
	if err := s.DeleteOutbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
