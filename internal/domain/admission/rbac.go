package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CheckRBAC says why obj, if it is a RoleBinding, may not be put in
// namespace ns on a member cluster, or nil. purser creates it with the
// hub's identity in the member cluster, so the cluster's own escalation
// check weighs the hub's rights, not the tenant's: the rule has to be
// purser's. A RoleBinding may bind only Roles (a ClusterRole only when its
// name is among clusterRoles, which the namespace's policy grants), and
// only subjects of its own namespace: its service accounts, the group of
// all of them (system:serviceaccounts:NS), and users that are not
// Kubernetes' own (system:*, which includes system:anonymous). Groups
// such as system:authenticated or system:unauthenticated would hand the
// namespace to everyone who reaches the cluster.
func CheckRBAC(obj map[string]any, ns string, clusterRoles []string) error {
	kind, _, _ := unstructured.NestedString(obj, "kind")
	apiVersion, _, _ := unstructured.NestedString(obj, "apiVersion")
	if kind != "RoleBinding" || !strings.HasPrefix(apiVersion, "rbac.authorization.k8s.io/") {
		return nil
	}
	if own, _, _ := unstructured.NestedString(obj, "metadata", "namespace"); own != "" {
		ns = own // the scope rules have already refused another namespace
	}
	refKind, _, _ := unstructured.NestedString(obj, "roleRef", "kind")
	refName, _, _ := unstructured.NestedString(obj, "roleRef", "name")
	if refKind == "ClusterRole" && !slices.Contains(clusterRoles, refName) {
		return fmt.Errorf("roleRef: the RoleBinding grants ClusterRole %q, which the policy does not let namespace %s bind (namespaces.%s.rbac.clusterRoles)", refName, ns, ns)
	}
	subjects, _, _ := unstructured.NestedSlice(obj, "subjects")
	for i, s := range subjects {
		m, _ := s.(map[string]any)
		skind, _, _ := unstructured.NestedString(m, "kind")
		name, _, _ := unstructured.NestedString(m, "name")
		sns, _, _ := unstructured.NestedString(m, "namespace")
		field := fmt.Sprintf("subjects[%d]", i)
		switch skind {
		case "ServiceAccount":
			if sns != "" && sns != ns {
				return fmt.Errorf("%s: service account %s/%s is of another namespace than %s", field, sns, name, ns)
			}
		case "Group":
			if name != "system:serviceaccounts:"+ns {
				return fmt.Errorf("%s: group %q reaches beyond namespace %s; only system:serviceaccounts:%s may be bound", field, name, ns, ns)
			}
		case "User":
			if strings.HasPrefix(name, "system:") {
				return fmt.Errorf("%s: user %q is one of Kubernetes' own", field, name)
			}
		default:
			return fmt.Errorf("%s: subject kind %q is not one RBAC knows", field, skind)
		}
	}
	return nil
}
