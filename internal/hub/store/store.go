package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Transactor is the database as a component sees it: transactions that
// write (Tx) and transactions that only read (Read). Components take it,
// not *Store, so that their tests and the composition root may hand in
// what they like; each then uses only the aggregates of Tx it needs.
type Transactor interface {
	Tx(ctx context.Context, fn func(*Tx) error) error
	Read(ctx context.Context, fn func(*Tx) error) error
}

// Store is a handle on purser's database. It is safe for concurrent use.
type Store struct {
	d dialect
	// bulk is the writer's prepared statements of pages of rows (SQLite).
	bulk bulkCache
	// write runs read-write transactions. On SQLite it holds exactly one
	// connection: SQLite admits one writer at a time anyway, and queueing
	// in database/sql is cheaper and fairer than spinning on SQLITE_BUSY.
	write *sql.DB
	// read runs read-only transactions. On SQLite it is a separate pool of
	// query_only connections, which WAL lets read while the writer writes;
	// on PostgreSQL it is the same pool as write.
	read     *sql.DB
	readOpts *sql.TxOptions
	now      func() time.Time
	// idleConns is the write pool's idle limit, restored after
	// CheckWrites drops the idle connections.
	idleConns int
	// standby, when attached, serves Read while the primary is away.
	standby *standby
	// audited is called after every commit that appended to the audit
	// chain (OnAuditCommit).
	audited atomic.Pointer[func()]
	// mac authenticates the audit entries this process appends, and
	// checks them when the chain is verified (SetAuditMAC).
	mac atomic.Pointer[audit.MAC]
}

// SetAuditMAC has every audit entry this Store appends carry its MAC
// under m, and VerifyAudit check the MACs of the chain's entries: so that
// an entry appended by someone who can write the database but does not
// hold purser's key is found. Every component that writes the database
// sets the same one (compose.OpenHub).
func (s *Store) SetAuditMAC(m *audit.MAC) { s.mac.Store(m) }

// OnAuditCommit has f called after every commit of a transaction that
// appended to the audit chain, so that the chain's new head is anchored at
// once (internal/hub/anchor) rather than at the next poll. f must not block.
func (s *Store) OnAuditCommit(f func()) { s.audited.Store(&f) }

// Open connects to the database named by dsn and applies any pending
// migrations. A dsn starting with postgres:// or postgresql:// selects
// PostgreSQL; anything else is the path of a SQLite file, optionally
// prefixed with "sqlite:", whose folder is created if missing. Connection
// failures are reported as ErrUnavailable.
func Open(ctx context.Context, dsn string) (*Store, error) {
	var (
		s   *Store
		err error
	)
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		s, err = openPostgres(ctx, dsn)
	} else {
		s, err = openSQLite(ctx, dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	dsn, conns, err := postgresParams(dsn)
	if err != nil {
		return nil, err
	}
	db, err := openPgx(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres: %w", classify(err))
	}
	return &Store{
		d:     dialect{engine: EnginePostgres},
		write: db,
		read:  db,
		// Repeatable read gives fn one snapshot across all its queries,
		// which costs PostgreSQL nothing for a read-only transaction.
		readOpts:  &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		now:       func() time.Time { return truncate(time.Now()) },
		idleConns: conns,
	}, nil
}

// DefaultPoolMaxConns is how many connections a process opens at most
// when the DSN does not say (pool_max_conns): enough for the API's
// concurrency without exhausting max_connections when replicas share a
// server.
const DefaultPoolMaxConns = 32

// postgresParams takes purser's own parameters out of a PostgreSQL DSN
// (the server would refuse them as unknown settings) and adds defaults:
//   - pool_max_conns, the most connections this process opens (default
//     DefaultPoolMaxConns);
//   - connect_timeout 10 s unless set, so that a black-holed address yields
//     ErrUnavailable promptly instead of hanging until the caller's
//     deadline.
func postgresParams(dsn string) (string, int, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// The DSN is not part of the message: it may carry a password.
		return "", 0, errors.New("open postgres: malformed DSN")
	}
	q := u.Query()
	conns := DefaultPoolMaxConns
	if q.Has("pool_max_conns") {
		conns, err = strconv.Atoi(q.Get("pool_max_conns"))
		if err != nil || conns < 1 {
			return "", 0, fmt.Errorf("open postgres: pool_max_conns=%q: want a whole number of at least 1", q.Get("pool_max_conns"))
		}
		q.Del("pool_max_conns")
	}
	if !q.Has("connect_timeout") {
		q.Set("connect_timeout", "10")
	}
	u.RawQuery = q.Encode()
	return u.String(), conns, nil
}

func openSQLite(ctx context.Context, dsn string) (*Store, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "sqlite:")
	switch {
	case path == "":
		return nil, errors.New("open sqlite: empty path")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// The writer and reader pools must see the same database, which an
		// in-memory database or a URI with its own parameters would defeat.
		return nil, fmt.Errorf("open sqlite: %q: want a plain file path", path)
	case strings.Contains(path, "?"):
		return nil, fmt.Errorf("open sqlite: %q: a path may not contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	if err := restrictFiles(path); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}

	// busy_timeout first, so the other settings wait for a lock held by
	// another process rather than fail. synchronous=FULL because an API
	// answer promises the change survives a power cut, not just a crash.
	common := "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	write, err := sql.Open("sqlite", path+common+"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// Connect the writer before any reader exists: it creates the file and
	// switches it to WAL, which is persistent, so readers find it ready.
	// Switching a fresh file to WAL needs it alone, and SQLite answers
	// SQLITE_BUSY at once, without waiting out busy_timeout, when several
	// processes open the same new file together: retry, briefly.
	var pingErr error
	_ = reconcile.Retry(ctx, reconcile.Backoff(10*time.Millisecond, 500*time.Millisecond), func(ctx context.Context, attempt int) error {
		if pingErr = write.PingContext(ctx); pingErr != nil && retryable(pingErr) && attempt < 19 {
			return pingErr
		}
		return reconcile.Terminal(pingErr)
	})
	if pingErr != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, classify(pingErr))
	}
	// SQLite gives the -wal and -shm files the database file's mode; this
	// covers those an earlier run left with another.
	if err := restrictFiles(path); err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}

	read, err := sql.Open("sqlite", path+common+"&_pragma=query_only(1)")
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	if err := read.PingContext(ctx); err != nil {
		_ = write.Close()
		_ = read.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, classify(err))
	}
	return &Store{
		d:         dialect{engine: EngineSQLite},
		write:     write,
		read:      read,
		readOpts:  &sql.TxOptions{ReadOnly: true},
		now:       func() time.Time { return truncate(time.Now()) },
		idleConns: 1,
	}, nil
}

// Close releases the connections. Calls made after Close fail with
// ErrUnavailable.
func (s *Store) Close() error {
	err := errors.Join(s.bulk.close(), s.write.Close())
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	if s.standby != nil {
		err = errors.Join(err, s.standby.db.Close())
	}
	return err
}

// Engine returns EngineSQLite or EnginePostgres.
func (s *Store) Engine() string { return s.d.engine }

// Ping checks that the database answers; failures wrap ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", asUnavailable(err))
	}
	if s.read != s.write {
		if err := s.read.PingContext(ctx); err != nil {
			return fmt.Errorf("ping: %w", asUnavailable(err))
		}
	}
	return nil
}

// asUnavailable treats any failed ping as the database being unavailable,
// which is what a readiness probe needs to know, except when the caller's
// own context ended.
func asUnavailable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return classify(err)
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Tx is a database transaction handed to the function given to Store.Tx or
// Store.Read. It must not be used after that function returns.
//
// The tables are reached through it by aggregate (Runnables, Attempts,
// LeftoverCopies, Deployables, Inventory, Clusters, Kinds, Agents, Audit,
// Outbox, Leases), each a small value holding the transaction, so that the
// code of a component says which parts of the state it touches.
type Tx struct {
	tx      *sql.Tx
	s       *Store
	audited bool // AuditLog.Append was called
	// auditBuf, in a GroupCommit's transaction, collects the audit
	// entries to append at the group's end; after DeferAudit, those to
	// append at this transaction's end (deferred is then the same).
	auditBuf *[]*audit.Entry
	deferred *[]*audit.Entry
	// clustersLocked are the clusters whose inventory this transaction
	// holds the lock of (Inventory.LockClusters): taken once, held until
	// the end.
	clustersLocked map[string]bool
	// feedLocked: this transaction holds the row lock of the inventory's
	// change sequence (Inventory.lockFeed), the first of its locks.
	feedLocked bool
	// bulkable: statements of a page of rows run prepared (SQLite's
	// writer); toPrepare are those to prepare once this one has ended
	// (bulkstmt.go).
	bulkable  bool
	toPrepare []string
}

// DeferAudit makes the audit entries this transaction appends from now
// on be appended when its function has returned, just before the commit:
// the audit chain's head, whose lock an append takes and holds to the
// commit, is then held for the commit alone, not for the rest of the
// transaction's writes (which concurrent writers of the chain would wait
// through). Their Seq, PrevHash and Hash are set then, not at Append.
func (tx *Tx) DeferAudit() {
	if tx.auditBuf == nil {
		var entries []*audit.Entry
		tx.auditBuf, tx.deferred = &entries, &entries
	}
}

func (tx *Tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return tx.tx.ExecContext(ctx, tx.s.d.rebind(q), args...)
}

func (tx *Tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return tx.tx.QueryContext(ctx, tx.s.d.rebind(q), args...)
}

func (tx *Tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return tx.tx.QueryRowContext(ctx, tx.s.d.rebind(q), args...)
}

// checkUpdated turns the outcome of an optimistic UPDATE into nil,
// ErrConflict (the row moved on) or ErrNotFound (there is no row).
func (tx *Tx) checkUpdated(ctx context.Context, res sql.Result, err error, table, keyColumn, key string, rv int64) error {
	if err != nil {
		return classify(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return classify(err)
	}
	if n == 1 {
		return nil
	}
	var current int64
	err = tx.queryRow(ctx, `SELECT resource_version FROM `+table+` WHERE `+keyColumn+` = ?`, key).Scan(&current)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", keyColumn, key, ErrNotFound)
	case err != nil:
		return classify(err)
	}
	return fmt.Errorf("resourceVersion %d is stale, current is %d: %w", rv, current, ErrConflict)
}

// mustExist returns ErrNotFound unless table has a row whose keyColumn is key.
func (tx *Tx) mustExist(ctx context.Context, table, keyColumn, key string) error {
	var one int
	err := tx.queryRow(ctx, `SELECT 1 FROM `+table+` WHERE `+keyColumn+` = ?`, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %s=%s: %w", table, keyColumn, key, ErrNotFound)
	}
	return classify(err)
}

// maxAttempts bounds how often Tx and Read run fn when the database asks
// for a retry; contention that outlasts this is reported to the caller.
const maxAttempts = 5

// Tx runs fn in a read-write transaction and commits it if fn returns nil;
// any error from fn rolls everything back and is returned unchanged.
//
// When the database reports transient contention (SQLITE_BUSY, a
// serialization failure or a deadlock) the transaction is rolled back and fn
// runs again, up to a few times. fn must therefore have no effects outside
// tx, and must read inside tx what it modifies, because the objects it
// changed during a failed attempt (ResourceVersion, ID, Seq) are not rolled
// back in memory. Connection failures wrap ErrUnavailable; a failure during
// COMMIT is not retried, since the outcome is then unknown.
//
// PostgreSQL runs it at READ COMMITTED (CockroachDB at SERIALIZABLE): the
// methods of the aggregates are written so that their guarantees
// (optimistic updates, unique names, one audit chain) hold at either level.
// fn must not call Tx on the same Store: on SQLite the single write
// connection is taken, so a nested Tx waits for itself until ctx ends.
func (s *Store) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	return s.run(ctx, s.write, nil, fn)
}

// Read runs fn in a read-only transaction that sees one consistent snapshot.
// It retries like Tx. While UseStandby is on it reads from the attached
// standby; a context from WithReadInfo learns which, and how current.
func (s *Store) Read(ctx context.Context, fn func(tx *Tx) error) error {
	db, standby := s.readPool()
	if ctx.Value(readInfoKey{}) == nil {
		return s.run(ctx, db, s.readOpts, fn)
	}
	return s.run(ctx, db, s.readOpts, func(tx *Tx) error {
		if err := tx.recordRead(ctx, standby); err != nil {
			return err
		}
		return fn(tx)
	})
}

func (s *Store) run(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *Tx) error) error {
	// Between two runs of a transaction that collided: 2 ms doubled at
	// each retry, lengthened by up to as much again, so that transactions
	// that collided do not collide again in lockstep.
	// The error goes back as fn or the database returned it, never
	// wrapped: callers compare it.
	return reconcile.Tries(ctx, reconcile.Contention(2*time.Millisecond), maxAttempts, retryable, func(ctx context.Context) error {
		return s.once(ctx, db, opts, fn)
	})
}

func (s *Store) once(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *Tx) error) error {
	sqlTx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", classify(err))
	}
	done := false
	defer func() {
		// Also reached when fn panics, so that the connection goes back
		// to the pool clean before the panic continues.
		if !done {
			_ = sqlTx.Rollback()
		}
	}()
	tx := &Tx{tx: sqlTx, s: s, bulkable: db == s.write && s.d.engine == EngineSQLite}
	defer func() {
		if len(tx.toPrepare) > 0 {
			_ = sqlTx.Rollback() // a no-op once committed; the connection back first
			done = true
			s.bulk.prepare(ctx, db, tx.toPrepare)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if tx.deferred != nil {
		entries := *tx.deferred
		tx.auditBuf, tx.deferred = nil, nil
		if err := tx.Audit().AppendMany(ctx, entries); err != nil {
			return err
		}
	}
	done = true
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", classify(err))
	}
	if f := s.audited.Load(); f != nil && tx.audited {
		(*f)()
	}
	return nil
}

// restrictFiles makes the database file and its WAL and shared-memory
// files readable and writable by the owner only, creating the database
// file so, whatever mode the umask or an earlier version would have given
// them: they hold the audit log, every spec and the sealed values.
func restrictFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
