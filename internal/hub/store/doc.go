// Package store is purser's database: the source of truth that every
// component meets at (the hub of the design's hub-and-spokes picture).
//
// It holds runnables and their attempts, deployables and their per-cluster
// sync state, registered clusters, the inventory, the hash-chained audit log
// and the outbox. An API request writes its audit entry, its desired state
// and its outbox row in one transaction (Store.Tx), so a change is either
// recorded, announced and applied together or not at all; the outbox relay
// then publishes the rows to the stream and deletes them.
//
// One logical schema runs on two engines: SQLite (modernc.org/sqlite,
// embedded, one writer) for a single machine and PostgreSQL (pgx) beyond it.
// The SQL avoids PostgreSQL-only features where that costs nothing, so that
// CockroachDB, which speaks the same protocol, can serve multi-DC setups.
// Migrations live in migrations/<engine>/ and are applied by Open.
//
// Errors that callers act on are values: ErrNotFound, ErrConflict,
// ErrBadContinue and ErrUnavailable, tested with errors.Is. ErrNotFound and
// ErrConflict returned by an aggregate's method (tx.Runnables().Create, ...)
// leave the transaction usable, so a caller can, for example, try a create
// and fall back to reading the existing object within the same
// transaction.
package store
