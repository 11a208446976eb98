package localport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Ports come from below the kernel's ephemeral range, are distinct and can
// be listened on.
func TestFree(t *testing.T) {
	ephemeralLow := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				ephemeralLow = n
			}
		}
	}
	ports, err := FreeN(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < low || p >= ephemeralLow || seen[p] {
			t.Fatalf("port %d: want distinct ports from %d up to the ephemeral range at %d", p, low, ephemeralLow)
		}
		seen[p] = true
	}
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	if err != nil {
		t.Fatalf("a port handed out cannot be listened on: %v", err)
	}
	l.Close()
}
