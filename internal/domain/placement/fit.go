package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Free is what a cluster has free, as its agent last reported it, and
// what was placed there since.
type Free struct {
	// Allocatable sums the allocatable of its nodes that take pods; Free
	// is that less the requests of its non-terminal pods; NodeMax is, per
	// resource, the most free on one node.
	Allocatable, Free, NodeMax corev1.ResourceList
	// InFlight sums the requests of the runnables placed on it that the
	// report may not count yet (placed after it was made, less a margin):
	// as Karmada's scheduler-estimator counts assumed workloads, they are
	// taken off Free, so that a burst of placements cannot overfill it
	// before the next report.
	InFlight corev1.ResourceList
	// InFlightCount is how many runnables InFlight sums.
	InFlightCount int
}

// available is Free less InFlight, per resource.
func (f *Free) available(name corev1.ResourceName) resource.Quantity {
	q := f.Free[name].DeepCopy()
	if in, ok := f.InFlight[name]; ok {
		q.Sub(in)
	}
	return q
}

// Score orders the clusters that fit.
type Score string

// Scores.
const (
	// LeastAllocated, the default, prefers the cluster left with the
	// largest share free once the runnable is placed, averaged over cpu
	// and memory: kube-scheduler's default node score (noderesources
	// LeastAllocated, least_allocated.go leastResourceScorer, cpu and
	// memory weighted 1 each) applied to clusters. It spreads work, so
	// that each cluster keeps room for a large runnable and a lost
	// cluster takes the least with it.
	LeastAllocated Score = "LeastAllocated"
	// BestFit prefers the cluster left with the smallest share free
	// (the scheduler's MostAllocated): it packs work, keeping whole
	// clusters free for the largest runnables.
	BestFit Score = "BestFit"
)

// maxFigures bounds the clusters whose figures a reason gives.
const maxFigures = 5

// scoredResources are the resources the score averages.
var scoredResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// ChooseFor picks a cluster for a runnable of kind gvk that asks for
// demand: among the clusters that match the placement, are Ready and
// serve the kind, only those where the demand fits (Total within what is
// available, Free less InFlight; the largest pod within NodeMax), ordered
// by score, ties broken by name. Clusters whose agent has not reported
// what they have free cannot be checked: they come after every cluster
// that fits, ordered by load as Choose orders them. When nothing fits,
// Decision.Cluster is empty and the reason names the resource and the
// best figures; Decision.Never says that the demand exceeds every
// eligible cluster's whole allocatable, so that waiting will not help
// until the farm grows.
func ChooseFor(p v1alpha1.Placement, gvk string, demand Demand, score Score, clusters []Cluster) Decision {
	d := Decision{Rejected: map[string]string{}}
	var known, unknown []Cluster
	for _, c := range clusters {
		if why, lacking := ineligible(p, gvk, c); why != "" {
			d.Rejected[c.Name] = why
			d.Lacking = d.Lacking || lacking
			continue
		}
		if c.Free == nil {
			unknown = append(unknown, c)
		} else {
			known = append(known, c)
		}
	}
	type fitted struct {
		c     Cluster
		score float64
	}
	var fits []fitted
	type entry struct {
		c     Cluster
		ok    bool
		why   string
		share float64
	}
	entries := make([]entry, 0, len(known))
	never := len(known) > 0 && len(unknown) == 0
	for _, c := range known {
		ok, ever, why := fit(demand, c.Free)
		share := leftShare(demand, c.Free)
		if !ok {
			d.Rejected[c.Name] = why
		} else {
			fits = append(fits, fitted{c, share})
		}
		if ever {
			never = false
		}
		entries = append(entries, entry{c, ok, why, share})
	}
	slices.SortFunc(fits, func(a, b fitted) int {
		c := cmp.Compare(b.score, a.score) // most left free first
		if score == BestFit {
			c = -c
		}
		if c != 0 {
			return c
		}
		return strings.Compare(a.c.Name, b.c.Name)
	})
	// The figures of the chosen cluster first, then of those with the
	// most left free: the best figures, at most maxFigures of them, so
	// that a farm of 100 clusters gives a sentence, not a page.
	chosen := ""
	if len(fits) > 0 {
		chosen = fits[0].c.Name
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if (a.c.Name == chosen) != (b.c.Name == chosen) {
			if a.c.Name == chosen {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.share, a.share); c != 0 {
			return c
		}
		return strings.Compare(a.c.Name, b.c.Name)
	})
	var figures []string
	for i, e := range entries {
		if i == maxFigures {
			figures = append(figures, fmt.Sprintf("and %d more", len(entries)-maxFigures))
			break
		}
		fig := e.c.Name + ": " + freeFigures(demand, e.c.Free)
		if !e.ok {
			fig += ", does not fit (" + e.why + ")"
		}
		figures = append(figures, fig)
	}
	for _, f := range fits {
		d.Eligible = append(d.Eligible, f.c.Name)
	}
	ranked := measure(unknown)
	slices.SortFunc(ranked, func(a, b load) int { return a.compare(b) })
	for _, l := range ranked {
		d.Eligible = append(d.Eligible, l.name)
	}
	asks := "asks for " + listString(demand.Total)
	if len(demand.Total) == 0 {
		asks = "asks for no resources (" + demand.Source + ")"
	}
	switch {
	case len(fits) > 0:
		d.Cluster = fits[0].c.Name
		d.Reason = fmt.Sprintf("%s; chose %s, %s: %s", asks, d.Cluster, scoreWords(score), strings.Join(figures, "; "))
	case len(ranked) > 0:
		d.Cluster = ranked[0].name
		d.Reason = fmt.Sprintf("%s; chose %s, whose free capacity is not reported yet (%s)", asks, d.Cluster, ranked[0])
		if len(figures) > 0 {
			d.Reason += "; " + strings.Join(figures, "; ")
		}
	case len(known) == 0:
		d.Reason = "no eligible cluster: " + rejections(d.Rejected)
	case never && !d.Lacking:
		d.Never = true
		d.Reason = fmt.Sprintf("%s, more than any eligible cluster's whole allocatable; it cannot be placed until a cluster grows: %s",
			asks, strings.Join(figures, "; "))
	default:
		d.Capacity = true
		d.Reason = fmt.Sprintf("%s; no cluster has it free now, waiting for capacity: %s", asks, strings.Join(figures, "; "))
	}
	if len(fits) == 0 && len(ranked) == 0 && len(known) > 0 {
		if others := rejectionsExcept(d.Rejected, known); others != "" {
			d.Reason += "; " + others
		}
	}
	return d
}

// fit reports whether demand fits f now, whether it could ever (within
// the whole allocatable), and, when it does not fit, why in words.
func fit(demand Demand, f *Free) (ok, ever bool, why string) {
	ok, ever = true, true
	var reasons []string
	for _, name := range sortedNames(demand.Total) {
		want := demand.Total[name]
		if want.Sign() <= 0 {
			continue
		}
		alloc := f.Allocatable[name]
		if want.Cmp(alloc) > 0 {
			ever = false
		}
		avail := f.available(name)
		if want.Cmp(avail) > 0 {
			ok = false
			reasons = append(reasons, fmt.Sprintf("%s %s wanted", name, want.String()))
		}
	}
	for _, name := range sortedNames(demand.Pod) {
		want := demand.Pod[name]
		if want.Sign() <= 0 || f.NodeMax == nil {
			continue
		}
		if most := f.NodeMax[name]; want.Cmp(most) > 0 {
			ok = false
			reasons = append(reasons, fmt.Sprintf("one pod wants %s %s, the most free on one node is %s", name, want.String(), most.String()))
		}
	}
	return ok, ever, strings.Join(reasons, "; ")
}

// leftShare is the mean, over cpu and memory, of the share of allocatable
// left free once demand is placed: the least-allocated score, in [0, 1].
func leftShare(demand Demand, f *Free) float64 {
	var sum float64
	var n int
	for _, name := range scoredResources {
		alloc := f.Allocatable[name]
		if alloc.Sign() <= 0 {
			continue
		}
		left := f.available(name)
		if want, ok := demand.Total[name]; ok {
			left.Sub(want)
		}
		sum += float64(left.MilliValue()) / float64(alloc.MilliValue())
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// freeFigures says what f has available of the resources demand asks for
// (cpu when it asks for none): "cpu 64 of 96 free", and the placements in
// flight taken off.
func freeFigures(demand Demand, f *Free) string {
	names := sortedNames(demand.Total)
	if len(names) == 0 {
		names = []corev1.ResourceName{corev1.ResourceCPU}
	}
	parts := make([]string, 0, len(names))
	for _, name := range names {
		avail := f.available(name)
		if avail.Sign() < 0 {
			avail = *resource.NewQuantity(0, avail.Format)
		}
		alloc := f.Allocatable[name]
		parts = append(parts, fmt.Sprintf("%s %s of %s free", name, avail.String(), alloc.String()))
	}
	s := strings.Join(parts, ", ")
	if f.InFlightCount > 0 {
		s += fmt.Sprintf(" (after %d placed and not yet reported)", f.InFlightCount)
	}
	return s
}

func scoreWords(s Score) string {
	if s == BestFit {
		return "the best fit"
	}
	return "the least allocated"
}

// listString prints a resource list in name order: "cpu 2500m, memory 3Gi".
func listString(l corev1.ResourceList) string {
	names := sortedNames(l)
	parts := make([]string, len(names))
	for i, name := range names {
		q := l[name]
		parts[i] = string(name) + " " + q.String()
	}
	return strings.Join(parts, ", ")
}

// sortedNames are l's resource names: cpu, memory, then the others by name.
func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	rank := func(n corev1.ResourceName) int {
		switch n {
		case corev1.ResourceCPU:
			return 0
		case corev1.ResourceMemory:
			return 1
		}
		return 2
	}
	slices.SortFunc(names, func(a, b corev1.ResourceName) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return strings.Compare(string(a), string(b))
	})
	return names
}

// rejectionsExcept is rejections without the clusters of known, whose
// figures the reason gives already.
func rejectionsExcept(r map[string]string, known []Cluster) string {
	rest := map[string]string{}
	for n, why := range r {
		if !slices.ContainsFunc(known, func(c Cluster) bool { return c.Name == n }) {
			rest[n] = why
		}
	}
	if len(rest) == 0 {
		return ""
	}
	return rejections(rest)
}
