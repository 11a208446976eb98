package syncer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/purser-io/purser/api/v1alpha1"
)

// clusterInfo is what placement needs to know of a cluster.
type clusterInfo struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
}

// matches reports whether a deployable placed by p belongs on cluster c:
// every set field of the affinity must admit it, and every taint that
// keeps work away (NoSchedule, NoExecute) must be tolerated. A deployable
// with no affinity goes to every cluster. A malformed label selector
// matches nothing, so that a bad spec never spreads configuration
// everywhere; validation should have refused it anyway.
//
// This is a pure function; it belongs in internal/placement once the
// submitter needs the same rule.
func matches(p v1alpha1.Placement, c clusterInfo) bool {
	if a := p.ClusterAffinity; a != nil {
		if len(a.ClusterNames) > 0 && !slices.Contains(a.ClusterNames, c.Name) {
			return false
		}
		if slices.Contains(a.Exclude, c.Name) {
			return false
		}
		if a.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
			if err != nil || !sel.Matches(labels.Set(c.Labels)) {
				return false
			}
		}
	}
	for i := range c.Taints {
		t := &c.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue // PreferNoSchedule does not keep configuration away
		}
		if !tolerated(p.ClusterTolerations, t) {
			return false
		}
	}
	return true
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
