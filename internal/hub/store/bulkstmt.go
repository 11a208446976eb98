package store

import (
	"context"
	"database/sql"
	"sync"
)

// The statements that write or read a page of rows at once (a page of
// schedules' ticks: hundreds of rows, thousands of parameters) have the
// same text for every full page. SQLite parses a statement every time it
// is run, and one of that size takes milliseconds: a tenth of the time of
// a page. So on SQLite such a statement is prepared on the writer's
// connection once its text was seen, and run prepared from then on.
// PostgreSQL's driver keeps its own cache of prepared statements per
// connection, so there nothing is kept here.

// bulkStatements bounds the texts kept. Only the statements of a full
// chunk (bulkRows rows) are kept, one text for each caller, so the bound
// is well above their number.
const bulkStatements = 64

// bulkCache is the writer's prepared statements, by their text (as
// rebound for the engine).
type bulkCache struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func (c *bulkCache) get(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// prepare prepares the texts seen in a transaction of db's that has just
// ended: the connection it held is free again (SQLite's writer has only
// the one), so preparing cannot wait on it.
func (c *bulkCache) prepare(ctx context.Context, db *sql.DB, texts []string) {
	for _, q := range texts {
		c.mu.Lock()
		_, known := c.stmts[q]
		full := len(c.stmts) >= bulkStatements
		c.mu.Unlock()
		if known || full {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue // run unprepared, as before
		}
		c.mu.Lock()
		if _, known := c.stmts[q]; known || len(c.stmts) >= bulkStatements {
			_ = st.Close()
		} else {
			if c.stmts == nil {
				c.stmts = map[string]*sql.Stmt{}
			}
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *bulkCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
	return nil
}

// bulkStmt is the prepared statement of q for this transaction, or nil
// when q is run as text (not prepared yet: then it is, after this
// transaction; not a full chunk; or not SQLite's writer).
func (tx *Tx) bulkStmt(ctx context.Context, rows int, q string) *sql.Stmt {
	if !tx.bulkable || rows != bulkRows {
		return nil
	}
	st := tx.s.bulk.get(q)
	if st == nil {
		tx.toPrepare = append(tx.toPrepare, q)
		return nil
	}
	return tx.tx.StmtContext(ctx, st)
}

// bulkExec runs q, a statement of a chunk of rows, as exec does.
func (tx *Tx) bulkExec(ctx context.Context, rows int, q string, args ...any) (sql.Result, error) {
	q = tx.s.d.rebind(q)
	if st := tx.bulkStmt(ctx, rows, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.tx.ExecContext(ctx, q, args...)
}

// bulkQuery runs q, a statement of a chunk of rows that returns rows, as
// query does.
func (tx *Tx) bulkQuery(ctx context.Context, rows int, q string, args ...any) (*sql.Rows, error) {
	q = tx.s.d.rebind(q)
	if st := tx.bulkStmt(ctx, rows, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.tx.QueryContext(ctx, q, args...)
}
