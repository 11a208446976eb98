package farm

import (
	"context"
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
