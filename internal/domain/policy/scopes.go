package policy

import "k8s.io/apimachinery/pkg/runtime/schema"

// builtinClusterScoped and builtinNamespaced are the scopes of the kinds
// every kube-apiserver serves, as its discovery reports them
// (APIResource.Namespaced). They let the API decide before any agent has
// reported a cluster's discovery, and no report can make one of these
// narrower: a Namespace is cluster-scoped whatever a cluster claims.
// TestBuiltinScopes in internal/member/agent holds the table to what a real
// kube-apiserver serves, group by group.
var (
	builtinClusterScoped = kindSet(map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"storage.k8s.io":               {"StorageClass", "VolumeAttachment", "CSIDriver", "CSINode", "VolumeAttributesClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"node.k8s.io":                  {"RuntimeClass"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"resource.k8s.io":              {"DeviceClass", "ResourceSlice", "DeviceTaintRule"},
		"authentication.k8s.io":        {"TokenReview", "SelfSubjectReview"},
		"authorization.k8s.io":         {"SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview"},
		"internal.apiserver.k8s.io":    {"StorageVersion"},
		"storagemigration.k8s.io":      {"StorageVersionMigration"},
	})
	builtinNamespaced = kindSet(map[string][]string{
		"": {"Pod", "Service", "ConfigMap", "Secret", "ServiceAccount", "Endpoints", "Event", "LimitRange",
			"PersistentVolumeClaim", "PodTemplate", "ReplicationController", "ResourceQuota", "Binding"},
		"apps":                      {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ControllerRevision"},
		"batch":                     {"Job", "CronJob"},
		"autoscaling":               {"HorizontalPodAutoscaler"},
		"policy":                    {"PodDisruptionBudget"},
		"rbac.authorization.k8s.io": {"Role", "RoleBinding"},
		"storage.k8s.io":            {"CSIStorageCapacity"},
		"networking.k8s.io":         {"NetworkPolicy", "Ingress"},
		"coordination.k8s.io":       {"Lease", "LeaseCandidate"},
		"discovery.k8s.io":          {"EndpointSlice"},
		"events.k8s.io":             {"Event"},
		"resource.k8s.io":           {"ResourceClaim", "ResourceClaimTemplate"},
		"authorization.k8s.io":      {"LocalSubjectAccessReview"},
		"certificates.k8s.io":       {"PodCertificateRequest"},
	})
)

func kindSet(byGroup map[string][]string) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for group, kinds := range byGroup {
		for _, k := range kinds {
			out[schema.GroupKind{Group: group, Kind: k}] = true
		}
	}
	return out
}

// BuiltinScope is the scope of a kind every kube-apiserver serves, and
// ScopeUnknown for any other (a custom resource, say).
func BuiltinScope(gk schema.GroupKind) Scope {
	switch {
	case builtinClusterScoped[gk]:
		return ScopeCluster
	case builtinNamespaced[gk]:
		return ScopeNamespaced
	}
	return ScopeUnknown
}

// BuiltinGroups are the API groups of the built-in table, for the test
// that holds it to a kube-apiserver's discovery.
func BuiltinGroups() map[string]bool {
	out := map[string]bool{}
	for gk := range builtinClusterScoped {
		out[gk.Group] = true
	}
	for gk := range builtinNamespaced {
		out[gk.Group] = true
	}
	return out
}

// ResolveScope merges what is known of a kind's scope: the built-in table
// and what the member clusters' discovery reported (namespaced, one entry
// per cluster that serves the kind). The widest wins: a kind that any
// source calls cluster-scoped is cluster-scoped, as it would be on that
// cluster. A RESTMapper answers per cluster; the API answers for every
// cluster a placement may pick, so it takes the one that asks the most.
func ResolveScope(gk schema.GroupKind, reported []bool) Scope {
	scope := BuiltinScope(gk)
	for _, namespaced := range reported {
		switch {
		case !namespaced:
			return ScopeCluster
		case scope == ScopeUnknown:
			scope = ScopeNamespaced
		}
	}
	return scope
}
