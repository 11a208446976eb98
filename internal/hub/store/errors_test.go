package store

import (
	"errors"
	"testing"
	"time"
)

// TestSessionEndedByServer: a transaction whose session PostgreSQL ended
// (here its idle-in-transaction timeout, SQLSTATE 25P03) fails as the
// database unavailable, which the API answers 503 and a client retries,
// not as an internal error.
func TestSessionEndedByServer(t *testing.T) {
	for _, eng := range engines(t) {
		if eng.name != EnginePostgres {
			continue
		}
		s := eng.open(t)
		ctx := t.Context()
		err := s.Tx(ctx, func(tx *Tx) error {
			if _, err := tx.exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = '100ms'`); err != nil {
				return err
			}
			time.Sleep(500 * time.Millisecond)
			_, err := tx.exec(ctx, `SELECT 1`)
			return classify(err)
		})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a session ended by the server: %v, want ErrUnavailable", err)
		}
	}
}
