package flink

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/internal/platform/fields"
)

// The pods a FlinkDeployment runs, as the operator builds them, so that
// placement can weigh the deployment by Kubernetes' own pod rule.

// MainContainer is the name of the container the operator gives the
// JobManager's and TaskManagers' Flink process (Constants.MAIN_CONTAINER_NAME
// in flink-kubernetes-operator); a pod template's container of that name
// is merged with what the operator sets.
const MainContainer = "flink-main-container"

// PodGroup is count pods of one role with the same spec.
type PodGroup struct {
	Role  string // "jobmanager" or "taskmanager"
	Count int64
	Spec  corev1.PodSpec
}

// Pods are the pods of the FlinkDeployment obj: its JobManager
// (spec.jobManager.replicas, 1 by default) and its TaskManagers, each
// from the role's podTemplate merged over spec.podTemplate, with the
// main container asking for the role's resource (cpu, memory).
//
// The TaskManagers are as many as FlinkConfigBuilder.getParallelism and
// FlinkUtils.getNumTaskManagers (flink-kubernetes-operator) make them:
// spec.taskManager.replicas when set, else ceil(job.parallelism /
// taskmanager.numberOfTaskSlots), the slots 1 unless
// spec.flinkConfiguration says otherwise (TaskManagerOptions.NUM_TASK_SLOTS'
// default). A session cluster (no spec.job) without replicas starts no
// TaskManager until a job is submitted to it.
func Pods(obj map[string]any) ([]PodGroup, error) {
	jm, err := rolePod(obj, "jobManager")
	if err != nil {
		return nil, err
	}
	tm, err := rolePod(obj, "taskManager")
	if err != nil {
		return nil, err
	}
	jmCount, ok := fields.Int(obj, "spec", "jobManager", "replicas")
	if !ok {
		jmCount = 1
	}
	tmCount, err := TaskManagers(obj)
	if err != nil {
		return nil, err
	}
	return []PodGroup{{Role: "jobmanager", Count: jmCount, Spec: jm}, {Role: "taskmanager", Count: tmCount, Spec: tm}}, nil
}

// TaskManagers is how many TaskManager pods obj runs (see Pods).
func TaskManagers(obj map[string]any) (int64, error) {
	if n, ok := fields.Int(obj, "spec", "taskManager", "replicas"); ok {
		return n, nil
	}
	parallelism, ok := fields.Int(obj, "spec", "job", "parallelism")
	if !ok || parallelism <= 0 {
		return 0, nil
	}
	slots := int64(1)
	if s, ok := fields.StringMap(must(fields.Get(obj, "spec", "flinkConfiguration")))["taskmanager.numberOfTaskSlots"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("spec.flinkConfiguration taskmanager.numberOfTaskSlots %q is not a positive integer", s)
		}
		slots = n
	}
	return (parallelism + slots - 1) / slots, nil
}

func must(v any, _ bool) any { return v }

// rolePod is the pod of role (jobManager, taskManager): the role's
// template merged over the common one as the operator merges them by
// default (PodTemplate, the one merge admission judges too),
// and the main container's requests and limits set from the role's
// resource, as the native Kubernetes integration sets them (limit
// factor 1).
func rolePod(obj map[string]any, role string) (corev1.PodSpec, error) {
	var spec corev1.PodSpec
	if merged := PodTemplate(obj, role, false); merged != nil {
		if err := podTemplateSpec(merged, &spec); err != nil {
			return spec, fmt.Errorf("spec.%s.podTemplate merged with spec.podTemplate: %w", role, err)
		}
	}
	main := corev1.ResourceList{}
	if v, ok := fields.Get(obj, "spec", role, "resource", "cpu"); ok {
		q, err := cpuQuantity(v)
		if err != nil {
			return spec, fmt.Errorf("spec.%s.resource.cpu: %w", role, err)
		}
		main[corev1.ResourceCPU] = q
	}
	if s := fields.String(obj, "spec", role, "resource", "memory"); s != "" {
		q, err := MemoryQuantity(s)
		if err != nil {
			return spec, fmt.Errorf("spec.%s.resource.memory: %w", role, err)
		}
		main[corev1.ResourceMemory] = q
	}
	idx := -1
	for i := range spec.Containers {
		if spec.Containers[i].Name == MainContainer {
			idx = i
		}
	}
	if idx < 0 {
		spec.Containers = append([]corev1.Container{{Name: MainContainer}}, spec.Containers...)
		idx = 0
	}
	c := &spec.Containers[idx]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	for name, q := range main {
		c.Resources.Requests[name] = q
		c.Resources.Limits[name] = q
	}
	return spec, nil
}

// podTemplateSpec decodes a pod template's spec into spec; no spec
// leaves it as it is.
func podTemplateSpec(tmpl map[string]any, spec *corev1.PodSpec) error {
	v, ok := tmpl["spec"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, spec)
	}
	if err != nil {
		return fmt.Errorf("spec does not decode as a pod spec: %w", err)
	}
	return nil
}

// cpuQuantity reads a resource's cpu: a number of cores (Resource.cpu is
// a Double in the operator's CRD), as whichever decoder read the object
// gives it: int64 or float64 (sigs.k8s.io/json, unstructured objects),
// json.Number (a decoder with UseNumber, as the submitter's).
func cpuQuantity(v any) (resource.Quantity, error) {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return resource.Quantity{}, fmt.Errorf("%v is not a number of cores", v)
		}
	case string:
		return resource.ParseQuantity(n)
	default:
		return resource.Quantity{}, fmt.Errorf("%v is not a number of cores", v)
	}
	if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return resource.Quantity{}, fmt.Errorf("%v is not a number of cores", v)
	}
	return *resource.NewMilliQuantity(int64(math.Round(f*1000)), resource.DecimalSI), nil
}

// flinkUnits are the units of Flink's MemorySize.parse (flink-core,
// org.apache.flink.configuration.MemorySize.MemoryUnit), all powers of
// 1024: "2048m" is 2048 MiB there, not 2.048 bytes as in Kubernetes.
var flinkUnits = []struct {
	names []string
	bytes int64
}{
	{[]string{"b", "bytes"}, 1},
	{[]string{"k", "kb", "kibibytes"}, 1 << 10},
	{[]string{"m", "mb", "mebibytes"}, 1 << 20},
	{[]string{"g", "gb", "gibibytes"}, 1 << 30},
	{[]string{"t", "tb", "tebibytes"}, 1 << 40},
}

// MemoryQuantity reads a resource's memory as the operator does: Flink's
// memory syntax (a number and an optional unit of MemorySize, "2048m",
// "2 gb"); what is not (a Kubernetes quantity such as "2Gi", which the
// operator accepts too) is read as a Kubernetes quantity.
func MemoryQuantity(s string) (resource.Quantity, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i > 0 {
		n, err := strconv.ParseInt(t[:i], 10, 64)
		unit := strings.TrimSpace(t[i:])
		if err == nil {
			if unit == "" {
				return *resource.NewQuantity(n, resource.BinarySI), nil
			}
			for _, u := range flinkUnits {
				for _, name := range u.names {
					if unit == name && n <= math.MaxInt64/u.bytes {
						return *resource.NewQuantity(n*u.bytes, resource.BinarySI), nil
					}
				}
			}
		}
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is neither a Flink memory size nor a Kubernetes quantity", s)
	}
	return q, nil
}
