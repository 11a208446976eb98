package clusters

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/store"
)

// Placement is what placement knows of a cluster from its row: its
// labels, its taints (the spec's and those its status adds) and whether
// it is Ready as the controller judged it (a cluster it has not judged
// yet counts as Ready; its taints still apply). The load, free figures
// and dependencies are the caller's to add. The submitter and the
// drill's what-if both describe clusters with it, and the API judges a
// planned move's target by it.
func Placement(row *store.Cluster) (placement.Cluster, error) {
	c := placement.Cluster{Name: row.Name, Labels: row.Labels}
	var spec store.Document[v1alpha1.ClusterSpec]
	if err := json.Unmarshal(row.Spec, &spec); err != nil {
		return c, fmt.Errorf("cluster spec does not decode: %w", err)
	}
	c.Taints = append(c.Taints, spec.Spec.Taints...)
	var status v1alpha1.ClusterStatus
	if len(row.Status) > 0 {
		if err := json.Unmarshal(row.Status, &status); err != nil {
			return c, fmt.Errorf("cluster status does not decode: %w", err)
		}
	}
	c.Taints = append(c.Taints, status.Taints...)
	ready := ReadyCondition(status)
	c.Ready = ready == nil || ready.Status == metav1.ConditionTrue
	return c, nil
}
