package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What the policy says of sharing the farm: priority classes and each
// namespace's weight in the fair share. The submitter reads them through
// its own small interface.

// PriorityClass is one class of priorityClasses: its value, and the
// namespaces whose editors may choose it. In the policy file it is the
// bare value (every namespace may use it) or {value, namespaces}.
type PriorityClass struct {
	Value int32 `json:"value"`
	// Namespaces may choose the class; empty: every namespace. "*"
	// stands for every namespace too.
	Namespaces []string `json:"namespaces,omitempty"`
}

// UnmarshalJSON reads a class as the bare value or the object, strictly:
// a field the object does not have stops the policy from loading, as
// everywhere else in the file.
func (c *PriorityClass) UnmarshalJSON(b []byte) error {
	var v int32
	if err := json.Unmarshal(b, &v); err == nil {
		*c = PriorityClass{Value: v}
		return nil
	}
	type plain PriorityClass
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var out plain
	if err := d.Decode(&out); err != nil {
		return fmt.Errorf("a priority class is an integer or {value, namespaces}: %w", err)
	}
	*c = PriorityClass(out)
	return nil
}

// open reports whether every namespace may use the class.
func (c PriorityClass) open() bool {
	return len(c.Namespaces) == 0 || slices.Contains(c.Namespaces, AnyNamespace)
}

// allows reports whether namespace ns may use the class.
func (c PriorityClass) allows(ns string) bool { return c.open() || slices.Contains(c.Namespaces, ns) }

// checkPriorityClasses refuses a policy whose classes or defaults could
// not be used as written: a name spec.priority could not carry, a default
// that names no class, or a class its namespace may not use.
func checkPriorityClasses(f PolicyFile) error {
	for name, c := range f.PriorityClasses {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("policy: priorityClasses: %q is not a class name spec.priority could carry (a DNS label): %s", name, errs[0])
		}
		for _, ns := range c.Namespaces {
			if ns != AnyNamespace && len(validation.IsDNS1123Label(ns)) > 0 {
				return fmt.Errorf("policy: priorityClasses.%s.namespaces: %q is not a namespace name", name, ns)
			}
		}
	}
	if d := f.DefaultPriorityClass; d != "" {
		c, ok := f.PriorityClasses[d]
		if !ok {
			return fmt.Errorf("policy: defaultPriorityClass %q names no class of priorityClasses", d)
		}
		if !c.open() {
			return fmt.Errorf("policy: defaultPriorityClass %q is a class only some namespaces may use; the default must be open to every namespace (set a namespace's own defaultPriorityClass instead)", d)
		}
	}
	for ns, np := range f.Namespaces {
		d := np.DefaultPriorityClass
		if d == "" {
			continue
		}
		c, ok := f.PriorityClasses[d]
		if !ok {
			return fmt.Errorf("policy: namespace %s: defaultPriorityClass %q names no class of priorityClasses", ns, d)
		}
		if !c.allows(ns) {
			return fmt.Errorf("policy: namespace %s: defaultPriorityClass %q is not a class the namespace may use", ns, d)
		}
	}
	return nil
}

// PriorityClass is the priority a class name stands for; false when the
// policy defines no such class. The queue orders by it whoever chose the
// class: who may choose it is decided when the runnable is accepted.
func (p *Policy) PriorityClass(name string) (int32, bool) {
	c, ok := p.f.PriorityClasses[name]
	return c.Value, ok
}

// Priority is the value the queue orders a runnable of ns by, whose spec
// author wrote: spec.priority's where the author may give it now
// (AuthorizePriority), else 0. The API refuses the rest at accept; this
// holds the writers to the same rule for a spec stored behind the API, or
// a class the policy has since taken from the namespace, so that neither
// moves work ahead of other namespaces'.
func (p *Policy) Priority(author User, ns string, prio *intstr.IntOrString) int32 {
	if prio == nil || p.AuthorizePriority(author, ns, prio) != nil {
		return 0
	}
	if prio.Type == intstr.Int {
		return prio.IntVal
	}
	v, _ := p.PriorityClass(prio.StrVal)
	return v
}

// PriorityClassesFor lists, sorted, the classes namespace ns may use.
func (p *Policy) PriorityClassesFor(ns string) []string {
	var out []string
	for name, c := range p.f.PriorityClasses {
		if c.allows(ns) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// DefaultPriorityClass is the class of a runnable of ns without
// spec.priority: the namespace's, else that of "*", else the policy's,
// else "" (priority 0).
func (p *Policy) DefaultPriorityClass(ns string) string {
	for _, key := range []string{ns, AnyNamespace} {
		if d := p.f.Namespaces[key].DefaultPriorityClass; d != "" {
			return d
		}
	}
	return p.f.DefaultPriorityClass
}

// AuthorizePriority decides whether u may give a runnable of namespace ns
// the priority prio: a class the policy allows the namespace, or for a
// global admin, any class or a raw integer. A raw integer from a tenant
// would put the tenant's work ahead of everyone's (the queue is the
// farm's, not the namespace's), so a namespace's own admins do not get it
// either. The refusal lists the classes ns may use.
func (p *Policy) AuthorizePriority(u User, ns string, prio *intstr.IntOrString) *PriorityRefusal {
	if prio == nil {
		return nil
	}
	admin := p.IsAdmin(u)
	if prio.Type == intstr.Int {
		if admin {
			return nil
		}
		return p.priorityRefusal(ns, fmt.Sprintf("an integer priority (%d) is for the farm's admins", prio.IntVal))
	}
	c, ok := p.f.PriorityClasses[prio.StrVal]
	switch {
	case !ok:
		return p.priorityRefusal(ns, fmt.Sprintf("the policy defines no priority class %q", prio.StrVal))
	case admin || c.allows(ns):
		return nil
	}
	return p.priorityRefusal(ns, fmt.Sprintf("priority class %q is not one namespace %s may use", prio.StrVal, ns))
}

func (p *Policy) priorityRefusal(ns, reason string) *PriorityRefusal {
	allowed := p.PriorityClassesFor(ns)
	r := &PriorityRefusal{Reason: reason, Allowed: allowed}
	if len(allowed) == 0 {
		r.Reason += fmt.Sprintf("; the policy allows namespace %s no priority class: leave spec.priority unset", ns)
	} else {
		r.Reason += fmt.Sprintf("; namespace %s may use the priority classes %s", ns, strings.Join(allowed, ", "))
	}
	return r
}

// PriorityRefusal says why a spec.priority was refused, and which classes
// the namespace may use instead.
type PriorityRefusal struct {
	Reason  string
	Allowed []string
}

func (r *PriorityRefusal) Error() string { return r.Reason }

// FairShareWeight is namespace ns's weight: its own, else that of "*",
// else 1.
func (p *Policy) FairShareWeight(ns string) float64 {
	for _, key := range []string{ns, AnyNamespace} {
		if np, ok := p.f.Namespaces[key]; ok && np.FairShareWeight > 0 {
			return np.FairShareWeight
		}
	}
	return 1
}
