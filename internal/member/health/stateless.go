package health

import (
	"fmt"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/fields"
)

// Kinds whose objects carry no status: configuration, not workloads.
// There is nothing to judge, so they get no health and no phase rather
// than an Unknown and a Pending that would say something false (that purser
// could not tell, that they wait for something).
var stateless = map[gvk]bool{
	{"v1", "ConfigMap"}:                                    true,
	{"v1", "Secret"}:                                       true,
	{"v1", "ServiceAccount"}:                               true,
	{"rbac.authorization.k8s.io/v1", "Role"}:               true,
	{"rbac.authorization.k8s.io/v1", "RoleBinding"}:        true,
	{"rbac.authorization.k8s.io/v1", "ClusterRole"}:        true,
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"}: true,
	{"argoproj.io/v1alpha1", "WorkflowTemplate"}:           true,
	{"argoproj.io/v1alpha1", "ClusterWorkflowTemplate"}:    true,
}

func interpretStateless(kind string) Result {
	return Result{Message: fmt.Sprintf("a %s has no status to judge", kind)}
}

// interpretNode judges a v1 Node by its Ready condition, as the kubelet
// posts it and the node lifecycle controller sets it to Unknown when the
// kubelet stops posting. A Node has no phase (status.phase is deprecated
// and unset), so none is given.
func interpretNode(obj map[string]any) Result {
	cordoned := ""
	if fields.Bool(obj, "spec", "unschedulable") {
		cordoned = " (cordoned)"
	}
	c, ok := findCondition(obj, "Ready")
	switch {
	case !ok:
		return Result{Health: v1alpha1.HealthUnknown, Message: "no Ready condition posted yet" + cordoned}
	case c.status == "True":
		return Result{Health: v1alpha1.HealthHealthy, Message: "Ready" + cordoned}
	case c.status == "False":
		return Result{Health: v1alpha1.HealthUnhealthy, Message: withDetail("NotReady", c.describe()) + cordoned}
	}
	return Result{Health: v1alpha1.HealthUnknown, Message: withDetail("node status unknown", c.describe()) + cordoned}
}
