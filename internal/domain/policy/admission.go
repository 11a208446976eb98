package policy

import (
	"slices"

	"github.com/purser-io/purser/internal/domain/admission"
)

// PodSecurityLevel is the Pod Security Standards level of namespace ns:
// its own, else that of "*", else baseline.
func (p *Policy) PodSecurityLevel(ns string) admission.Level {
	for _, key := range []string{ns, AnyNamespace} {
		if np, ok := p.f.Namespaces[key]; ok && np.PodSecurity != "" {
			if l, err := admission.ParseLevel(np.PodSecurity); err == nil {
				return l
			}
		}
	}
	return admission.DefaultLevel
}

// BindableClusterRoles are the ClusterRoles a RoleBinding of namespace
// ns may grant: its own and those of "*".
func (p *Policy) BindableClusterRoles(ns string) []string {
	var out []string
	for _, key := range []string{ns, AnyNamespace} {
		out = append(out, p.f.Namespaces[key].RBAC.ClusterRoles...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// EmbeddedRules say where kinds keep the objects they create.
func (p *Policy) EmbeddedRules() []admission.EmbeddedRule { return p.f.Embedded }
