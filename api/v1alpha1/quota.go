package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// KindQuota is the kind of a namespace's quota.
const KindQuota = "Quota"

// QuotaRunnables is the limit on a namespace's active runnables, beside
// the resource names in Quota.Spec.Limits.
const QuotaRunnables = "runnables"

// Quota bounds what one namespace's runnables may hold across the farm at
// once. Its name is the namespace's; it has no namespace of its own.
type Quota struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     QuotaSpec   `json:"spec"`
	Status   QuotaStatus `json:"status,omitzero"`
}

// QuotaSpec is what an admin allows.
type QuotaSpec struct {
	// Limits: resource name (cpu, memory, nvidia.com/gpu, ...) or
	// "runnables" -> a Kubernetes quantity (a whole number for runnables).
	Limits map[string]string `json:"limits"`
	// PerLabel bounds, besides, what the namespace holds on the clusters
	// of each value of one cluster label (per dc, say): at most Limits on
	// the clusters labelled dc=dc-1, as much again on dc=dc-2. Clusters
	// without the label are not bounded by it.
	PerLabel *QuotaPerLabel `json:"perLabel,omitempty"`
}

// QuotaPerLabel is a quota for each value of a cluster label.
type QuotaPerLabel struct {
	Label  string            `json:"label"`
	Limits map[string]string `json:"limits"`
}

// QuotaStatus is what the namespace uses now: the status.requests of its
// active (Scheduled, Submitted, Running) runnables, summed, and their
// number under "runnables".
type QuotaStatus struct {
	Used map[string]string `json:"used,omitempty"`
	// UsedPerLabel is the same for each value of spec.perLabel.label
	// that a cluster holding the namespace's work carries.
	UsedPerLabel map[string]map[string]string `json:"usedPerLabel,omitempty"`
}

// ValidateQuota returns every problem with q as written; name is the
// namespace of the URL.
func ValidateQuota(q *Quota, name string) FieldErrors {
	var v validator
	v.typeMeta(q.TypeMeta, KindQuota)
	if q.Metadata.Name == "" {
		v.add("metadata.name", "must be the namespace the quota is for")
	} else if q.Metadata.Name != name {
		v.add("metadata.name", "is %q but the URL names %q", q.Metadata.Name, name)
	}
	if errs := utilvalidation.IsDNS1123Label(q.Metadata.Name); q.Metadata.Name != "" && len(errs) > 0 {
		v.add("metadata.name", "is not a namespace name: %s", errs[0])
	}
	if q.Metadata.Namespace != "" {
		v.add("metadata.namespace", "must be empty: a Quota is named after its namespace")
	}
	if len(q.Spec.Limits) == 0 {
		v.add("spec.limits", "must name at least one limit (runnables, cpu, memory, or an extended resource)")
	}
	v.quotaLimits("spec.limits", q.Spec.Limits)
	if pl := q.Spec.PerLabel; pl != nil {
		if errs := utilvalidation.IsQualifiedName(pl.Label); len(errs) > 0 {
			v.add("spec.perLabel.label", "must be a cluster label's key: %s", strings.Join(errs, "; "))
		}
		if len(pl.Limits) == 0 {
			v.add("spec.perLabel.limits", "must name at least one limit (runnables, cpu, memory, or an extended resource)")
		}
		v.quotaLimits("spec.perLabel.limits", pl.Limits)
	}
	return v.errs
}

// quotaLimits checks a quota's limits: resource names (or runnables) to
// non-negative quantities, whole for runnables.
func (v *validator) quotaLimits(at string, limits map[string]string) {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		val := limits[name]
		path := fmt.Sprintf("%s[%s]", at, name)
		if name != QuotaRunnables {
			if errs := utilvalidation.IsQualifiedName(name); len(errs) > 0 {
				v.add(path, "is not a resource name: %s", errs[0])
				continue
			}
		}
		parsed, err := resource.ParseQuantity(val)
		switch {
		case err != nil:
			v.add(path, "%q is not a Kubernetes quantity (e.g. 64, 500m, 256Gi)", val)
		case parsed.Sign() < 0:
			v.add(path, "must not be negative")
		case name == QuotaRunnables && parsed.MilliValue()%1000 != 0:
			v.add(path, "must be a whole number of runnables")
		}
	}
}

// DecodeQuota decodes a Quota strictly, as the other kinds.
func DecodeQuota(data []byte, contentType string) (*Quota, error) {
	obj, err := decode(data, contentType, KindQuota)
	if err != nil {
		return nil, err
	}
	return obj.(*Quota), nil
}
