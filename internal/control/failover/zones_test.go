package failover

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/purser-io/purser/internal/member/clusters"
)

func TestZoneRate(t *testing.T) {
	for reason, want := range map[string]float64{
		"":                               0.5 * 40, // nothing recorded yet: normal
		clusters.ReasonNoDisruption:      20,
		clusters.ReasonPartialDisruption: 2,
		clusters.ReasonFullDisruption:    2,
		clusters.ReasonFarmDisruption:    0,
	} {
		if got := ZoneRate(reason, 20, 2); got != want {
			t.Errorf("%q: rate %v, want %v", reason, got, want)
		}
	}
}

func TestZoneLimiters(t *testing.T) {
	z := newZoneLimiters(20, 2)
	farm := rate.NewLimiter(1000, 1000) // the zones' limits, not the farm's
	allowed := func(zone, reason string, n int) int {
		got := 0
		for range n {
			if z.hasTurn(zone, reason, farm) && z.take(zone, reason, farm) {
				got++
			}
		}
		return got
	}
	// A burst of the rate, per zone: a disrupted zone does not slow the
	// others.
	if got := allowed("dc-1", clusters.ReasonFullDisruption, 10); got != 2 {
		t.Errorf("a fully disrupted zone let %d of 10 through at once, want its burst of 2", got)
	}
	if got := allowed("dc-2", clusters.ReasonNoDisruption, 30); got != 20 {
		t.Errorf("a normal zone let %d of 30 through at once, want its burst of 20", got)
	}
	if got := allowed("dc-3", clusters.ReasonFarmDisruption, 5); got != 0 {
		t.Errorf("with the farm disrupted %d evictions got through, want none", got)
	}
	// The zone recovers: its bucket takes the normal rate.
	allowed("dc-1", clusters.ReasonNoDisruption, 1)
	if l := z.byZone["dc-1"].lim; l.Limit() != 20 || l.Burst() != 20 {
		t.Errorf("a zone back to normal: rate %v burst %d, want 20 and 20", l.Limit(), l.Burst())
	}
}

// Seeing a turn takes nothing; a zone's turns and the farm's are taken
// together, and a zone refused by the farm keeps its own.
func TestZoneTurns(t *testing.T) {
	z := newZoneLimiters(20, 2)
	farm := rate.NewLimiter(rate.Every(time.Hour), 2)
	for range 5 {
		if !z.hasTurn("dc-1", clusters.ReasonFullDisruption, farm) {
			t.Fatal("no turn seen in a fresh zone")
		}
	}
	for i := range 2 {
		if !z.hasTurn("dc-1", clusters.ReasonFullDisruption, farm) || !z.take("dc-1", clusters.ReasonFullDisruption, farm) {
			t.Fatalf("turn %d of the zone's burst of 2 refused after looking five times", i+1)
		}
	}
	if z.hasTurn("dc-1", clusters.ReasonFullDisruption, farm) {
		t.Fatal("a third turn from a zone whose burst is 2")
	}
	// The farm's two turns went to dc-1: dc-2 has its own but the farm none.
	if z.hasTurn("dc-2", clusters.ReasonNoDisruption, farm) {
		t.Fatal("a turn beyond the farm's burst")
	}
	if got := z.byZone["dc-2"].lim.Tokens(); got < 19.9 {
		t.Errorf("dc-2 lost a token to a refused turn: %.1f left, want 20", got)
	}
}
