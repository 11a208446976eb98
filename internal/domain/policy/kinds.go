package policy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Scope is where objects of a kind live on a member cluster, as the
// cluster's discovery says it (APIResource.Namespaced, which a RESTMapper
// turns into RESTScopeNamespace or RESTScopeRoot).
type Scope string

// The scopes discovery reports, and the one for a kind no cluster has
// reported.
const (
	ScopeNamespaced Scope = "Namespaced"
	ScopeCluster    Scope = "Cluster"
	// ScopeUnknown means no member cluster has said. The API then cannot tell,
	// and whoever acts on a cluster decides with that cluster's own
	// discovery.
	ScopeUnknown Scope = ""
)

// KindRules restrict the kinds that a namespace's runnables and
// deployables may put on member clusters. Kinds are written as
// Kubernetes prints a GroupKind: Kind.group, the kind alone for the core
// group (Secret, RoleBinding.rbac.authorization.k8s.io), "*.group" for
// every kind of a group, "*" for every kind.
//
//	kinds:
//	  allow: [Job.batch, ConfigMap, Workflow.argoproj.io]   # only these namespaced kinds
//	  deny: ["*.rbac.authorization.k8s.io"]                 # never these
//	  clusterScoped: [ClusterWorkflowTemplate.argoproj.io]  # cluster-scoped kinds granted
//
// Under "*" they apply to every namespace, in addition to its own.
type KindRules struct {
	// Allow, when any applies to a namespace, is the only namespaced kinds
	// allowed there; empty allows every namespaced kind not denied.
	Allow []string `json:"allow,omitempty"`
	// Deny refuses kinds whatever their scope; it wins over Allow and
	// ClusterScoped.
	Deny []string `json:"deny,omitempty"`
	// ClusterScoped lists the cluster-scoped kinds the namespace's editors
	// may create. Every other cluster-scoped kind needs a global admin:
	// such an object is shared by every tenant of the member cluster.
	ClusterScoped []string `json:"clusterScoped,omitempty"`
	// Opaque lists kinds purser has no driver for (custom resources whose
	// controllers make pods purser cannot see) that the namespace's
	// editors may place all the same, judged only where a workload keeps
	// its pod (spec.template.spec). Any other kind without a driver that
	// no kube-apiserver serves built in is refused: its controller could
	// run whatever pod it likes for them.
	Opaque []string `json:"opaque,omitempty"`
}

// Target is what a change would put on a member cluster.
type Target struct {
	Kind  schema.GroupKind
	Scope Scope
	// Namespace is the purser object's (the runnable's, the deployable's).
	Namespace string
	// ObjectNamespace is the namespace the object lands in on the member
	// cluster, for a namespaced kind; "" means Namespace.
	ObjectNamespace string
}

// KindDecision says whether a target is allowed, by which rule, and why,
// in words fit for a 403 or a status message.
type KindDecision struct {
	Allowed bool
	// Rule names what decided: "admins", or the policy field such as
	// namespaces.team-a.kinds.deny.
	Rule   string
	Reason string
	// Unresolved: allowed only because the scope is not known yet; the
	// submitter and the syncer decide again with the cluster's discovery.
	Unresolved bool
}

// Rule names used in decisions that no single policy field makes.
const (
	RuleAdmins          = "admins"
	RuleClusterScoped   = "cluster-scoped kinds need a global admin or namespaces.<namespace>.kinds.clusterScoped"
	RuleOwnNamespace    = "namespaced objects stay in their own namespace"
	RuleNamespacedKinds = "namespaced kinds in the object's own namespace"
)

// AuthorizeKind decides whether u may put t on member clusters. Global
// admins may put anything anywhere. For everyone else: a denied kind is
// refused; a cluster-scoped kind needs the namespace's clusterScoped
// list; a namespaced kind must land in the object's own namespace and,
// where an allow list applies, be on it. It reads only the policy: the
// API calls it with the requester, the submitter and the syncer with the
// author recorded with the object, before they act on a cluster.
func (p *Policy) AuthorizeKind(u User, t Target) KindDecision {
	name := KindName(t.Kind)
	if p.IsAdmin(u) {
		return KindDecision{Allowed: true, Rule: RuleAdmins, Reason: u.Name + " is a global admin"}
	}
	keys := []string{t.Namespace, AnyNamespace}
	if key, ok := p.kindMatch(keys, t.Kind, func(r KindRules) []string { return r.Deny }); ok {
		rule := "namespaces." + key + ".kinds.deny"
		return KindDecision{Rule: rule, Reason: fmt.Sprintf("kind %s is denied in namespace %s (policy %s)", name, t.Namespace, rule)}
	}
	if t.Scope != ScopeCluster && t.ObjectNamespace != "" && t.ObjectNamespace != t.Namespace {
		return KindDecision{Rule: RuleOwnNamespace, Reason: fmt.Sprintf("%s is namespaced and would land in namespace %s; objects of namespace %s stay in %s",
			name, t.ObjectNamespace, t.Namespace, t.Namespace)}
	}
	_, granted := p.kindMatch(keys, t.Kind, func(r KindRules) []string { return r.ClusterScoped })
	allowKey, allowed := p.kindMatch(keys, t.Kind, func(r KindRules) []string { return r.Allow })
	allowRule := p.allowRule(keys)
	switch t.Scope {
	case ScopeCluster:
		if granted {
			return KindDecision{Allowed: true, Rule: p.grantRule(keys, t.Kind), Reason: "the policy grants " + name + " to namespace " + t.Namespace}
		}
		return KindDecision{Rule: RuleClusterScoped, Reason: fmt.Sprintf(
			"kind %s is cluster-scoped: it would be shared by every namespace of the member clusters; only a global admin may create it, or the policy may grant it in namespaces.%s.kinds.clusterScoped",
			name, t.Namespace)}
	case ScopeNamespaced:
		if allowRule != "" && !allowed {
			return KindDecision{Rule: allowRule, Reason: fmt.Sprintf("kind %s is not among the kinds allowed in namespace %s (policy %s)", name, t.Namespace, allowRule)}
		}
		if allowRule != "" {
			return KindDecision{Allowed: true, Rule: "namespaces." + allowKey + ".kinds.allow", Reason: name + " is allowed in namespace " + t.Namespace}
		}
		return KindDecision{Allowed: true, Rule: RuleNamespacedKinds, Reason: name + " is namespaced and stays in namespace " + t.Namespace}
	}
	// Unknown scope: whatever it turns out to be, a kind on no list that
	// applies would be refused, so refuse it now.
	if allowRule != "" && !allowed && !granted {
		return KindDecision{Rule: allowRule, Reason: fmt.Sprintf("kind %s is not among the kinds allowed in namespace %s (policy %s)", name, t.Namespace, allowRule)}
	}
	return KindDecision{Allowed: true, Unresolved: true, Rule: RuleNamespacedKinds,
		Reason: "no member cluster has reported the scope of " + name + " yet; the cluster it goes to decides"}
}

// kindMatch finds the first namespace key whose list (as list picks it)
// matches gk.
func (p *Policy) kindMatch(keys []string, gk schema.GroupKind, list func(KindRules) []string) (string, bool) {
	for _, key := range keys {
		np, ok := p.f.Namespaces[key]
		if !ok {
			continue
		}
		for _, pat := range list(np.Kinds) {
			if kindPatternMatches(pat, gk) {
				return key, true
			}
		}
	}
	return "", false
}

// allowRule names the allow lists that apply, "" when none does.
func (p *Policy) allowRule(keys []string) string {
	var rules []string
	for _, key := range keys {
		if np, ok := p.f.Namespaces[key]; ok && len(np.Kinds.Allow) > 0 {
			rules = append(rules, "namespaces."+key+".kinds.allow")
		}
	}
	return strings.Join(rules, " and ")
}

func (p *Policy) grantRule(keys []string, gk schema.GroupKind) string {
	key, _ := p.kindMatch(keys, gk, func(r KindRules) []string { return r.ClusterScoped })
	return "namespaces." + key + ".kinds.clusterScoped"
}

// OpaqueKind reports whether u may place objects of kind gk, which has no
// driver, from namespace ns: a global admin always, anyone else where
// kinds.opaque lists it for ns or for every namespace.
func (p *Policy) OpaqueKind(u User, ns string, gk schema.GroupKind) bool {
	if p.IsAdmin(u) {
		return true
	}
	_, ok := p.kindMatch([]string{ns, AnyNamespace}, gk, func(r KindRules) []string { return r.Opaque })
	return ok
}

// KindName writes gk as the policy and its messages do: Kind.group, or
// Kind for the core group.
func KindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// kindPatternMatches reports whether a checked pattern matches gk.
func kindPatternMatches(pattern string, gk schema.GroupKind) bool {
	if pattern == "*" {
		return true
	}
	p := schema.ParseGroupKind(pattern)
	return p.Group == gk.Group && (p.Kind == "*" || p.Kind == gk.Kind)
}

// checkKindRules refuses patterns that could never match, so that a
// typo ("rolebinding") does not silently leave a kind allowed.
func checkKindRules(ns string, r KindRules) error {
	for field, list := range map[string][]string{"allow": r.Allow, "deny": r.Deny, "clusterScoped": r.ClusterScoped, "opaque": r.Opaque} {
		for i, pat := range list {
			if err := checkKindPattern(pat); err != nil {
				return fmt.Errorf("policy: namespace %s: kinds.%s[%d] %q: %w", ns, field, i, pat, err)
			}
		}
	}
	return nil
}

func checkKindPattern(pattern string) error {
	if pattern == "*" {
		return nil
	}
	gk := schema.ParseGroupKind(pattern)
	if gk.Kind != "*" && !isKindName(gk.Kind) {
		return fmt.Errorf("a kind is written as in a manifest, Kind.group (RoleBinding.rbac.authorization.k8s.io), Kind for the core group (Secret), or *.group")
	}
	if gk.Group != "" && len(validation.IsDNS1123Subdomain(gk.Group)) > 0 {
		return fmt.Errorf("group %q is not an API group name such as rbac.authorization.k8s.io", gk.Group)
	}
	if gk.Kind == "*" && gk.Group == "" && strings.Contains(pattern, ".") {
		return fmt.Errorf("*. needs a group after it")
	}
	return nil
}

// isKindName: kinds are CamelCase identifiers starting with a capital.
func isKindName(k string) bool {
	if k == "" || k[0] < 'A' || k[0] > 'Z' {
		return false
	}
	return !slices.ContainsFunc([]byte(k), func(c byte) bool {
		return (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9')
	})
}
