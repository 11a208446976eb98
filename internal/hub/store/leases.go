package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Lease is a row of the leases table, through which the replicas of a
// component elect the one that works (see internal/control/lease). Its times are
// the database's clock, not the caller's.
type Lease struct {
	Name        string
	Holder      string
	RenewedAt   time.Time
	ExpiresAt   time.Time
	Transitions int64
}

// dbNow is the database's clock, as a value of a timestamp column; it
// stays the same throughout a statement on both engines (PostgreSQL's
// now() throughout the transaction). SQLite keeps milliseconds, padded
// here to the schema's fixed-width microseconds.
func (d dialect) dbNow() string {
	if d.engine == EnginePostgres {
		return "now()"
	}
	return "strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')"
}

// dbNowPlus is dbNow plus the interval bound to its one placeholder,
// written by intervalArg.
func (d dialect) dbNowPlus() string {
	if d.engine == EnginePostgres {
		return "(now() + CAST(? AS INTERVAL))"
	}
	return "strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?)"
}

// intervalArg spells d in the form both PostgreSQL's interval input and
// SQLite's date modifiers read.
func intervalArg(d time.Duration) string {
	return fmt.Sprintf("%.6f seconds", d.Seconds())
}

const leaseColumns = "name, holder, renewed_at, expires_at, transitions"

// Leases is the leases table as one transaction reads and writes it.
type Leases struct{ tx *Tx }

// Leases returns the leases as tx sees them.
func (tx *Tx) Leases() Leases { return Leases{tx} }

// Try makes holder the holder of the lease name until d after now by
// the database's clock, and reports whether it did, with the lease as it
// then stands. It succeeds when the lease is free (missing, or expired by
// the database's clock) and, if renew is set, when holder holds it
// already. Without renew, a live lease naming holder is not taken: it may
// belong to an earlier life of the same replica that still works.
//
// One conditional statement decides, so of two callers racing for a free
// lease exactly one wins, on either engine. Run it alone in its
// transaction: PostgreSQL's clock is the transaction's start.
func (ls Leases) Try(ctx context.Context, name, holder string, d time.Duration, renew bool) (Lease, bool, error) {
	now, until := ls.tx.s.d.dbNow(), ls.tx.s.d.dbNowPlus()
	var l Lease
	err := ls.tx.queryRow(ctx, `INSERT INTO leases (`+leaseColumns+`) VALUES (?, ?, `+now+`, `+until+`, 0)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, renewed_at = excluded.renewed_at,
			expires_at = excluded.expires_at,
			transitions = leases.transitions + CASE WHEN leases.holder = excluded.holder THEN 0 ELSE 1 END
		WHERE leases.expires_at <= excluded.renewed_at OR (leases.holder = excluded.holder AND ?)
		RETURNING `+leaseColumns, name, holder, intervalArg(d), renew).
		Scan(&l.Name, &l.Holder, timeCol{&l.RenewedAt}, timeCol{&l.ExpiresAt}, &l.Transitions)
	switch {
	case err == nil:
		return l, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Lease{}, false, fmt.Errorf("take lease %s for %s: %w", name, holder, classify(err))
	}
	// Someone else holds it.
	l, err = ls.Get(ctx, name)
	return l, false, err
}

// Release ends holder's lease name at once, so that another replica
// may take it without waiting for it to expire. A lease that holder does
// not hold, or that has expired, is left as it is.
func (ls Leases) Release(ctx context.Context, name, holder string) error {
	now := ls.tx.s.d.dbNow()
	_, err := ls.tx.exec(ctx, `UPDATE leases SET expires_at = `+now+`
		WHERE name = ? AND holder = ? AND expires_at > `+now, name, holder)
	if err != nil {
		return fmt.Errorf("release lease %s of %s: %w", name, holder, classify(err))
	}
	return nil
}

// Get returns the lease name; ErrNotFound if it was never taken.
func (ls Leases) Get(ctx context.Context, name string) (Lease, error) {
	var l Lease
	err := ls.tx.queryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE name = ?`, name).
		Scan(&l.Name, &l.Holder, timeCol{&l.RenewedAt}, timeCol{&l.ExpiresAt}, &l.Transitions)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("lease %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("lease %s: %w", name, classify(err))
	}
	return l, nil
}
