package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNotFound means the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique key is taken, or the caller's
	// ResourceVersion is stale.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable wraps connection-level failures (the server is down,
	// unreachable, restarting, out of disk, or the Store is closed), which
	// the API turns into 503 with Retry-After.
	ErrUnavailable = errors.New("database unavailable")
	// ErrBadContinue means a list's Continue token was not produced by
	// this package (a 400 for the API).
	ErrBadContinue = errors.New("malformed continue token")
)

// classify marks err with the sentinel a caller acts on, keeping the
// driver's error in the chain for retryable and for logs.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
		return err
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case isForeignKeyViolation(err):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isConnectionError(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		c := liteErr.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23503"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	return false
}

// isConnectionError reports failures of the database as a service, as
// opposed to failures of a statement: the ones a client can only wait out.
func isConnectionError(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		// Checked before the context errors below because pgx reports its
		// own connect_timeout as a DeadlineExceeded inside a ConnectError.
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller gave up; the database may be perfectly healthy.
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection_exception class
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutting down, starting up
			return true
		case pgErr.Code == "25P03", pgErr.Code == "25P04", pgErr.Code == "57P05":
			// The server ended the session (a transaction idle too long,
			// one too long, a session idle too long); what the transaction
			// did is rolled back, so it may run again. PostgreSQL times
			// these by its wall clock, which a step of it can set off.
			return true
		case pgErr.Code == "53300": // too_many_connections
			return true
		case isReadOnlyError(pgErr.Code): // a standby, or a primary since demoted
			return true
		}
		return false
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() & 0xff {
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL:
			return true
		}
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// database/sql does not export the error it returns once the pool is
	// closed, so its text is the only handle on it.
	return strings.Contains(err.Error(), "sql: database is closed")
}

// retryable reports transient contention that a fresh attempt of the whole
// transaction resolves: SQLITE_BUSY (another process holds the write lock
// past busy_timeout) and PostgreSQL/CockroachDB serialization failures and
// deadlocks, where the server has already rolled the transaction back.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		c := liteErr.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}
