package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// A process cut off from the database's primary can still answer reads
// from a standby nearby, saying how old the data is. The API does
// (internal/api/server); nothing that writes reads from a standby.

// ReadInfo says where the reads of a request came from.
type ReadInfo struct {
	// Standby: from a standby, not the primary.
	Standby bool
	// AsOf is how current the data is: the primary's transaction time, or
	// the commit time of the last transaction the standby replayed (zero
	// when it never replayed one).
	AsOf time.Time
}

type readInfoKey struct{}

// WithReadInfo returns a context in whose ReadInfo every Read made with
// it records where it read from.
func WithReadInfo(ctx context.Context) (context.Context, *ReadInfo) {
	info := &ReadInfo{}
	return context.WithValue(ctx, readInfoKey{}, info), info
}

// standby is a read-only pool on a standby, which Read uses while
// useStandby is set.
type standby struct {
	db  *sql.DB
	use atomic.Bool
}

// AttachStandby opens a read-only pool on dsn (a PostgreSQL standby, or
// a multi-host DSN with target_session_attrs=prefer-standby), which Read
// uses instead of the primary while UseStandby(true). Nothing is
// migrated through it. On SQLite there is no standby.
func (s *Store) AttachStandby(ctx context.Context, dsn string) error {
	if s.d.engine != EnginePostgres {
		return fmt.Errorf("a standby needs PostgreSQL")
	}
	dsn, conns, err := postgresParams(dsn)
	if err != nil {
		return err
	}
	db, err := openPgx(dsn)
	if err != nil {
		return fmt.Errorf("open standby: %w", err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s.standby = &standby{db: db}
	return nil
}

// UseStandby switches Read to the standby (on) or back to the primary;
// a no-op without one.
func (s *Store) UseStandby(on bool) {
	if s.standby != nil {
		s.standby.use.Store(on)
	}
}

// ReadPrimary is Read on the primary even while UseStandby is on, for a
// read that decides what is written or published elsewhere: a standby
// can hold commits that never reached the synchronous standby and vanish
// in a failover.
func (s *Store) ReadPrimary(ctx context.Context, fn func(tx *Tx) error) error {
	return s.run(ctx, s.read, s.readOpts, fn)
}

// readPool is the pool Read uses now, and whether it is the standby's.
func (s *Store) readPool() (*sql.DB, bool) {
	if s.standby != nil && s.standby.use.Load() {
		return s.standby.db, true
	}
	return s.read, false
}

// recordRead fills the request's ReadInfo, if it has one, from inside
// the read's transaction.
func (tx *Tx) recordRead(ctx context.Context, standby bool) error {
	info, _ := ctx.Value(readInfoKey{}).(*ReadInfo)
	if info == nil {
		return nil
	}
	var asOf *time.Time
	q := `SELECT ` + tx.s.d.dbNow()
	if standby {
		q = `SELECT pg_last_xact_replay_timestamp()`
	}
	if err := tx.queryRow(ctx, q).Scan(nullTimeCol{&asOf}); err != nil {
		return fmt.Errorf("read freshness: %w", classify(err))
	}
	info.Standby = standby
	if asOf != nil && (info.AsOf.IsZero() || asOf.Before(info.AsOf)) {
		info.AsOf = *asOf // the oldest of the request's reads
	}
	return nil
}

// CheckWrites commits a write of its own, the row name in write_checks,
// and so succeeds only while the database takes this process's commits:
// a primary cut off from its synchronous standby answers queries, but its
// commits wait. After a failure the idle connections are dropped, so
// that the next ones are made afresh (with a multi-host DSN, to whichever
// node is primary by then) rather than reused across a lost network.
func (s *Store) CheckWrites(ctx context.Context, name string) error {
	err := s.Tx(ctx, func(tx *Tx) error {
		if err := tx.writeCheck(ctx, name); err != nil {
			return err
		}
		// Processes that ended: their rows go after a day.
		_, err := tx.exec(ctx, `DELETE FROM write_checks WHERE checked_at < `+tx.s.d.dbNowPlus(), intervalArg(-24*time.Hour))
		return classify(err)
	})
	if err != nil {
		n := s.idleConns
		s.write.SetMaxIdleConns(0)
		s.write.SetMaxIdleConns(n)
		return fmt.Errorf("check writes: %w", err)
	}
	return nil
}

// writeCheck records name's check in write_checks: a write of its own,
// whose commit the database acknowledges only as it does any other.
func (tx *Tx) writeCheck(ctx context.Context, name string) error {
	_, err := tx.exec(ctx, `INSERT INTO write_checks (name, checked_at) VALUES (?, `+tx.s.d.dbNow()+`)
		ON CONFLICT (name) DO UPDATE SET checked_at = excluded.checked_at`, name)
	return classify(err)
}

// isReadOnlyError reports a write refused by a node that is not (or no
// longer) the primary: SQLSTATE 25006, read_only_sql_transaction.
func isReadOnlyError(code string) bool { return strings.EqualFold(code, "25006") }
