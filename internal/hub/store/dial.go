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

// sessionParams are set on every session unless the DSN sets them. The
// other way round, a process that vanished (its data center lost, cut
// off) in the middle of a transaction leaves its session on the server
// idle in transaction, waiting for a next statement that never comes and
// holding its row locks: the audit chain's head row among them, which
// every audited change waits for. Nothing on that socket tells the server
// (the client's FIN never crosses the lost link), so without these it
// holds them for hours. A DC soak saw every write of the farm wait 75 s
// behind one such session, until a failover ended it. purser never waits
// for anything else inside a transaction (Tx), so 15 s idle in one is a
// client that is gone; tcp_user_timeout is the client's unackedTimeout
// on the server's side, for a backend sending to a client that is gone.
var sessionParams = map[string]string{
	"idle_in_transaction_session_timeout": "15s",
	"tcp_user_timeout":                    "10000", // milliseconds
}

// openPgx opens a database/sql pool on dsn whose connections are dialled
// as above, with sessionParams.
func openPgx(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The DSN is not part of the message: it may carry a password.
		return nil, fmt.Errorf("malformed DSN")
	}
	cfg.DialFunc = tcpconn.DialContext(cfg.ConnectTimeout, unackedTimeout)
	for k, v := range sessionParams {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
		}
	}
	return stdlib.OpenDB(*cfg), nil
}
