package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestDCHeadroomMetrics: /metrics says of each DC what the DC list says:
// dc1's loss is not absorbed (one runnable asking 2 cpu would be left
// queued), dc2's is.
func TestDCHeadroomMetrics(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	drillFarm(t, h)
	got := map[string]bool{}
	for line := range strings.Lines(string(h.get("", "/metrics").want(t, http.StatusOK).raw)) {
		if strings.HasPrefix(line, "purser_dc_headroom") {
			got[strings.TrimSpace(line)] = true
		}
	}
	for _, want := range []string{
		`purser_dc_headroom_absorbable{dc="dc1"} 0`,
		`purser_dc_headroom_short_runnables{dc="dc1"} 1`,
		`purser_dc_headroom_short{dc="dc1",resource="cpu"} 2`,
		`purser_dc_headroom_absorbable{dc="dc2"} 1`,
		`purser_dc_headroom_short_runnables{dc="dc2"} 0`,
	} {
		if !got[want] {
			t.Errorf("/metrics lacks %q; its headroom lines: %v", want, got)
		}
	}
}
