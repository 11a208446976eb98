package farm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// WAN is the network between the data centers of a DC farm. Each DC is a
// network namespace whose only interface besides loopback is a TUN
// interface, wan0, with the address 10.88.0.<n>/24 (DC n) and no other
// route: the namespace can reach the other DCs and nothing else, not
// even the test's own loopback. The WAN reads the IP packets each
// namespace sends out of wan0 and writes each into the namespace of its
// destination, after the link's one-way delay, unless the link is cut:
// then it drops them, both ways, as a partitioned network does (a black
// hole: no reset, no ICMP; connections time out).
//
// Latency lives here because the machines the farm runs on have no
// sch_netem; a userspace link also counts what crosses it, which a test
// reads to show that nothing crossed a cut.
type WAN struct {
	ports []*wanPort

	mu    sync.Mutex
	cut   map[[2]int]bool // links cut, by the DCs' indexes, lower first
	delay time.Duration   // one way, on every link

	readers, writers sync.WaitGroup
	closed           atomic.Bool
}

// wanPort is one DC's end of the WAN.
type wanPort struct {
	dc   string
	addr netip.Addr
	tun  *os.File
	out  chan wanPacket // towards this DC, in the order due
	// forwarded[j] and dropped[j] count the packets from DC j to this one.
	forwarded, dropped []atomic.Int64
}

type wanPacket struct {
	due  time.Time
	data []byte
}

// WANSubnet is the DCs' network; DC n (from 1) has address .n in it.
var WANSubnet = netip.MustParsePrefix("10.88.0.0/24")

// DCAddr is the address of the n-th DC (from 1).
func DCAddr(n int) netip.Addr {
	b := WANSubnet.Addr().As4()
	b[3] = byte(n)
	return netip.AddrFrom4(b)
}

// wanQueue bounds the packets in flight towards one DC; beyond it the
// link drops, as a router's queue would.
const wanQueue = 8192

// newWAN gives each namespace its wan0 and address, and starts moving
// packets between them.
func newWAN(ctx context.Context, namespaces []*Namespace) (*WAN, error) {
	w := &WAN{cut: map[[2]int]bool{}}
	for i, ns := range namespaces {
		tun, err := ns.openTUN("wan0")
		if err != nil {
			return nil, errors.Join(err, w.Close())
		}
		p := &wanPort{dc: ns.Name, addr: DCAddr(i + 1), tun: tun, out: make(chan wanPacket, wanQueue),
			forwarded: make([]atomic.Int64, len(namespaces)), dropped: make([]atomic.Int64, len(namespaces))}
		w.ports = append(w.ports, p)
		prefix := p.addr.String() + "/" + strconv.Itoa(WANSubnet.Bits())
		for _, args := range [][]string{
			{"link", "set", "lo", "up"},
			{"addr", "add", prefix, "dev", "wan0"},
			{"link", "set", "wan0", "up"},
		} {
			if _, err := ns.Run(ctx, "ip", args...); err != nil {
				return nil, errors.Join(fmt.Errorf("WAN: %w", err), w.Close())
			}
		}
	}
	for i := range w.ports {
		w.readers.Go(func() { w.read(i) })
		w.writers.Go(func() { w.write(i) })
	}
	return w, nil
}

// read takes the packets DC i sends and queues each towards its
// destination.
func (w *WAN) read(i int) {
	from := w.ports[i]
	buf := make([]byte, 65536)
	for {
		n, err := from.tun.Read(buf)
		if err != nil {
			return // closed
		}
		pkt := buf[:n]
		if n < 20 || pkt[0]>>4 != 4 {
			continue // not IPv4: the DCs speak IPv4 only
		}
		dst, _ := netip.AddrFromSlice(pkt[16:20])
		j := w.index(dst)
		if j < 0 || j == i {
			continue // nowhere to go: no route out of the WAN
		}
		to := w.ports[j]
		w.mu.Lock()
		cut, delay := w.cut[link(i, j)], w.delay
		w.mu.Unlock()
		if cut {
			to.dropped[i].Add(1)
			continue
		}
		select {
		case to.out <- wanPacket{due: time.Now().Add(delay), data: append([]byte(nil), pkt...)}:
			to.forwarded[i].Add(1)
		default:
			to.dropped[i].Add(1) // the queue is full
		}
	}
}

// write delivers the packets queued towards DC j once they are due.
func (w *WAN) write(j int) {
	to := w.ports[j]
	for pkt := range to.out {
		if d := time.Until(pkt.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := to.tun.Write(pkt.data); err != nil && w.closed.Load() {
			// Drain without writing: the interface is gone.
			continue
		}
	}
}

func (w *WAN) index(a netip.Addr) int {
	for i, p := range w.ports {
		if p.addr == a {
			return i
		}
	}
	return -1
}

func link(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}

// Isolate cuts every link of DC i (from 0), both ways; the links between
// the other DCs stay.
func (w *WAN) Isolate(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i {
			w.cut[link(i, j)] = true
		}
	}
}

// Rejoin restores every link of DC i.
func (w *WAN) Rejoin(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		delete(w.cut, link(i, j))
	}
}

// Isolated reports whether every link of DC i is cut.
func (w *WAN) Isolated(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i && !w.cut[link(i, j)] {
			return false
		}
	}
	return true
}

// SetDelay sets the one-way delay of every link (a round trip between two
// DCs takes twice that).
func (w *WAN) SetDelay(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delay = d
}

// LinkCounts are the packets that crossed, and were dropped on, the link
// from DC i to DC j (from 0).
func (w *WAN) LinkCounts(i, j int) (forwarded, dropped int64) {
	return w.ports[j].forwarded[i].Load(), w.ports[j].dropped[i].Load()
}

// Close removes the interfaces (closing a TUN removes it) and stops.
func (w *WAN) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, p := range w.ports {
		if err := p.tun.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, err)
		}
	}
	// The readers end on the closed files; then nothing queues any more.
	w.readers.Wait()
	for _, p := range w.ports {
		close(p.out)
	}
	w.writers.Wait()
	return errors.Join(errs...)
}
