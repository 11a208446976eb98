package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds one folder of goose SQL files per engine, carrying the
// same logical schema under the same version numbers.
//
//go:embed migrations
var migrations embed.FS

// migrate applies pending migrations. Running it on an up-to-date database
// changes nothing, so every process may call Open at start-up.
func (s *Store) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migrations/"+s.d.engine)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{
		// Only the files above, never Go migrations that some other
		// package might have registered globally.
		goose.WithDisableGlobalRegistry(true),
	}
	if s.d.engine == EnginePostgres {
		dialect = goose.DialectPostgres
		// Replicas starting together must not migrate concurrently. A
		// lock row rather than goose's advisory-lock locker, because
		// CockroachDB has no advisory locks. (SQLite has no such
		// lock; see the retry below.)
		locker, err := lock.NewPostgresTableLocker(lock.WithTableLockTimeout(time.Second, 120))
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		opts = append(opts, goose.WithLocker(locker))
	}
	p, err := goose.NewProvider(dialect, s.write, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Not p.Close: that would close s.write, which the Store keeps using.
	var upErr error
	for range 3 {
		if _, upErr = p.Up(ctx); upErr == nil {
			return nil
		}
		// On SQLite, processes opening a fresh file together all see the
		// migration pending and race to apply it. Each migration is one
		// transaction, so the losers roll back cleanly; if nothing is
		// pending any more, another process did the work.
		if pending, err := p.HasPending(ctx); err == nil && !pending {
			return nil
		}
	}
	return fmt.Errorf("migrate: %w", classify(upErr))
}
