// Package storetest gives tests fresh databases of both engines the store
// supports, so that one test body runs on SQLite and on PostgreSQL.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx", for raw access
	_ "modernc.org/sqlite"             // driver "sqlite", for raw access

	"github.com/purser-io/purser/internal/hub/audit"
)

// Engine is one database engine; NewDSN provisions a fresh, empty database
// for one test and removes it when the test ends.
type Engine struct {
	Name   string
	NewDSN func(t testing.TB) string
}

// Engines lists SQLite and PostgreSQL. The PostgreSQL half needs
// PURSER_TEST_POSTGRES (a DSN whose role may CREATE DATABASE): without it
// the half is skipped on a workstation and fails in CI, where a skip would
// hide it.
func Engines() []Engine {
	return []Engine{
		{Name: "sqlite", NewDSN: func(t testing.TB) string {
			return filepath.Join(t.TempDir(), "data", "purser.db")
		}},
		{Name: "postgres", NewDSN: NewPostgresDatabase},
	}
}

// NewPostgresDatabase creates a database for one test and drops it after.
func NewPostgresDatabase(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("PURSER_TEST_POSTGRES")
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PURSER_TEST_POSTGRES is unset; CI must run the PostgreSQL half of the tests")
		}
		t.Skip("PostgreSQL half skipped: set PURSER_TEST_POSTGRES to a DSN whose role may CREATE DATABASE, " +
			"e.g. postgres://purser:purser@127.0.0.1:5432/purser_test?sslmode=disable (bash .ci/postgres prints one)")
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	name := "purser_t_" + hex.EncodeToString(suffix[:])
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		_ = db.Close()
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		// FORCE: a store the test forgot to close must not keep the database.
		// An autovacuum worker on it makes FORCE fail for a role that may not
		// end it; it finishes in moments, so try again before giving up.
		var err error
		for range 10 {
			if _, err = db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			t.Logf("drop test database %s: %v (left behind)", name, err)
		}
		_ = db.Close()
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// IsPostgres reports whether dsn names a PostgreSQL database.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// RawDB opens the database behind the store's back, as an operator with a
// database shell (or an intruder) would, to check what is really stored.
func RawDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	driver, source := "pgx", dsn
	if !IsPostgres(dsn) {
		// The store may hold the write lock a moment; wait for it.
		driver, source = "sqlite", strings.TrimPrefix(dsn, "sqlite:")+"?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Rebind turns ? placeholders into $1, $2 ... for PostgreSQL.
func Rebind(dsn, q string) string {
	if !IsPostgres(dsn) {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ForgeAuditTail does what someone with the database's password can: it
// rewrites every audit entry from seq on (entries is the whole chain, oldest
// first) with a new summary and recomputed hashes, and moves the head
// along, so that the chain still verifies on its own.
func ForgeAuditTail(t testing.TB, dsn string, entries []*audit.Entry, from int64) {
	t.Helper()
	raw := RawDB(t, dsn)
	prev := audit.GenesisHash
	if from > 1 {
		prev = entries[from-2].Hash
	}
	for _, e := range entries[from-1:] {
		e.Summary, e.PrevHash = "nothing to see here", prev
		e.Hash = audit.ComputeHash(*e)
		if _, err := raw.ExecContext(t.Context(), Rebind(dsn, `UPDATE audit_log SET summary = ?, prev_hash = ?, hash = ? WHERE seq = ?`),
			e.Summary, e.PrevHash, e.Hash, e.Seq); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
	}
	if _, err := raw.ExecContext(t.Context(), Rebind(dsn, `UPDATE audit_head SET last_hash = ? WHERE id = 1`), prev); err != nil {
		t.Fatal(err)
	}
}

// CutAuditTail does what someone with the database's password can to hide
// the newest entries: it deletes every audit entry after seq and moves the
// head back to seq, so that the shorter chain verifies on its own.
func CutAuditTail(t testing.TB, dsn string, seq int64) {
	t.Helper()
	raw := RawDB(t, dsn)
	var hash string
	if err := raw.QueryRowContext(t.Context(), Rebind(dsn, `SELECT hash FROM audit_log WHERE seq = ?`), seq).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(t.Context(), Rebind(dsn, `DELETE FROM audit_log WHERE seq > ?`), seq); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(t.Context(), Rebind(dsn, `UPDATE audit_head SET last_seq = ?, last_hash = ? WHERE id = 1`), seq, hash); err != nil {
		t.Fatal(err)
	}
}

// AppendAuditByHand does what someone with the database's password but
// not purser's key file can to add an entry: it appends e after the
// chain's head with a correct hash chain (seq, prevHash, hash) and moves
// the head to it, but cannot give it a MAC.
func AppendAuditByHand(t testing.TB, dsn string, e *audit.Entry) {
	t.Helper()
	raw := RawDB(t, dsn)
	// In one transaction that takes the head first (a no-op update locks
	// its row on PostgreSQL and the database on SQLite), as purser's own
	// writers do: the farm's components may be appending meanwhile.
	tx, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(t.Context(), `UPDATE audit_head SET last_seq = last_seq WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(t.Context(), `SELECT last_seq, last_hash FROM audit_head WHERE id = 1`).Scan(&e.Seq, &e.PrevHash); err != nil {
		t.Fatal(err)
	}
	e.Seq++
	e.Time = audit.CanonicalTime(e.Time)
	e.Hash = audit.ComputeHash(*e)
	ts := any(e.Time)
	if !strings.HasPrefix(dsn, "postgres") {
		ts = e.Time.Format("2006-01-02T15:04:05.000000Z") // the store's layout of SQLite times
	}
	if _, err := tx.ExecContext(t.Context(), Rebind(dsn, `INSERT INTO audit_log (seq, logged_at, actor, action, kind, namespace, name,
		summary, outcome, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`),
		e.Seq, ts, e.Actor, e.Action, e.Kind, e.Namespace, e.Name, e.Summary, e.Outcome, e.PrevHash, e.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), Rebind(dsn, `UPDATE audit_head SET last_seq = ?, last_hash = ? WHERE id = 1`), e.Seq, e.Hash); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
