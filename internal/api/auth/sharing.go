package auth

// What the policy says of sharing the farm: priority classes and each
// namespace's weight in the fair share. The submitter reads them through
// its own small interface.

// PriorityClass is the priority a class name stands for; false when the
// policy defines no such class.
func (p *Policy) PriorityClass(name string) (int32, bool) {
	v, ok := p.f.PriorityClasses[name]
	return v, ok
}

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

// PriorityClass is the policy in force's.
func (id *Identities) PriorityClass(name string) (int32, bool) {
	return id.Policy().PriorityClass(name)
}

// FairShareWeight is the policy in force's.
func (id *Identities) FairShareWeight(ns string) float64 { return id.Policy().FairShareWeight(ns) }
