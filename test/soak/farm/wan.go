package farm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
// then it drops them, as a partitioned network does (a black hole: no
// reset, no ICMP; connections time out).
//
// Each direction of a link is its own: it can be cut while the other
// direction carries packets (a one-way partition: a route withdrawn on
// one side, a firewall rule that drops the return), and it can be slowed
// (a delay with jitter) and made lossy (each packet dropped with a
// probability, drawn from a seeded generator so that a soak's seed
// replays the same pattern of losses for the same packets).
//
// All of this lives here because the machines the farm runs on have no
// sch_netem (tc netem is not available); a userspace link also counts
// what crosses it, by direction, which a test reads to show what crossed
// a cut and what a lossy link dropped.
type WAN struct {
	ports []*wanPort

	mu     sync.Mutex
	cut    map[[2]int]bool      // directions cut, {from, to} by the DCs' indexes
	faults map[[2]int]LinkFault // directions slowed or lossy, {from, to}
	delay  time.Duration        // one way, on every link, beneath the faults
	rng    *rand.Rand           // the losses and the jitter

	readers, writers sync.WaitGroup
	closed           atomic.Bool
}

// LinkFault is what a direction of a link does to each packet besides
// carrying it: it holds it Delay plus up to Jitter (uniform), and drops it
// with probability Loss (0 to 1). A jittered link keeps its packets in
// order, as a path does while its route holds: a packet drawn a shorter
// delay than the one before it waits behind it.
type LinkFault struct {
	Delay, Jitter time.Duration
	Loss          float64
}

func (lf LinkFault) String() string {
	return fmt.Sprintf("delay %s to %s, loss %.1f%%", lf.Delay.Round(time.Millisecond), (lf.Delay + lf.Jitter).Round(time.Millisecond), 100*lf.Loss)
}

// wanPort is one DC's end of the WAN.
type wanPort struct {
	dc   string
	addr netip.Addr
	tun  *os.File
	// out[j] is the queue of the link from DC j to this one, in the
	// order due: a slow link delays only its own packets.
	out []chan wanPacket
	// The packets from DC j to this one: forwarded, dropped by a cut,
	// lost on a lossy link, dropped because the link's queue was full.
	forwarded, cut, lost, overflow []atomic.Int64
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

// wanQueue bounds the packets in flight on one direction of a link;
// beyond it the link drops, as a router's queue would.
const wanQueue = 8192

// newWAN gives each namespace its wan0 and address, and starts moving
// packets between them.
func newWAN(ctx context.Context, namespaces []*Namespace) (*WAN, error) {
	w := &WAN{cut: map[[2]int]bool{}, faults: map[[2]int]LinkFault{}, rng: rand.New(rand.NewPCG(1, 1))}
	n := len(namespaces)
	for i, ns := range namespaces {
		tun, err := ns.openTUN("wan0")
		if err != nil {
			return nil, errors.Join(err, w.Close())
		}
		p := &wanPort{dc: ns.Name, addr: DCAddr(i + 1), tun: tun, out: make([]chan wanPacket, n),
			forwarded: make([]atomic.Int64, n), cut: make([]atomic.Int64, n),
			lost: make([]atomic.Int64, n), overflow: make([]atomic.Int64, n)}
		for j := range n {
			if j != i {
				p.out[j] = make(chan wanPacket, wanQueue)
			}
		}
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
		for j := range w.ports {
			if j != i {
				w.writers.Go(func() { w.write(i, j) })
			}
		}
	}
	return w, nil
}

// Seed reseeds the generator of losses and jitter, so that a soak's seed
// decides them.
func (w *WAN) Seed(seed uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rng = rand.New(rand.NewPCG(seed, 7))
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
		cut, lost, delay := w.decide(i, j)
		switch {
		case cut:
			to.cut[i].Add(1)
			continue
		case lost:
			to.lost[i].Add(1)
			continue
		}
		select {
		case to.out[i] <- wanPacket{due: time.Now().Add(delay), data: append([]byte(nil), pkt...)}:
			to.forwarded[i].Add(1)
		default:
			to.overflow[i].Add(1) // the queue is full
		}
	}
}

// decide says what the link from DC i to DC j does with one packet.
func (w *WAN) decide(i, j int) (cut, lost bool, delay time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut[[2]int{i, j}] {
		return true, false, 0
	}
	delay = w.delay
	lf, ok := w.faults[[2]int{i, j}]
	if !ok {
		return false, false, delay
	}
	if lf.Loss > 0 && w.rng.Float64() < lf.Loss {
		return false, true, 0
	}
	delay += lf.Delay
	if lf.Jitter > 0 {
		delay += time.Duration(w.rng.Int64N(int64(lf.Jitter)))
	}
	return false, false, delay
}

// write delivers the packets of the link from DC i to DC j once they are
// due.
func (w *WAN) write(i, j int) {
	to := w.ports[j]
	for pkt := range to.out[i] {
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

// Isolate cuts every link of DC i (from 0), both ways; the links between
// the other DCs stay.
func (w *WAN) Isolate(i int) {
	w.CutFrom(i)
	w.CutTo(i)
}

// CutFrom cuts every link of DC i one way: what DC i sends is dropped,
// what the others send reaches it. The others stop hearing DC i (its
// heartbeats, its answers), while it hears them: for TCP both ways are
// dead, since no handshake or acknowledgement completes, but a datagram
// or a packet already sent still arrives.
func (w *WAN) CutFrom(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i {
			w.cut[[2]int{i, j}] = true
		}
	}
}

// CutTo cuts every link of DC i the other way: DC i reaches the others,
// nothing of theirs reaches it.
func (w *WAN) CutTo(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i {
			w.cut[[2]int{j, i}] = true
		}
	}
}

// Impair slows every link of DC i, both ways, and makes it lossy as lf
// says.
func (w *WAN) Impair(i int, lf LinkFault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i {
			w.faults[[2]int{i, j}] = lf
			w.faults[[2]int{j, i}] = lf
		}
	}
}

// Rejoin restores every link of DC i, both ways: no cut, no fault (the
// delay of every link, SetDelay, stays).
func (w *WAN) Rejoin(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		for _, l := range [][2]int{{i, j}, {j, i}} {
			delete(w.cut, l)
			delete(w.faults, l)
		}
	}
}

// Isolated reports whether DC i is cut off: every link of it is cut at
// least one way, so that no connection to or from it can be made.
func (w *WAN) Isolated(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.ports {
		if j != i && !w.cut[[2]int{i, j}] && !w.cut[[2]int{j, i}] {
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

// LinkCounts are the packets that crossed, and were dropped on (cut, lost
// or over the queue), the link from DC i to DC j (from 0).
func (w *WAN) LinkCounts(i, j int) (forwarded, dropped int64) {
	s := w.LinkStats(i, j)
	return s.Forwarded, s.Cut + s.Lost + s.Overflow
}

// LinkStats counts the packets sent on the link from DC i to DC j, by
// what became of them.
type LinkStats struct {
	Forwarded, Cut, Lost, Overflow int64
}

// LinkStats is what became of the packets sent from DC i to DC j.
func (w *WAN) LinkStats(i, j int) LinkStats {
	to := w.ports[j]
	return LinkStats{Forwarded: to.forwarded[i].Load(), Cut: to.cut[i].Load(), Lost: to.lost[i].Load(), Overflow: to.overflow[i].Load()}
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
		for _, q := range p.out {
			if q != nil {
				close(q)
			}
		}
	}
	w.writers.Wait()
	return errors.Join(errs...)
}
