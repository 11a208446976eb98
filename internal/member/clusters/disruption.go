package clusters

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Disruption: how much of the farm is not Ready at once, by zone (a DC,
// the clusters' ZoneLabel) and in all. It follows the zone states of
// Kubernetes' node lifecycle controller
// (kubernetes/pkg/controller/nodelifecycle/node_lifecycle_controller.go:
// ComputeZoneState, handleDisruption, setLimiterInZone): a zone is
// Normal, PartialDisruption once at least a share of its members is not
// ready, or FullDisruption when none is ready; the eviction rate of a
// zone follows its state, and when every zone is fully disrupted
// Kubernetes assumes the fault is its own ("master disruption mode") and
// stops evicting altogether. purser differs in two ways, because a lost
// DC is as likely a cut link as a dead DC: a fully disrupted zone is
// slowed like a partially disrupted one (Kubernetes evicts it at the
// normal rate), and evictions stop as soon as a set share of the whole
// farm is not Ready, not only when every zone is down. The failover
// controller reads the verdict from each cluster's Disrupted condition
// and sets its zone's eviction rate from it (internal/control/failover).

// Reasons of the Disrupted condition.
const (
	// ReasonNoDisruption (False): the cluster's zone and the farm are
	// within their thresholds; evictions run at the normal rate.
	ReasonNoDisruption = "Normal"
	// ReasonPartialDisruption (True): at least the zone threshold of the
	// cluster's zone is not Ready; evictions from it are slowed.
	ReasonPartialDisruption = "PartialDisruption"
	// ReasonFullDisruption (True): no cluster of the zone is Ready;
	// evictions from it are slowed.
	ReasonFullDisruption = "FullDisruption"
	// ReasonFarmDisruption (True): at least the farm threshold of all
	// clusters is not Ready, or every zone is fully disrupted; evictions
	// stop everywhere.
	ReasonFarmDisruption = "FarmDisruption"
)

// Defaults of DisruptionPolicy. The thresholds are Kubernetes' default
// --unhealthy-zone-threshold (0.55).
const (
	DefaultZoneLabel              = "dc"
	DefaultUnhealthyZoneThreshold = 0.55
	DefaultUnhealthyFarmThreshold = 0.55
)

// DisruptionPolicy says when the farm or a zone counts as disrupted; its
// zero value means the defaults.
type DisruptionPolicy struct {
	// ZoneLabel is the cluster label naming its zone (default "dc");
	// clusters without it share the zone "".
	ZoneLabel string
	// UnhealthyZoneThreshold is the share of a zone's clusters not Ready
	// from which the zone is partially disrupted.
	UnhealthyZoneThreshold float64
	// UnhealthyFarmThreshold is the share of all clusters not Ready from
	// which every eviction stops.
	UnhealthyFarmThreshold float64
}

func (p DisruptionPolicy) withDefaults() DisruptionPolicy {
	p.ZoneLabel = cmp.Or(p.ZoneLabel, DefaultZoneLabel)
	if p.UnhealthyZoneThreshold <= 0 {
		p.UnhealthyZoneThreshold = DefaultUnhealthyZoneThreshold
	}
	if p.UnhealthyFarmThreshold <= 0 {
		p.UnhealthyFarmThreshold = DefaultUnhealthyFarmThreshold
	}
	return p
}

// Zone is the zone of a cluster with these labels.
func (p DisruptionPolicy) Zone(labels map[string]string) string {
	return labels[p.withDefaults().ZoneLabel]
}

// Member is one cluster as the disruption verdict sees it.
type Member struct {
	Name  string
	Zone  string
	Ready bool
}

// ZoneState is the verdict on one zone.
type ZoneState struct {
	Reason          string
	NotReady, Total int
}

// Disruption is the verdict on the farm.
type Disruption struct {
	Zones map[string]ZoneState
	// Halted: evictions stop everywhere; Reason says why.
	Halted          bool
	NotReady, Total int
	Reason          string
}

// Judge computes the verdict on the farm from each cluster's readiness.
func (p DisruptionPolicy) Judge(members []Member) Disruption {
	p = p.withDefaults()
	d := Disruption{Zones: map[string]ZoneState{}, Total: len(members)}
	for _, m := range members {
		z := d.Zones[m.Zone]
		z.Total++
		if !m.Ready {
			z.NotReady++
			d.NotReady++
		}
		d.Zones[m.Zone] = z
	}
	allFull := len(d.Zones) > 0
	for name, z := range d.Zones {
		switch {
		case z.NotReady == z.Total:
			z.Reason = ReasonFullDisruption
		case float64(z.NotReady)/float64(z.Total) >= p.UnhealthyZoneThreshold:
			z.Reason = ReasonPartialDisruption
			allFull = false
		default:
			z.Reason = ReasonNoDisruption
			allFull = false
		}
		d.Zones[name] = z
	}
	switch {
	case allFull:
		d.Halted = true
		d.Reason = fmt.Sprintf("no cluster of the farm is Ready (%d of %d not Ready)", d.NotReady, d.Total)
	case d.Total > 0 && float64(d.NotReady)/float64(d.Total) >= p.UnhealthyFarmThreshold:
		d.Halted = true
		d.Reason = fmt.Sprintf("%d of %d clusters of the farm are not Ready, at least the threshold of %.0f%%",
			d.NotReady, d.Total, 100*p.UnhealthyFarmThreshold)
	}
	return d
}

// Condition is the Disrupted condition of a cluster in zone, given the
// previous one (nil if none): its time moves only when its reason does.
func (d Disruption) Condition(zone string, prev *v1alpha1.Condition, now time.Time) v1alpha1.Condition {
	z := d.Zones[zone]
	c := v1alpha1.Condition{Type: v1alpha1.ConditionDisrupted, Status: metav1.ConditionTrue, Reason: z.Reason}
	where := "DC " + zone
	if zone == "" {
		where = "the clusters without a zone"
	}
	switch {
	case d.Halted:
		c.Reason = ReasonFarmDisruption
		c.Message = d.Reason + "; evictions are stopped everywhere until fewer are"
	case z.Reason == ReasonFullDisruption:
		c.Message = fmt.Sprintf("no cluster of %s is Ready (%d of %d); evictions from it are slowed", where, z.NotReady, z.Total)
	case z.Reason == ReasonPartialDisruption:
		c.Message = fmt.Sprintf("%d of %d clusters of %s are not Ready; evictions from it are slowed", z.NotReady, z.Total, where)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNoDisruption
		c.Message = "evictions run at the normal rate"
	}
	c.LastTransitionTime = now.UTC().Truncate(time.Second)
	if prev != nil && prev.Reason == c.Reason {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// ZoneNames lists the zones, sorted.
func (d Disruption) ZoneNames() []string { return slices.Sorted(maps.Keys(d.Zones)) }
