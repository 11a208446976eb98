package store

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// A connection to a PostgreSQL server that vanished without closing it (a
// lost data center, a partition) would otherwise hang every statement sent
// on it until TCP gives up retransmitting, some fifteen minutes: keepalives
// find an idle one dead within seconds, and TCP_USER_TIMEOUT fails one
// whose data goes unacknowledged (tcpUserTimeout, Linux). The pool then
// drops it, and the next connection goes, through a multi-host DSN, to
// whichever node is primary now.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	unackedTimeout    = 10 * time.Second
)

// openPgx opens a database/sql pool on dsn whose connections are dialled
// as above.
func openPgx(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The DSN is not part of the message: it may carry a password.
		return nil, fmt.Errorf("malformed DSN")
	}
	timeout := cfg.ConnectTimeout
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{
			Timeout:         timeout,
			KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
			Control:         tcpUserTimeout(unackedTimeout),
		}
		return d.DialContext(ctx, network, addr)
	}
	return stdlib.OpenDB(*cfg), nil
}
