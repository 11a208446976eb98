package tcpconn

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpUserTimeout sets TCP_USER_TIMEOUT (tcp(7)): how long transmitted data
// may stay unacknowledged before the kernel fails the connection.
func tcpUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var sockErr error
		if err := c.Control(func(fd uintptr) {
			sockErr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
		}); err != nil {
			return err
		}
		return sockErr
	}
}
