package failover

import (
	"golang.org/x/time/rate"

	"github.com/purser-io/purser/internal/member/clusters"
)

// Evictions by zone. The health monitor judges how disrupted each zone
// (DC) and the farm are and says so in each cluster's Disrupted condition
// (internal/member/clusters, Disruption); here the eviction rate of a zone
// follows it, as Kubernetes' node lifecycle controller swaps the rate
// limiter of a zone when its state changes (setLimiterInZone in
// kubernetes/pkg/controller/nodelifecycle): the normal rate for a normal
// zone, the secondary rate for a partially or fully disrupted one, and
// nothing at all while the farm as a whole is disrupted. The farm-wide
// EvictionRate bounds the sum on top.

// DefaultSecondaryEvictionRate is a tenth of the normal rate, the ratio
// of Kubernetes' defaults (--node-eviction-rate 0.1,
// --secondary-node-eviction-rate 0.01).
const DefaultSecondaryEvictionRate = DefaultEvictionRate / 10

// ZoneRate is the eviction rate for a zone whose clusters carry the
// Disrupted reason given ("" when none is recorded yet).
func ZoneRate(reason string, normal, secondary float64) float64 {
	switch reason {
	case clusters.ReasonPartialDisruption, clusters.ReasonFullDisruption:
		return secondary
	case clusters.ReasonFarmDisruption:
		return 0
	}
	return normal
}

// zoneLimiters holds one token bucket per zone, whose rate follows the
// zone's state.
type zoneLimiters struct {
	normal, secondary float64
	byZone            map[string]*zoneLimiter
}

type zoneLimiter struct {
	reason string
	lim    *rate.Limiter
}

func newZoneLimiters(normal, secondary float64) *zoneLimiters {
	return &zoneLimiters{normal: normal, secondary: secondary, byZone: map[string]*zoneLimiter{}}
}

// hasTurn reports whether zone's bucket (at the rate reason calls for)
// and the farm's both hold an eviction now, without taking it: a runnable
// may turn out not to move after all (it has no restore point to move
// with), and finding that out must not cost another runnable its turn.
func (z *zoneLimiters) hasTurn(zone, reason string, farm *rate.Limiter) bool {
	return z.limiter(zone, reason).Tokens() >= 1 && farm.Tokens() >= 1
}

// take takes the turn hasTurn saw. Only the pass takes turns, so one
// seen is still there.
func (z *zoneLimiters) take(zone, reason string, farm *rate.Limiter) bool {
	return z.limiter(zone, reason).Allow() && farm.Allow()
}

// limiter is zone's bucket, its rate set to what reason calls for.
func (z *zoneLimiters) limiter(zone, reason string) *rate.Limiter {
	r := ZoneRate(reason, z.normal, z.secondary)
	burst := 0
	if r > 0 {
		burst = max(1, int(r))
	}
	l := z.byZone[zone]
	switch {
	case l == nil:
		l = &zoneLimiter{reason: reason, lim: rate.NewLimiter(rate.Limit(r), burst)}
		z.byZone[zone] = l
	case l.reason != reason:
		l.reason = reason
		l.lim.SetLimit(rate.Limit(r))
		l.lim.SetBurst(burst)
	}
	return l.lim
}
