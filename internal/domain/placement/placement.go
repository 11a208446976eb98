// Package placement decides which member clusters may receive an object
// and, for a runnable, which one gets it. It is pure: callers gather the
// clusters' labels, taints, readiness and load; the decision and its
// reason come back as values, to be written to the attempt and the audit
// log. The submitter places runnables with Choose; the syncer sends
// deployables to every cluster that Matches.
package placement

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Cluster is what placement knows of a member cluster.
type Cluster struct {
	Name   string
	Labels map[string]string
	// Taints are the cluster's spec taints and those purser added from its
	// conditions.
	Taints []corev1.Taint
	Ready  bool
	// Serves reports whether the cluster serves a kind ("group/version,
	// Kind=..." as schema.GroupVersionKind.String() prints it); nil means
	// not known yet, taken as yes.
	Serves func(gvk string) bool
	// Active is the number of runnables placed on it and not ended.
	Active int
	// Capacity is what its schedulable nodes can allocate, as the
	// inventory knows it; nil when not known (no Node record yet).
	Capacity *Capacity
	// Free is what it has free, as its agent reported it; nil when its
	// agent has not (ChooseFor).
	Free *Free
	// Lacks says what of the runnable's spec.dependsOn the cluster lacks
	// (package dependson); "" when nothing. A cluster that lacks one is
	// not eligible.
	Lacks string
}

// Capacity is the allocatable capacity of a cluster's schedulable
// (not cordoned) nodes.
type Capacity struct {
	// MilliCPU is allocatable CPU in millicores: the measure of load.
	MilliCPU int64
}

// Matches reports whether c satisfies the placement's affinity (names,
// label selector, exclusions) and tolerates its scheduling taints; when it
// does not, the reason says why, in words for a user.
func Matches(p v1alpha1.Placement, c Cluster) (bool, string) {
	if a := p.ClusterAffinity; a != nil {
		if len(a.ClusterNames) > 0 && !slices.Contains(a.ClusterNames, c.Name) {
			return false, "not in clusterNames"
		}
		if slices.Contains(a.Exclude, c.Name) {
			return false, "excluded"
		}
		if a.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
			if err != nil {
				return false, "label selector does not parse: " + err.Error()
			}
			if !sel.Matches(labels.Set(c.Labels)) {
				return false, "labels do not match " + sel.String()
			}
		}
	}
	for i := range c.Taints {
		t := &c.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue // PreferNoSchedule only lowers preference
		}
		if !Tolerated(p.ClusterTolerations, t) {
			return false, fmt.Sprintf("taint %s not tolerated", TaintString(t))
		}
	}
	return true, ""
}

// Tolerated reports whether one of tolerations tolerates taint t.
func Tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		// Numeric comparison operators are accepted, as the scheduler of
		// the Kubernetes version purser pins accepts them.
		if tolerations[i].ToleratesTaint(klog.Background(), t, true) {
			return true
		}
	}
	return false
}

// TaintString prints a taint as kubectl does: key[=value]:effect.
func TaintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// Decision is where a runnable goes, and why.
type Decision struct {
	// Cluster is the chosen cluster; empty when none is eligible.
	Cluster string
	// Eligible lists every cluster that could take it, best first.
	Eligible []string
	// Rejected gives, per cluster that could not, the reason.
	Rejected map[string]string
	// Reason is one sentence for the attempt, the audit log and the user.
	Reason string
	// Never says that no eligible cluster could take the runnable even
	// empty: it asks for more than any one's whole allocatable.
	Never bool
	// Capacity says that clusters are eligible but none has the demand
	// free now: it waits for an agent to report capacity freed.
	Capacity bool
	// Lacking says that a cluster was refused for lack of a deployable of
	// spec.dependsOn.
	Lacking bool
}

// ineligible says why c may not take a runnable of kind gvk under p (its
// affinity or taints, not Ready, the kind not served, a dependency not
// synced there), or "" when it may; lacking is true when a dependency is
// the reason.
func ineligible(p v1alpha1.Placement, gvk string, c Cluster) (why string, lacking bool) {
	if ok, why := Matches(p, c); !ok {
		return why, false
	}
	switch {
	case !c.Ready:
		return "not Ready", false
	case c.Serves != nil && !c.Serves(gvk):
		return "does not serve " + gvk, false
	case c.Lacks != "":
		return "lacks " + c.Lacks, true
	}
	return "", false
}

// Choose picks a cluster for a runnable of kind gvk: among the Ready
// clusters that match the placement and serve the kind, the least loaded,
// ties broken by name so that the same state always gives the same answer.
//
// Load is active runnables per allocatable CPU core, counting the one
// being placed: of two clusters equally loaded, the bigger one moves less
// by taking it, and idle clusters fill in proportion to their size. CPU,
// not pods, because it measures how big a cluster is: every node admits
// about 110 pods whatever its size. A cluster whose capacity is not known
// yet is measured as if it had the median capacity of the eligible
// clusters that report one, so that it is neither starved (as with no
// capacity) nor flooded (as with no load) while its agent catches up;
// when none reports one, active runnables alone are compared, as if all
// were the same size. A cluster known to have no schedulable CPU (every
// node cordoned) comes last: it takes work only when nothing else can.
func Choose(p v1alpha1.Placement, gvk string, clusters []Cluster) Decision {
	d := Decision{Rejected: map[string]string{}}
	var eligible []Cluster
	for _, c := range clusters {
		if why, _ := ineligible(p, gvk, c); why != "" {
			d.Rejected[c.Name] = why
			continue
		}
		eligible = append(eligible, c)
	}
	if len(eligible) == 0 {
		d.Reason = "no eligible cluster: " + rejections(d.Rejected)
		return d
	}
	ranked := measure(eligible)
	slices.SortFunc(ranked, func(a, b load) int { return a.compare(b) })
	for _, l := range ranked {
		d.Eligible = append(d.Eligible, l.name)
	}
	d.Cluster = ranked[0].name
	d.Reason = fmt.Sprintf("%d eligible; chose %s: least loaded (%s)", len(ranked), d.Cluster, ranked[0])
	return d
}

// load is a cluster's active runnables and the CPU they are measured
// against.
type load struct {
	name   string
	active int
	// milliCPU is the capacity measured against: the cluster's own, or,
	// when assumed, the median of the eligible clusters that know theirs
	// (0 when none does, and then only active counts).
	milliCPU int64
	assumed  bool
}

func measure(eligible []Cluster) []load {
	var known []int64
	for _, c := range eligible {
		if c.Capacity != nil && c.Capacity.MilliCPU > 0 {
			known = append(known, c.Capacity.MilliCPU)
		}
	}
	typical := median(known)
	out := make([]load, len(eligible))
	for i, c := range eligible {
		out[i] = load{name: c.Name, active: c.Active, milliCPU: typical, assumed: true}
		if c.Capacity != nil {
			out[i].milliCPU, out[i].assumed = c.Capacity.MilliCPU, false
		}
	}
	return out
}

// median of xs, 0 for none; xs is reordered.
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// full reports a cluster known to have no schedulable CPU.
func (l load) full() bool { return !l.assumed && l.milliCPU <= 0 }

// compare orders by load with the new runnable, (active+1)/cores,
// compared exactly by cross multiplication; where there are no cores to
// measure against, by active runnables; then by name.
func (l load) compare(o load) int {
	if l.full() != o.full() {
		if l.full() {
			return 1
		}
		return -1
	}
	c := cmp.Compare(l.active, o.active)
	if l.milliCPU > 0 && o.milliCPU > 0 {
		c = cmp.Compare(int64(l.active+1)*o.milliCPU, int64(o.active+1)*l.milliCPU)
	}
	if c != 0 {
		return c
	}
	return strings.Compare(l.name, o.name)
}

// String is the load in words, for the decision's reason.
func (l load) String() string {
	switch {
	case l.full():
		return fmt.Sprintf("%d active; no schedulable CPU", l.active)
	case !l.assumed:
		return fmt.Sprintf("%d active on %s", l.active, cores(l.milliCPU))
	case l.milliCPU > 0:
		return fmt.Sprintf("%d active; capacity not known yet, taken as %s, the median of the eligible clusters",
			l.active, cores(l.milliCPU))
	}
	return fmt.Sprintf("%d active; capacity not known", l.active)
}

func cores(milli int64) string {
	if milli == 1000 {
		return "1 core"
	}
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) + " cores"
}

func rejections(r map[string]string) string {
	if len(r) == 0 {
		return "no cluster is registered"
	}
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " " + r[n]
	}
	return strings.Join(parts, "; ")
}
