package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/purser-io/purser/internal/platform/localport"
)

// Proxy is a TCP proxy in front of an endpoint that a test can cut, to
// stand for a network partition, and restore. While cut, its port refuses
// connections and every connection that was open is closed. It keeps its
// address across a cut, so clients reconnect to the same place.
//
// Hold stands for the other kind of partition, one that TCP outlasts:
// connections stay open, but nothing sent either way arrives until
// Release delivers it all, as retransmission does once a partition heals.
// ReleaseToTarget heals one way only: requests arrive, answers do not.
type Proxy struct {
	target string
	addr   string
	listen func(network, addr string) (net.Listener, error)
	// closed ends the dials in flight when the proxy is closed.
	closed       context.Context
	closeDialing context.CancelFunc

	mu    sync.Mutex
	ln    net.Listener // nil while cut or closed
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // the accept loop and the copy goroutines
	done  bool
	// held[toTarget] and held[toClient] are closed by their release; nil
	// while that direction is not held.
	held [2]chan struct{}
}

// Directions of a proxied connection.
const (
	toTarget = iota
	toClient
)

// NewProxy listens on listen (e.g. "127.0.0.1:0") and forwards every
// connection to target. Port 0 picks a port from localport, which stays
// free for Restore while the proxy is cut.
func NewProxy(listen, target string) (*Proxy, error) {
	ln, err := listenStable(listen)
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	return newProxy(ln, net.Listen, target), nil
}

// NewProxyOn is NewProxy listening on addr (a fixed port) through listen,
// for a proxy whose listening side lives elsewhere than its dialling side
// (in another network namespace, say). A cut closes the listener and a
// restore calls listen again.
func NewProxyOn(listen func(network, addr string) (net.Listener, error), addr, target string) (*Proxy, error) {
	ln, err := listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	return newProxy(ln, listen, target), nil
}

// newProxy serves ln, and listens again through listen on a restore.
func newProxy(ln net.Listener, listen func(network, addr string) (net.Listener, error), target string) *Proxy {
	p := &Proxy{target: target, addr: ln.Addr().String(), listen: listen, conns: map[net.Conn]struct{}{}}
	p.closed, p.closeDialing = context.WithCancel(context.Background())
	p.serve(ln)
	return p
}

// Addr is host:port that clients connect to.
func (p *Proxy) Addr() string { return p.addr }

// Cut stops accepting and closes every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return errors.New("proxy closed")
	}
	if p.ln != nil {
		return nil
	}
	ln, err := p.listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy restore %s: %w", p.addr, err)
	}
	p.serveLocked(ln)
	return nil
}

// Hold keeps every connection open but delivers nothing more, in either
// direction, until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for dir := range p.held {
		if p.held[dir] == nil {
			p.held[dir] = make(chan struct{})
		}
	}
}

// Release delivers what was held, in order, and lets traffic flow again.
// A Cut drops what was held instead.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(toTarget)
	p.releaseLocked(toClient)
}

// ReleaseToTarget delivers what clients sent, and what they send from now
// on, while the target's answers stay held.
func (p *Proxy) ReleaseToTarget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(toTarget)
}

func (p *Proxy) releaseLocked(dir int) {
	if p.held[dir] != nil {
		close(p.held[dir])
		p.held[dir] = nil
	}
}

// gate returns, before data is passed on in direction dir, once that
// direction is not held; false when the connection was closed meanwhile
// (by a cut or a close).
func (p *Proxy) gate(dst net.Conn, dir int) bool {
	p.mu.Lock()
	held := p.held[dir]
	p.mu.Unlock()
	if held == nil {
		return true
	}
	<-held
	p.mu.Lock()
	defer p.mu.Unlock()
	_, open := p.conns[dst]
	return open
}

// Close cuts the proxy for good and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	p.closeLocked()
	p.mu.Unlock()
	p.closeDialing()
	p.wg.Wait()
	return nil
}

// closeLocked closes the listener and every connection; what was held is
// dropped with them.
func (p *Proxy) closeLocked() {
	p.releaseLocked(toTarget)
	p.releaseLocked(toClient)
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed by Cut or Close
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(ln, conn)
			}()
		}
	}()
}

// forward pipes one client connection to the target until either side
// closes or the proxy is cut.
func (p *Proxy) forward(ln net.Listener, client net.Conn) {
	var d net.Dialer
	upstream, err := d.DialContext(p.closed, "tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // cut while we dialed
		p.mu.Unlock()
		client.Close()
		upstream.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[upstream] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn, dir int) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !p.gate(dst, dir) {
					break
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Closing both ends unblocks the other direction.
		dst.Close()
		src.Close()
	}
	go pipe(upstream, client, toTarget)
	go pipe(client, upstream, toClient)
	wg.Wait()

	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, upstream)
	p.mu.Unlock()
}

// listenStable listens on addr, choosing the port with localport when addr
// says port 0, and trying others when another process took it first.
func listenStable(addr string) (net.Listener, error) {
	// Binding a local address does not wait on anything a context could
	// cancel.
	var lc net.ListenConfig
	ctx := context.Background()
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return lc.Listen(ctx, "tcp", addr)
	}
	for range 100 {
		var p int
		if p, err = localport.Free(); err != nil {
			return nil, err
		}
		var ln net.Listener
		if ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return nil, err
}
