// Package tcpconn dials TCP connections that notice a peer that vanished
// without closing them (a lost data center, a partition that drops
// packets): keepalives find an idle one dead within seconds, and
// TCP_USER_TIMEOUT fails one whose data stays unacknowledged, so that a
// call on it fails instead of hanging until TCP gives up retransmitting
// (some fifteen minutes), and a request sent into the cut is dropped by
// the kernel rather than delivered late, after the partition heals.
// purser's connections to PostgreSQL and to member clusters are dialled
// this way.
package tcpconn

import (
	"context"
	"net"
	"time"
)

// Keepalive timing of Dialer's connections.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
)

// Dialer returns a dialer whose connect gives up after connectTimeout (0:
// none but the context's) and whose connections fail once data stays
// unacknowledged for unacked.
func Dialer(connectTimeout, unacked time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout:         connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
		Control:         tcpUserTimeout(unacked),
	}
}

// DialContext is Dialer(connectTimeout, unacked).DialContext.
func DialContext(connectTimeout, unacked time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return Dialer(connectTimeout, unacked).DialContext
}
