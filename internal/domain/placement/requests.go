package placement

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
)

// Demand is what a runnable asks of the cluster it goes to.
type Demand struct {
	// Total is what all its pods request together: status.requests.
	Total corev1.ResourceList
	// Pod is, per resource, the most one of its pods requests: what a
	// single node must have free.
	Pod corev1.ResourceList
	// Pods is how many pods it runs at once (0 when declared).
	Pods int64
	// Source says in words where the figures come from.
	Source string
}

// Strings is a resource list as status.requests shows it: resource name ->
// canonical Kubernetes quantity.
func Strings(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// ParseList reads a resource list from status.requests' form.
func ParseList(m map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, s := range m {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a quantity", name, s)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// Requests is what spec asks for: each pod of its template by
// Kubernetes' own rule (PodRequests), times the pods its kind runs at
// once, as the kind's driver counts them (kinds.Demander; docs/kinds.md
// lists them: a Job's parallelism, a Deployment's replicas, an Argo
// Workflow's largest step, a FlinkDeployment's JobManager and
// TaskManagers); any other kind runs every pod template found in it, one
// pod each.
//
// spec.resources may add to that what the pods do not show (a license,
// parallel steps, an external resource), never take from it: per
// resource the larger of the two counts, so that a tenant cannot declare
// a Job of 80 CPUs down to 1m and slip under its quota. A template with
// no pod purser can read asks for what spec.resources declares alone
// (then the single pod is taken to be all of it), or for nothing, and
// says so in Source.
func Requests(spec *v1alpha1.RunnableSpec) (Demand, error) {
	var declared corev1.ResourceList
	if len(spec.Resources) > 0 {
		var err error
		if declared, err = ParseList(spec.Resources); err != nil {
			return Demand{}, fmt.Errorf("spec.resources: %w", err)
		}
	}
	groups, err := podGroups(spec.Template)
	if err != nil {
		return Demand{}, err
	}
	if len(groups) == 0 {
		if declared != nil {
			return Demand{Total: declared, Pod: declared.DeepCopy(), Source: "spec.resources"}, nil
		}
		return Demand{Total: corev1.ResourceList{}, Pod: corev1.ResourceList{}, Source: "no pod template found; declare spec.resources"}, nil
	}
	d := Demand{Total: corev1.ResourceList{}, Pod: corev1.ResourceList{}}
	var parts []string
	for _, g := range groups {
		pod := &corev1.Pod{Spec: g.spec}
		DefaultRequests(pod)
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		if g.count > 0 {
			for name, q := range req {
				total := d.Total[name]
				total.Add(times(q, g.count))
				d.Total[name] = total
				if cur, ok := d.Pod[name]; !ok || q.Cmp(cur) > 0 {
					d.Pod[name] = q.DeepCopy()
				}
			}
		}
		d.Pods += g.count
		parts = append(parts, fmt.Sprintf("%d %s", g.count, g.what))
	}
	d.Source = strings.Join(parts, " + ")
	if raised := raise(&d, declared); len(raised) > 0 {
		d.Source += " + spec.resources (" + strings.Join(raised, ", ") + ")"
	}
	return d, nil
}

// raise lifts d's totals to what declared says where declared is larger,
// and returns the names of the resources it lifted, sorted. A resource no
// pod shows is, like a declared demand of a kind without pods, taken to
// be needed by one pod whole; one the pods show keeps their largest pod.
func raise(d *Demand, declared corev1.ResourceList) []string {
	var raised []string
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		q := declared[name]
		cur, ok := d.Total[name]
		if ok && q.Cmp(cur) <= 0 {
			continue
		}
		d.Total[name] = q.DeepCopy()
		if !ok {
			d.Pod[name] = q.DeepCopy()
		}
		raised = append(raised, string(name))
	}
	return raised
}

// DefaultRequests applies to pod the API server's defaults that bear on
// its requests (kubernetes pkg/apis/core/v1/defaults.go, SetDefaults_Pod
// and defaultPodRequests), so that PodRequests sees the pod as the
// scheduler will: a container's limit stands in for a request it does not
// set; pod-level requests not set default to the containers' for the
// resources pod-level resources support, and then to the pod-level limits.
func DefaultRequests(pod *corev1.Pod) {
	defaultContainers := func(cs []corev1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			for name, limit := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = limit.DeepCopy()
				}
			}
		}
	}
	defaultContainers(pod.Spec.Containers)
	defaultContainers(pod.Spec.InitContainers)
	res := pod.Spec.Resources
	if res == nil || len(res.Limits) == 0 {
		return
	}
	reqs := res.Requests
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	containers := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range containers {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range res.Limits {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	res.Requests = reqs
}

// times is q*n, exact: in millis when q has a fraction of a unit.
func times(q resource.Quantity, n int64) resource.Quantity {
	if v, ok := q.AsInt64(); ok {
		return *resource.NewQuantity(v*n, q.Format)
	}
	return *resource.NewMilliQuantity(q.MilliValue()*n, q.Format)
}

// podGroup is count pods with one spec.
type podGroup struct {
	what  string
	count int64
	spec  corev1.PodSpec
}

// podGroups are the pods tmpl runs at once, as its kind's driver counts
// them (kinds.Demander), of which an Argo Workflow's, run one step at a
// time, count by the largest; a kind whose driver does not count its
// pods runs every pod template found in it, one pod each.
func podGroups(tmpl map[string]any) ([]podGroup, error) {
	demand, ok, err := kinds.Default().Demand(tmpl)
	if err != nil {
		return nil, err
	}
	if !ok {
		var out []podGroup
		findPodSpecs(tmpl, func(spec corev1.PodSpec) { out = append(out, podGroup{what: "pod template", count: 1, spec: spec}) })
		return out, nil
	}
	out := make([]podGroup, 0, len(demand.Groups))
	for _, g := range demand.Groups {
		out = append(out, podGroup{what: g.What, count: g.Count, spec: g.Spec})
	}
	if demand.OneAtATime {
		return largest(out), nil
	}
	return out, nil
}

// largest is the group whose pod requests the most (by cpu, then
// memory), alone; nil for none.
func largest(groups []podGroup) []podGroup {
	var best *podGroup
	var bestReq corev1.ResourceList
	for i := range groups {
		pod := &corev1.Pod{Spec: *groups[i].spec.DeepCopy()}
		DefaultRequests(pod)
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		if best == nil || larger(req, bestReq) {
			best, bestReq = &groups[i], req
		}
	}
	if best == nil {
		return nil
	}
	return []podGroup{*best}
}

// larger orders requests by cpu, then memory, then the sum of the rest.
func larger(a, b corev1.ResourceList) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if c := a.Name(name, resource.DecimalSI).Cmp(*b.Name(name, resource.DecimalSI)); c != 0 {
			return c > 0
		}
	}
	return false
}

// findPodSpecs calls fn with every pod spec found in v: a map with a
// "containers" list under a key "spec" of a pod template (or of a Pod).
func findPodSpecs(v any, fn func(corev1.PodSpec)) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			child := x[k]
			if m, ok := child.(map[string]any); ok && k == "spec" {
				if _, ok := m["containers"].([]any); ok {
					var spec corev1.PodSpec
					if decodeInto(m, &spec) == nil {
						fn(spec)
						continue
					}
				}
			}
			findPodSpecs(child, fn)
		}
	case []any:
		for _, e := range x {
			findPodSpecs(e, fn)
		}
	}
}

func decodeInto(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
