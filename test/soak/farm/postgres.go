package farm

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"

	"github.com/purser-io/purser/internal/platform/localport"
)

// Postgres is a PostgreSQL server of the farm's own, which the soak may
// stop, kill and start again: the machine's server is shared with the
// tests of other packages. It runs from the machine's PostgreSQL binaries
// (Debian's /usr/lib/postgresql/N/bin), as the postgres user when the
// farm runs as root (the server refuses root).
type Postgres struct {
	Server *Process
	// DSN is the farm's database on it.
	DSN string

	root string // its folder, outside the farm's, which the server's user must reach
	port int
}

// ErrNoPostgres says that this machine has no PostgreSQL binaries.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin")

// postgresBin returns the folder of the newest PostgreSQL's binaries.
func postgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", ErrNoPostgres
	}
	slices.SortFunc(found, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	return filepath.Dir(found[len(found)-1]), nil
}

func pgVersion(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func (f *Farm) startPostgres(ctx context.Context) (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "purser-soak-pg-")
	if err != nil {
		return nil, err
	}
	pg := &Postgres{root: root}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return pg, fmt.Errorf("postgres: the server refuses to run as root, and: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			return pg, err
		}
	}
	data := filepath.Join(root, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "purser", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.Dir = root
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return pg, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if pg.port, err = localport.Free(); err != nil {
		return pg, err
	}
	// Two replicas of five components, 32 connections each at most, and
	// the soak's own checks.
	p := f.newProcess("postgres", filepath.Join(bin, "postgres"),
		"-D", data, "-p", strconv.Itoa(pg.port), "-k", root,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=500")
	p.workDir, p.cred, p.stopSignal = root, cred, syscall.SIGINT // SIGINT: fast shutdown
	pg.Server = p
	if err := p.Start(); err != nil {
		return pg, err
	}
	admin := fmt.Sprintf("postgres://purser@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	if err := pg.WaitReady(ctx); err != nil {
		return pg, err
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		return pg, err
	}
	defer func() { _ = db.Close() }() // one statement, done
	if _, err := db.ExecContext(ctx, "CREATE DATABASE purser"); err != nil {
		return pg, fmt.Errorf("create the farm's database: %w", err)
	}
	pg.DSN = fmt.Sprintf("postgres://purser@127.0.0.1:%d/purser?sslmode=disable", pg.port)
	return pg, nil
}

// WaitReady waits until the server accepts connections.
func (pg *Postgres) WaitReady(ctx context.Context) error {
	admin := fmt.Sprintf("postgres://purser@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", pg.port)
	db, err := sql.Open("pgx", admin)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // pings only
	return waitFor(ctx, 2*time.Minute, "PostgreSQL", func(ctx context.Context) error { return db.PingContext(ctx) }, pg.Server)
}

// close stops the server (fast shutdown) and removes its folder.
func (pg *Postgres) close() error {
	if pg.Server != nil {
		pg.Server.Stop(30 * time.Second)
	}
	if err := os.RemoveAll(pg.root); err != nil {
		return fmt.Errorf("farm: remove PostgreSQL's folder: %w", err)
	}
	return nil
}
