package farm

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// newTestWAN starts n namespaces joined by a WAN, skipping where the test
// may not create namespaces (not root).
func newTestWAN(t *testing.T, n int) ([]*Namespace, *WAN) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	var nss []*Namespace
	for i := range n {
		ns, err := newNamespace("dc-" + string(rune('1'+i)))
		if err != nil {
			t.Fatal(err)
		}
		nss = append(nss, ns)
		t.Cleanup(ns.close)
	}
	w, err := newWAN(t.Context(), nss)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return nss, w
}

// echo serves an echo server inside ns on addr until the test ends.
func echo(t *testing.T, ns *Namespace, addr string) {
	t.Helper()
	ln, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c) // until either side closes
				c.Close()
			}()
		}
	}()
}

// roundTrip dials addr from ns and sends one line through it.
func roundTrip(ctx context.Context, ns *Namespace, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := ns.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	return err
}

func TestWANCut(t *testing.T) {
	nss, w := newTestWAN(t, 3)
	ctx := t.Context()
	addr := func(i int) string { return DCAddr(i+1).String() + ":7000" }
	for i, ns := range nss {
		echo(t, ns, addr(i))
	}
	for _, ns := range nss {
		for j := range nss {
			if err := roundTrip(ctx, ns, addr(j)); err != nil {
				t.Fatalf("%s to %s before any cut: %v", ns.Name, nss[j].Name, err)
			}
		}
	}

	// A DC cut off reaches only itself, both ways; the others still reach
	// each other.
	w.Isolate(1)
	_, droppedBefore := w.LinkCounts(0, 1)
	forwardedBefore, _ := w.LinkCounts(0, 1)
	for i, ns := range nss {
		for j := range nss {
			err := roundTrip(ctx, ns, addr(j))
			crosses := (i == 1) != (j == 1)
			switch {
			case crosses && err == nil:
				t.Errorf("%s reached %s across the cut", ns.Name, nss[j].Name)
			case !crosses && err != nil:
				t.Errorf("%s to %s, not across the cut: %v", ns.Name, nss[j].Name, err)
			}
		}
	}
	forwarded, dropped := w.LinkCounts(0, 1)
	if forwarded != forwardedBefore || dropped == droppedBefore {
		t.Errorf("link dc-1 -> dc-2 during the cut: %d packets forwarded (want none), %d dropped (want some)",
			forwarded-forwardedBefore, dropped-droppedBefore)
	}
	w.Rejoin(1)
	if err := roundTrip(ctx, nss[0], addr(1)); err != nil {
		t.Errorf("dc-1 to dc-2 after the cut healed: %v", err)
	}
}

// TestWANNoWayOut: a DC's namespace has no route but the WAN's, and does
// not share the test's loopback.
func TestWANNoWayOut(t *testing.T) {
	nss, _ := newTestWAN(t, 2)
	ctx := t.Context()
	routes, err := nss[0].Run(ctx, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(routes), "\n") {
		if strings.HasPrefix(line, "default") {
			t.Errorf("a default route: %s", line)
		}
		if f := strings.Fields(line); len(f) > 2 && !strings.Contains(line, "dev lo") && !strings.Contains(line, "dev wan0") {
			t.Errorf("a route through something else than wan0: %s", line)
		}
	}
	links, err := nss[0].Run(ctx, "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(links), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] != "lo:" && f[1] != "wan0:" {
			t.Errorf("an interface besides lo and wan0: %s", line)
		}
	}
	// The test's own loopback is not the namespace's.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c, err := nss[0].Dial(dctx, "tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Errorf("dc-1 reached the test's loopback at %s", ln.Addr())
	}
}

// TestWANDelay: a round trip across a link with a one-way delay d takes
// at least 2d.
func TestWANDelay(t *testing.T) {
	nss, w := newTestWAN(t, 2)
	ctx := t.Context()
	addr := DCAddr(2).String() + ":7000"
	echo(t, nss[1], addr)
	const d = 5 * time.Millisecond
	w.SetDelay(d)
	c, err := nss[0].Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	for range 5 {
		start := time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*d {
			t.Fatalf("round trip %s, below twice the one-way delay %s", rtt, d)
		}
	}
}

// TestWANOneWay: a DC whose packets out are dropped is heard by nobody,
// while what the others send still reaches it, and the reverse; the
// counts say which direction carried what.
func TestWANOneWay(t *testing.T) {
	nss, w := newTestWAN(t, 3)
	ctx := t.Context()
	addr := func(i int) string { return DCAddr(i+1).String() + ":7000" }
	for i, ns := range nss {
		echo(t, ns, addr(i))
	}
	if err := roundTrip(ctx, nss[0], addr(1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cut  func(int)
		// heard: the packets of dc-1 to dc-2 cross, answered: those
		// of dc-2 to dc-1.
		heard, answered bool
	}{
		{"dc-2 heard by nobody", w.CutFrom, true, false},
		{"dc-2 hears nobody", w.CutTo, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cut(1)
			defer w.Rejoin(1)
			if !w.Isolated(1) {
				t.Errorf("a DC cut one way on every link is not reported cut off")
			}
			if w.Isolated(0) {
				t.Errorf("dc-1, whose link to dc-3 is whole, is reported cut off")
			}
			to, back := w.LinkStats(0, 1), w.LinkStats(1, 0)
			// A connection needs both ways: neither side can open one.
			if err := roundTrip(ctx, nss[0], addr(1)); err == nil {
				t.Errorf("dc-1 reached dc-2 across a one-way cut")
			}
			if err := roundTrip(ctx, nss[1], addr(0)); err == nil {
				t.Errorf("dc-2 reached dc-1 across a one-way cut")
			}
			if err := roundTrip(ctx, nss[0], addr(2)); err != nil {
				t.Errorf("dc-1 to dc-3, not across the cut: %v", err)
			}
			to2, back2 := w.LinkStats(0, 1), w.LinkStats(1, 0)
			check := func(dir string, before, after LinkStats, crosses bool) {
				fwd, cut := after.Forwarded-before.Forwarded, after.Cut-before.Cut
				if crosses && (fwd == 0 || cut != 0) {
					t.Errorf("%s, which is not cut: %d forwarded (want some), %d dropped by the cut (want none)", dir, fwd, cut)
				}
				if !crosses && (fwd != 0 || cut == 0) {
					t.Errorf("%s, which is cut: %d forwarded (want none), %d dropped by the cut (want some)", dir, fwd, cut)
				}
			}
			check("dc-1 -> dc-2", to, to2, c.heard)
			check("dc-2 -> dc-1", back, back2, c.answered)
		})
	}
	if err := roundTrip(ctx, nss[1], addr(0)); err != nil {
		t.Errorf("dc-2 to dc-1 after the cuts healed: %v", err)
	}
}

// udpPair opens a UDP socket in from, connected to a UDP socket it
// returns in to, at to's address and port.
func udpPair(t *testing.T, from, to *Namespace, toAddr string) (send net.Conn, recv net.PacketConn) {
	t.Helper()
	var err error
	if ierr := to.inside(func() {
		var lc net.ListenConfig
		recv, err = lc.ListenPacket(context.Background(), "udp4", toAddr)
	}); ierr != nil || err != nil {
		t.Fatal(ierr, err)
	}
	t.Cleanup(func() { _ = recv.Close() }) // a test socket: nothing to flush
	send, err = from.Dial(t.Context(), "udp4", toAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	return send, recv
}

// TestWANLoss: a lossy link drops about the share of packets it is told,
// one way only, and every packet it did not drop arrives.
func TestWANLoss(t *testing.T) {
	nss, w := newTestWAN(t, 2)
	w.Seed(42)
	send, recv := udpPair(t, nss[0], nss[1], DCAddr(2).String()+":7001")
	w.Impair(1, LinkFault{Loss: 0.05})
	const n = 2000
	got := make(chan int)
	go func() {
		buf := make([]byte, 64)
		k := 0
		for {
			_ = recv.SetReadDeadline(time.Now().Add(time.Second))
			if _, _, err := recv.ReadFrom(buf); err != nil {
				got <- k
				return
			}
			k++
		}
	}()
	before, beforeBack := w.LinkStats(0, 1), w.LinkStats(1, 0)
	for i := range n {
		if _, err := send.Write([]byte("datagram")); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // within the socket's buffers
		}
	}
	received := <-got
	after, afterBack := w.LinkStats(0, 1), w.LinkStats(1, 0)
	fwd, lost := after.Forwarded-before.Forwarded, after.Lost-before.Lost
	if fwd+lost != n {
		t.Errorf("dc-1 -> dc-2: %d forwarded + %d lost, want the %d sent", fwd, lost, n)
	}
	// 5% of 2,000 is 100, with a standard deviation under 10.
	if lost < 50 || lost > 150 {
		t.Errorf("dc-1 -> dc-2 lost %d of %d packets, want about 5%% (50 to 150)", lost, n)
	}
	if int64(received) != fwd {
		t.Errorf("dc-2 received %d datagrams, the link forwarded %d", received, fwd)
	}
	if afterBack.Forwarded != beforeBack.Forwarded || afterBack.Lost != beforeBack.Lost {
		t.Errorf("dc-2 -> dc-1 carried packets it was never sent: %+v then %+v", beforeBack, afterBack)
	}
	w.Rejoin(1)
	before = w.LinkStats(0, 1)
	for range 200 {
		if _, err := send.Write([]byte("datagram")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if after := w.LinkStats(0, 1); after.Lost != before.Lost {
		t.Errorf("a mended link lost %d packets", after.Lost-before.Lost)
	}
}

// TestWANJitter: a slow link holds each packet its delay plus up to its
// jitter, varying from packet to packet, and keeps them in order.
func TestWANJitter(t *testing.T) {
	nss, w := newTestWAN(t, 2)
	w.Seed(7)
	send, recv := udpPair(t, nss[0], nss[1], DCAddr(2).String()+":7002")
	const delay, jitter = 100 * time.Millisecond, 200 * time.Millisecond
	w.Impair(1, LinkFault{Delay: delay, Jitter: jitter})
	const n = 40
	go func() {
		// Each datagram carries its number and when it was sent.
		for i := range n {
			b := binary.BigEndian.AppendUint32(nil, uint32(i))
			b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixNano()))
			_, _ = send.Write(b)
			time.Sleep(25 * time.Millisecond)
		}
	}()
	var lo, hi time.Duration
	buf := make([]byte, 12)
	for k := range n {
		_ = recv.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := recv.ReadFrom(buf); err != nil {
			t.Fatalf("datagram %d: %v", k, err)
		}
		at := time.Now()
		if i := binary.BigEndian.Uint32(buf); int(i) != k {
			t.Fatalf("datagram %d arrived in place %d: the link reordered", i, k)
		}
		d := at.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(buf[4:]))))
		if d < delay {
			t.Errorf("datagram %d took %s, under the link's delay %s", k, d, delay)
		}
		if k == 0 || d < lo {
			lo = d
		}
		hi = max(hi, d)
	}
	// In order, a packet may wait behind the one before it, so only the
	// lower bound is exact; the spread shows the jitter.
	if hi-lo < jitter/4 {
		t.Errorf("one-way times from %s to %s: no jitter to speak of (want a spread near %s)", lo, hi, jitter)
	}
	t.Logf("one-way times %s to %s over %d datagrams (delay %s, jitter %s)", lo, hi, n, delay, jitter)
}
