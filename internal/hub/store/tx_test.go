package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A transaction whose fn fails leaves no trace: no runnable, no audit entry
// (and no hole in the seq numbers), no outbox row.
func testRollbackLeavesNothing(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	boom := errors.New("validation failed after the writes")
	err := s.Tx(ctx, func(tx *Tx) error {
		if err := tx.Runnables().Create(ctx, newRunnable("team-a", "doomed")); err != nil {
			return err
		}
		if err := tx.Audit().Append(ctx, &audit.Entry{Actor: "alice", Action: "create"}); err != nil {
			return err
		}
		if err := tx.Outbox().Enqueue(ctx, &OutboxMessage{Subject: "submissions", MsgID: "m1", Data: []byte("x")}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || err.Error() != boom.Error() {
		t.Fatalf("Tx returned %v, want fn's error unchanged", err)
	}

	// A panicking fn rolls back too, and the panic reaches the caller.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic in fn was swallowed")
			}
		}()
		_ = s.Tx(ctx, func(tx *Tx) error {
			if err := tx.Runnables().Create(ctx, newRunnable("team-a", "panicked")); err != nil {
				return err
			}
			panic("bug")
		})
	}()

	mustRead(t, s, func(tx *Tx) error {
		for _, name := range []string{"doomed", "panicked"} {
			_, err := tx.Runnables().Get(ctx, "team-a", name)
			wantErr(t, err, ErrNotFound)
		}
		entries, err := tx.Audit().List(ctx, AuditFilter{})
		if err != nil || len(entries) != 0 {
			t.Errorf("audit after rollback = %v, %v", entries, err)
		}
		return nil
	})
	if pending, err := s.PendingOutbox(ctx, 10); err != nil || len(pending) != 0 {
		t.Errorf("outbox after rollback = %v, %v", pending, err)
	}
	entries := appendEntries(t, s, 1)
	if entries[0].Seq != 1 || entries[0].PrevHash != audit.GenesisHash {
		t.Errorf("first entry after a rollback: seq %d prevHash %q, want 1 and genesis", entries[0].Seq, entries[0].PrevHash)
	}
}

// Serialization failures and deadlocks make Tx run fn again from scratch,
// a bounded number of times; other errors do not.
func testRetry(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	serialization := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}

	calls := 0
	err := s.Tx(ctx, func(tx *Tx) error {
		calls++
		// The create of a failed attempt is rolled back, so it does not
		// conflict with the create of the next one.
		if err := tx.Runnables().Create(ctx, newRunnable("team-a", "retried")); err != nil {
			return err
		}
		if calls == 1 {
			return fmt.Errorf("simulated: %w", serialization)
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Tx = %v after %d calls, want success after 2", err, calls)
	}

	calls = 0
	err = s.Tx(ctx, func(*Tx) error { calls++; return &pgconn.PgError{Code: "40P01"} })
	if calls != maxAttempts || err == nil {
		t.Fatalf("persistent deadlock: %d calls, err %v; want %d calls and an error", calls, err, maxAttempts)
	}

	calls = 0
	_ = s.Read(ctx, func(*Tx) error { calls++; return ErrNotFound })
	if calls != 1 {
		t.Fatalf("non-retryable error retried: %d calls", calls)
	}
}

func testUnavailableAfterClose(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping on an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Ping(ctx), ErrUnavailable)
	wantErr(t, s.Tx(ctx, func(*Tx) error { return nil }), ErrUnavailable)
	wantErr(t, s.Read(ctx, func(*Tx) error { return nil }), ErrUnavailable)
	_, err := s.PendingOutbox(ctx, 1)
	wantErr(t, err, ErrUnavailable)
	_, err = s.VerifyAudit(ctx)
	wantErr(t, err, ErrUnavailable)
}

// An unreachable PostgreSQL server is ErrUnavailable, not a generic error.
// This needs no server, so it runs even without PURSER_TEST_POSTGRES.
func TestPostgresUnreachable(t *testing.T) {
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // now nothing listens there
	_, err = Open(t.Context(), "postgres://purser:purser@"+addr+"/purser?sslmode=disable")
	wantErr(t, err, ErrUnavailable)
	if errors.Is(err, context.DeadlineExceeded) && t.Context().Err() != nil {
		t.Fatal("the test's own context expired")
	}
}

// pool_max_conns in a PostgreSQL DSN bounds the process's connections and
// never reaches the server (which would refuse it as an unknown setting);
// a bad value is refused before anything is opened.
func TestPostgresPoolSize(t *testing.T) {
	for _, c := range []struct {
		dsn, want string
		conns     int
	}{
		{"postgres://u@h/db", "postgres://u@h/db?connect_timeout=10", DefaultPoolMaxConns},
		{"postgres://u@h/db?pool_max_conns=4&sslmode=disable", "postgres://u@h/db?connect_timeout=10&sslmode=disable", 4},
		{"postgres://u@h/db?connect_timeout=3", "postgres://u@h/db?connect_timeout=3", DefaultPoolMaxConns},
	} {
		got, conns, err := postgresParams(c.dsn)
		if err != nil || got != c.want || conns != c.conns {
			t.Errorf("postgresParams(%q) = %q, %d, %v; want %q, %d", c.dsn, got, conns, err, c.want, c.conns)
		}
	}
	for _, bad := range []string{"0", "-1", "many", ""} {
		_, err := Open(t.Context(), "postgres://u:secret@127.0.0.1:1/db?pool_max_conns="+bad)
		if err == nil || !strings.Contains(err.Error(), "pool_max_conns") || strings.Contains(err.Error(), "secret") {
			t.Errorf("pool_max_conns=%q: error %v, want one naming the parameter and not the password", bad, err)
		}
	}

	for _, e := range engines(t) {
		if e.name != EnginePostgres {
			continue
		}
		u, err := url.Parse(e.newDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", "2")
		u.RawQuery = q.Encode()
		s := openDSN(t, u.String())
		if n := s.write.Stats().MaxOpenConnections; n != 2 {
			t.Errorf("max open connections %d, want 2", n)
		}
		mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(t.Context(), newRunnable("team-a", "pooled")) })
	}
}

// Opening an existing database again, as every process start does, applies
// nothing and loses nothing; so does opening it from two processes at once.
func testMigrationsIdempotent(t *testing.T, eng engine) {
	dsn := eng.newDSN(t)
	ctx := t.Context()
	first := openDSN(t, dsn)
	mustTx(t, first, func(tx *Tx) error { return tx.Runnables().Create(ctx, newRunnable("team-a", "kept")) })
	appendEntries(t, first, 3)

	second := openDSN(t, dsn) // while the first is still open
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openDSN(t, dsn)
	for _, s := range []*Store{second, third} {
		mustRead(t, s, func(tx *Tx) error {
			_, err := tx.Runnables().Get(ctx, "team-a", "kept")
			return err
		})
		var version int64
		if err := s.write.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if want := latestMigration(t, s.d.engine); version != want {
			t.Errorf("schema version %d, want %d (the newest migration)", version, want)
		}
	}
	if res, err := third.VerifyAudit(ctx); err != nil || res != (VerifyResult{Entries: 3, OK: true}) {
		t.Fatalf("VerifyAudit after reopening = %+v, %v", res, err)
	}
	entries := appendEntries(t, third, 1)
	if entries[0].Seq != 4 {
		t.Fatalf("seq after reopening = %d, want 4", entries[0].Seq)
	}
}

// Replicas starting together race to migrate a fresh database; exactly one
// migrates and the others find the schema ready.
func testConcurrentOpen(t *testing.T, eng engine) {
	dsn := eng.newDSN(t)
	const n = 4
	errs := make(chan error, n)
	stores := make(chan *Store, n)
	for range n {
		go func() {
			s, err := Open(t.Context(), dsn)
			errs <- err
			stores <- s
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
		if s := <-stores; s != nil {
			t.Cleanup(func() { _ = s.Close() })
		}
	}
}

// When the server drops the Store's connections (a restart, a failover, an
// administrator), calls that happen to use a dropped connection fail with
// ErrUnavailable, never an unclassified error, and the Store then carries
// on with new connections. Connections idle for over a second are checked
// before reuse (pgx's stdlib does that), so after a restart that took
// longer than that, the first call already succeeds.
func TestPostgresConnectionsDropped(t *testing.T) {
	eng := engines(t)[1]
	s := eng.open(t)
	ctx := t.Context()
	mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(ctx, newRunnable("team-a", "before")) })

	admin, err := sql.Open("pgx", os.Getenv("PURSER_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	var dbName string
	if err := s.write.QueryRowContext(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	dropAll := func() {
		t.Helper()
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName); err != nil {
			t.Fatal(err)
		}
		// Termination is asynchronous; wait until the backends are gone so
		// that the test does not race their exit.
		sandboxtest.Eventually(t, 30*time.Second, "backends gone after pg_terminate_backend", func(ctx context.Context) error {
			var n int
			if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName).Scan(&n); err != nil {
				return err
			}
			if n != 0 {
				return fmt.Errorf("%d backends still alive", n)
			}
			return nil
		})
	}
	get := func() error {
		return s.Tx(ctx, func(tx *Tx) error {
			_, err := tx.Runnables().Get(ctx, "team-a", "before")
			return err
		})
	}

	// Right after the drop: each call that draws a dead connection fails
	// as unavailable and discards it; then calls succeed again.
	dropAll()
	recovered := false
	for range 10 {
		err := get()
		if err == nil {
			recovered = true
			break
		}
		wantErr(t, err, ErrUnavailable)
	}
	if !recovered {
		t.Fatal("store did not recover from dropped connections")
	}

	// A drop followed by a pause, as in a restart: no call fails.
	dropAll()
	time.Sleep(1100 * time.Millisecond)
	if err := get(); err != nil {
		t.Fatalf("first call after connections were dropped and went idle: %v", err)
	}
}

// latestMigration is the version of the newest embedded migration file of
// an engine, so that adding a migration does not break the test.
func latestMigration(t *testing.T, engine string) int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrations, "migrations/"+engine)
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}
