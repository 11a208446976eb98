// Package localport hands out loopback ports for servers that stop and
// start again on the same port: sandbox kube-apiservers, embedded NATS
// servers and test proxies.
//
// A port from the kernel (listening on port 0) lies in its ephemeral range
// (32768 and up on Linux), from which it also picks the source ports of
// outgoing connections. While such a server is down, its port can be taken
// by another listener on port 0, or by a client that keeps dialing it and,
// on loopback, connects to itself (TCP simultaneous open, when the kernel
// picks that very port as the source); the restart then fails with
// "address already in use". Nobody is handed a port below the ephemeral
// range without asking for it, so the ports here come from there.
package localport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
)

const (
	low  = 20000
	high = 32000 // below the ephemeral range's usual start, 32768
)

// Free returns a loopback port below the ephemeral range that is free now.
// Another process may take it before the caller listens on it; a caller
// that can, retries with another port then.
func Free() (int, error) {
	// Binding a loopback port does not wait on anything a context could
	// cancel.
	var lc net.ListenConfig
	for range 200 {
		port := low + rand.IntN(high-low)
		l, err := lc.Listen(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, errors.New("no free loopback port between 20000 and 32000")
}

// FreeN returns n distinct ports as Free does.
func FreeN(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := Free()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}
