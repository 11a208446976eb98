//go:build !linux

package tcpconn

import (
	"syscall"
	"time"
)

// tcpUserTimeout is Linux's; elsewhere the keepalives alone find a dead
// connection.
func tcpUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error { return nil }
