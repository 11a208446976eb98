package placement

import (
	"fmt"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
)

// BenchmarkChooseFor100Clusters: one placement decision over 100
// reporting clusters, half of which the request does not fit.
func BenchmarkChooseFor100Clusters(b *testing.B) {
	clusters := make([]Cluster, 100)
	for i := range clusters {
		free := "64"
		if i%2 == 0 {
			free = "1"
		}
		clusters[i] = freeCluster(fmt.Sprintf("c-%03d", i), "96", free, free)
	}
	demand := cpuDemand("8", "2")
	b.ResetTimer()
	for b.Loop() {
		if d := ChooseFor(v1alpha1.Placement{}, jobKind, demand, LeastAllocated, clusters); d.Cluster == "" {
			b.Fatal(d.Reason)
		}
	}
}

// BenchmarkRequestsFlink: the demand of a FlinkDeployment with pod
// templates, as computed for every placement.
func BenchmarkRequestsFlink(b *testing.B) {
	spec := &v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
		"spec": map[string]any{
			"flinkConfiguration": map[string]any{"taskmanager.numberOfTaskSlots": "4"},
			"podTemplate":        map[string]any{"spec": map[string]any{"containers": list(ctr("log", rl{"cpu": "100m"}, nil))}},
			"jobManager":         map[string]any{"resource": map[string]any{"cpu": 1.0, "memory": "2048m"}},
			"taskManager":        map[string]any{"resource": map[string]any{"cpu": 2.0, "memory": "4g"}},
			"job":                map[string]any{"parallelism": int64(32)},
		}}}
	for b.Loop() {
		if _, err := Requests(spec); err != nil {
			b.Fatal(err)
		}
	}
}
