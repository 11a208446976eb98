// Package placement decides which member clusters may receive an object
// and, for a runnable, which one gets it. It is pure: callers gather the
// clusters' labels, taints, readiness and load; the decision and its
// reason come back as values, to be written to the attempt and the audit
// log. The submitter places runnables with Choose; the syncer sends
// deployables to every cluster that Matches.
package placement

import (
	"fmt"
	"slices"
	"sort"
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
	// Capacity is its allocatable capacity in the same unit as Active's
	// weight (e.g. pods); 0 when unknown.
	Capacity int
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
		if !tolerated(p.ClusterTolerations, t) {
			return false, fmt.Sprintf("taint %s not tolerated", taintString(t))
		}
	}
	return true, ""
}

func tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		// Numeric comparison operators are accepted, as the scheduler of
		// the Kubernetes version purser pins accepts them.
		if tolerations[i].ToleratesTaint(klog.Background(), t, true) {
			return true
		}
	}
	return false
}

func taintString(t *corev1.Taint) string {
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
}

// Choose picks a cluster for a runnable of kind gvk: among the Ready
// clusters that match the placement and serve the kind, the least loaded
// (active runnables relative to capacity), ties broken by name so that
// the same state always gives the same answer.
func Choose(p v1alpha1.Placement, gvk string, clusters []Cluster) Decision {
	d := Decision{Rejected: map[string]string{}}
	var eligible []Cluster
	for _, c := range clusters {
		if ok, why := Matches(p, c); !ok {
			d.Rejected[c.Name] = why
			continue
		}
		if !c.Ready {
			d.Rejected[c.Name] = "not Ready"
			continue
		}
		if c.Serves != nil && !c.Serves(gvk) {
			d.Rejected[c.Name] = "does not serve " + gvk
			continue
		}
		eligible = append(eligible, c)
	}
	sort.SliceStable(eligible, func(i, j int) bool {
		li, lj := load(eligible[i]), load(eligible[j])
		if li != lj {
			return li < lj
		}
		return eligible[i].Name < eligible[j].Name
	})
	for _, c := range eligible {
		d.Eligible = append(d.Eligible, c.Name)
	}
	if len(eligible) == 0 {
		d.Reason = "no eligible cluster: " + rejections(d.Rejected)
		return d
	}
	d.Cluster = eligible[0].Name
	d.Reason = fmt.Sprintf("%d eligible; chose %s: least loaded (%s)", len(eligible), d.Cluster, loadString(eligible[0]))
	return d
}

// load is the share of a cluster's capacity in use; with unknown capacity
// the count of active runnables stands in, so that such clusters are still
// spread over.
func load(c Cluster) float64 {
	if c.Capacity > 0 {
		return float64(c.Active) / float64(c.Capacity)
	}
	return float64(c.Active)
}

func loadString(c Cluster) string {
	if c.Capacity > 0 {
		return fmt.Sprintf("%d active of capacity %d", c.Active, c.Capacity)
	}
	return fmt.Sprintf("%d active", c.Active)
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
