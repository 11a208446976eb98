package store

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/purser-io/purser/internal/platform/tcpconn"
)

// A connection to a PostgreSQL server that vanished without closing it (a
// lost data center, a partition) would otherwise hang every statement sent
// on it for minutes (tcpconn): the pool drops it after unackedTimeout
// instead, and the next connection goes, through a multi-host DSN, to
// whichever node is primary now.
const unackedTimeout = 10 * time.Second

// openPgx opens a database/sql pool on dsn whose connections are dialled
// as above.
func openPgx(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The DSN is not part of the message: it may carry a password.
		return nil, fmt.Errorf("malformed DSN")
	}
	cfg.DialFunc = tcpconn.DialContext(cfg.ConnectTimeout, unackedTimeout)
	return stdlib.OpenDB(*cfg), nil
}
